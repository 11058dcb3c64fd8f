// Layer 4: Problem -> work items and workspace (pure; no thread count in any split decision).
//
// FIA rounds the unnormalised exponentials exp(S - m) to the query dtype with m the FINAL row max
// (FIA-SPEC 5 step 7, 25.1 #4), so the cpu backend computes every score of a row, takes the exact
// max, and only then forms P. A work item therefore runs in phases: (A) scores and their row
// max, (B) P = round(exp(S - m)) and P·V, (C) normalisation.
//
// Small items run all phases on one worker with their scores in its scratch. Items whose scores
// would not fit PlanLimits::score_budget, and decode-like items (few query rows, long KV) of a
// call with too few items for parallelism (PlanLimits::split_items_below), become split groups:
// their KV range is cut into fixed-size chunks, phase A of all chunks runs, then phase B with the
// exact max over the chunks, then the chunk partials are summed in chunk order. Groups run in
// waves whose stored scores and partials fit PlanLimits::wave_budget; a group too large to store
// its scores recomputes them in phase B. A call with enough split groups for every worker
// (PlanLimits::whole_groups_from) runs each group whole on one worker instead, its scores and
// partials in that worker's scratch: the same functions over the same chunks, so the same bits;
// only this schedule depends on the thread count.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <hwy/base.h>

#include "problem/problem.hpp"

namespace fia::detail {

/// Query rows [row_begin, row_end) of batch b, for KV heads h .. h + kv_heads and of each the
/// query heads head0 .. head0 + heads (GQA packing: they share the KV head's K and V), over
/// logical KV columns [col_begin, col_end).
/// Packed row r = (query row - row_begin) * kv_heads * heads + kv * heads + g is query head
/// (h + kv) * G + head0 + g. More than one KV head only for narrow items (decode).
struct WorkItem {
  std::int64_t b = 0, h = 0;
  std::int64_t row_begin = 0, row_end = 0;
  std::int64_t head0 = 0, heads = 1;
  std::int64_t kv_heads = 1;
  std::int64_t col_begin = 0, col_end = 0;
  std::int64_t split = -1;  ///< index into CpuPlan::splits, or -1 for a self-contained item
  std::int64_t chunk = 0;   ///< chunk index within its split group
  /// Logical column up to which decode prefetches run on past col_end (into the chunks its worker
  /// runs next: CpuPlan::whole_groups); col_end when smaller.
  std::int64_t prefetch_end = 0;

  std::int64_t query_head(std::int64_t group, std::int64_t r) const {
    return (h + (r / heads) % kv_heads) * group + head0 + r % heads;
  }
  std::int64_t query_row(std::int64_t r) const { return row_begin + r / (heads * kv_heads); }

  /// Calls fn(r, query_head(group, r), query_row(r)) for every packed row r in order, counting
  /// instead of dividing (a 64-bit division per row and index: P2 took 1.009x the time).
  /// Always inlined: GCC drops calls of a function whose only effect is prefetching
  /// (cpu/item_common.hpp's prefetch_item_rows).
  template <class Fn>
  HWY_INLINE void for_each_row(std::int64_t group, Fn&& fn) const {
    std::int64_t r = 0;
    for (std::int64_t i = row_begin; i < row_end; ++i)
      for (std::int64_t kv = 0; kv < kv_heads; ++kv)
        for (std::int64_t g = 0, n = (h + kv) * group + head0; g < heads; ++g, ++r, ++n) fn(r, n, i);
  }
};

/// Packed rows from which an item uses the wide (prefill) kernels, and the multiple its rows are
/// padded to there (the widest f32 vector, AVX-512).
inline constexpr std::int64_t kWideRows = 16;
inline constexpr std::int64_t kRowPad = 16;
/// Packed rows of the wide items whose products read K and V in place (one row block: decode MLA's
/// 16 heads, multi-token GQA decode; cpu/wide_inplace-inl.h).
inline constexpr std::int64_t kInplaceRows = kWideRows;

/// Packed rows of an item (query rows x KV heads x query heads per KV head).
inline std::int64_t packed_rows(const WorkItem& it) { return (it.row_end - it.row_begin) * it.kv_heads * it.heads; }
inline bool is_wide(const WorkItem& it) { return it.kv_heads == 1 && packed_rows(it) >= kWideRows; }
/// Rows an item's buffers hold: wide items round up to kRowPad.
inline std::int64_t padded_rows(const WorkItem& it) {
  const std::int64_t r = packed_rows(it);
  return is_wide(it) ? (r + kRowPad - 1) / kRowPad * kRowPad : r;
}

/// A split group. Wave storage (floats from the wave's base): when `stored`, scores
/// [Rp x cols] at scores_offset; always, per chunk the row max [Rp], row sum [Rp] and
/// accumulators [Rp x v_dim] at partial_offset.
struct SplitGroup {
  WorkItem item;
  std::int64_t chunks = 0;
  std::int64_t chunk_cols = 0;
  /// Chunk c covers columns [origin + c * chunk_cols, origin + (c + 1) * chunk_cols) clipped to
  /// the item's: origin = item.col_begin, or on the running-max grid (PRule kRunningMax).
  std::int64_t chunk_origin = 0;
  bool stored = true;
  std::size_t scores_offset = 0;
  std::size_t partial_offset = 0;
};

/// Chunk c of split group g: its item over the chunk's columns.
inline WorkItem chunk_item(const SplitGroup& g, std::int64_t c) {
  WorkItem ch = g.item;
  ch.chunk = c;
  ch.col_begin = std::max(g.item.col_begin, g.chunk_origin + c * g.chunk_cols);
  ch.col_end = std::min(g.item.col_end, g.chunk_origin + (c + 1) * g.chunk_cols);
  return ch;
}

/// Groups [group_begin, group_end) and their chunks [chunk_begin, chunk_end), run together.
struct Wave {
  std::int64_t group_begin = 0, group_end = 0;
  std::int64_t chunk_begin = 0, chunk_end = 0;
};

/// Tile sizes of the cpu kernels, chosen from the problem shape only.
struct TileShape {
  std::int64_t rows = 0;  ///< padded packed rows of the largest item
  std::int64_t cols = 0;  ///< KV columns per tile
};

/// Floats between the rows of a widened V tile of v_dim floats per row. P·V walks the tile down
/// its columns, and rows a multiple of 512 bytes apart fall into a few L1 sets that cannot hold
/// them all (a 128-row tile of 512 floats: 2 of 64 sets), so such rows get one cache line more.
inline std::int64_t v_tile_stride(std::int64_t v_dim) { return v_dim % 128 == 0 ? v_dim + 16 : v_dim; }

struct ItemScratch;
struct ScoreView;
struct RowStats;

/// The phase A and B kernels of work items (cpu/attention_item.hpp) for one (query dtype x KV
/// format) pair on the running instruction set, chosen once when the plan is made; narrow
/// (decode), wide (prefill) or in-place wide (wide items of kInplaceRows rows, when the problem
/// has in-place kernels on this instruction set and AMX tiles do not take both products of its
/// wide items: null otherwise) is then picked per item by its shape.
struct ItemKernels {
  using Scores = void (*)(const Problem&, const TileShape&, const WorkItem&, const ItemScratch&, ScoreView, float*);
  using Accumulate = void (*)(const Problem&, const TileShape&, const WorkItem&, const ItemScratch&, ScoreView,
                              const RowStats&, float*, float*);
  Scores narrow_scores = nullptr, wide_scores = nullptr, inplace_scores = nullptr;
  Accumulate narrow_accumulate = nullptr, wide_accumulate = nullptr, inplace_accumulate = nullptr;
  /// The wide kernels read K and V where they are stored (bf16 dot products for both products,
  /// cpu/prefill_dots-inl.h): a worker's WidenedKv would hold nothing for them.
  bool wide_reads_kv_in_place = false;
};

/// The item kernels for `p` on the best instruction set allowed now (FIA_ISA, force_isa).
ItemKernels select_item_kernels(const Problem& p);

/// The cpu backend's schedule.
struct CpuPlan {
  ItemKernels kernels;
  TileShape tile;
  std::vector<WorkItem> items;   ///< self-contained items (all three phases)
  std::vector<WorkItem> chunks;  ///< chunk items of split groups, grouped by group
  std::vector<SplitGroup> splits;
  std::vector<Wave> waves;         ///< empty with whole_groups
  /// Split groups run whole, one worker each, their storage (scores_offset, partial_offset) in
  /// the worker's scratch (group_floats of it) instead of a wave's.
  bool whole_groups = false;
  std::size_t group_floats = 0;
  int threads = 1;                    ///< workers the per-thread scratch is sized for
  std::size_t floats_per_thread = 0;
  std::int64_t widened_kv_cols = 0;   ///< columns of each worker's WidenedKv (0: none)
  std::size_t wave_floats = 0;        ///< storage of the largest wave
  std::size_t workspace_bytes = 0;
  /// The items and split groups write every row of attention_out (fully masked rows as 0), so
  /// that run() need not zero it first for the rows no item computes (FIA-SPEC 7.6): zeroing P3's
  /// 8 MB output on the calling thread, before the workers start, cost about 3 % of its time.
  bool writes_every_row = false;
};

/// True when `item` runs on the in-place wide kernels (the plan's problem has them on this
/// instruction set, and the item is one row block of kInplaceRows rows).
inline bool runs_in_place(const CpuPlan& plan, const WorkItem& item) {
  return plan.kernels.inplace_scores != nullptr && is_wide(item) && padded_rows(item) == kInplaceRows;
}

/// Schedule knobs (tests force other chunk sizes; results then change only within tolerance).
struct PlanLimits {
  std::int64_t chunk_cols = 512;        ///< KV tokens per chunk of a split group, at least
  std::int64_t score_budget = 1 << 18;  ///< floats of stored scores per self-contained item
  std::int64_t wave_budget = 1 << 24;   ///< floats of storage per wave
  double serial_work = 1 << 20;          ///< multiply-adds below which a call runs on one thread
  /// Items below which a decode-like call splits its long rows into chunks. With this many items
  /// a machine of up to 64 workers has one or more each, and a split group's stored scores
  /// (beyond L2) and merge only cost time: D7 (64 items) took about 0.9x the time unsplit (Zen 4
  /// VM, AVX3, 2 threads). A count of the problem's, never of the workers (bits do not depend on
  /// the thread count).
  std::int64_t split_items_below = 64;
  /// Split groups per worker from which each group runs whole on one worker (phase A of its
  /// chunks, phase B, the merge), when every group's scores and partials fit score_budget: they
  /// then stay in that worker's L2 instead of a wave's buffer (written cold in phase A, read back
  /// in phase B), and the call is one parallel loop instead of three or four with waits between
  /// them. Zen 4 VM, 2 threads, cold KV, calls of both schedules in one process in ABBA order,
  /// medians of 24-60 calls each: D2 (16 groups) 0.944x the time (8 sets, 0.898-0.982x) on AVX3
  /// and 0.981x (5 sets, 0.920-1.038x) on AVX2; D1 (8 groups) 0.955x (0.844-0.975x) and 0.953x
  /// (0.934-1.023x); D1 with int8 K/V 0.951x (0.937-0.973x, AVX3). Fewer groups than this per
  /// worker keep the chunks' schedule, which spreads a call over more workers. Results do not
  /// depend on it.
  std::int64_t whole_groups_from = 4;
  /// Bytes per worker of K and V columns widened to f32 and kept across the wide items of one KV
  /// head (WidenedKv); 0 widens them again for every item. Results do not depend on it. 2 MiB
  /// holds 1927 columns at head dim 128: nearly every item of a causal prefill of 2048 tokens (P1)
  /// reads its columns from the store, where 512 KiB (481 columns) had every later item widen the
  /// rest again from the fp16 rows (12 % of P1's samples). In-process A/B against 512 KiB
  /// (Emerald Rapids VM, 2 threads): P1 0.91x the time on AVX3, 0.95x on AVX2; P2 and P3
  /// unchanged. 4 MiB took P1 the same time and 4096 tokens 0.98x, but a store per worker should
  /// stay within a core's share of L2 and L3 (about 2 MiB of L3 per core on Sapphire Rapids)
  /// however many workers run, or many workers would read their stores from memory.
  std::int64_t widened_kv_bytes = std::int64_t{1} << 21;
  /// Bytes of K and V rows (all of a split group's KV heads, rope parts included) per chunk, where
  /// that is more than chunk_cols tokens; 0: chunk_cols tokens alone. Chunks of int8 and int4
  /// caches then read as many bytes as 512 fp16 tokens at head dim 128: D3 (int8, chunks of 1024
  /// tokens) took 0.962x the time, D5 (int4, 2048) 0.939x on a Zen 4 VM (AVX3, 2 threads, faster
  /// in 8 of 8 alternating pairs each; capped at AVX2 0.978x and 0.966x, within the noise; a
  /// second set: AVX3 0.950x and 0.936x, 8 of 8 each, AVX2 0.936x, 7 of 8, and 1.001x). Twice
  /// the bytes (fp16 1024 tokens, int8 2048) was slower in `fia bench`: D1 1.03x and 1.12x, D3
  /// 1.21x and 1.27x (AVX3, AVX2).
  std::int64_t chunk_bytes = std::int64_t{256} << 10;
};

/// Builds the schedule for `threads` workers (>= 1). Items, tiles and chunks depend only on the
/// problem and the limits; `threads` only sizes the per-thread scratch.
CpuPlan make_cpu_plan(const Problem& p, int threads, const PlanLimits& limits = {});

/// Columns [lo, hi] (inclusive) some row in [row_begin, row_end) of batch b can see; lo > hi
/// when none.
void visible_columns(const Problem& p, std::int64_t b, std::int64_t row_begin, std::int64_t row_end,
                     std::int64_t* lo, std::int64_t* hi);

}  // namespace fia::detail
