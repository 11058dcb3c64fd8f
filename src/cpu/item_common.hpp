// Target-independent helpers of the item kernels: visibility, pse, K/V token runs, query rows,
// prefetching.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include <hwy/base.h>

#include "cpu/attention_item.hpp"
#include "cpu/convert.hpp"

namespace fia::detail {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// Scores that overflow float32 saturate at +-FLT_MAX instead of turning the softmax into NaN
/// (inf - inf), and NaN becomes +FLT_MAX; -inf stays reserved for excluded positions. A row whose
/// max is +-FLT_MAX is then recomputed in float64 (item_finalize, docs/numerics.md "Overflow").
inline float saturate(float s) {
  if (std::isnan(s)) return std::numeric_limits<float>::max();
  return std::clamp(s, -std::numeric_limits<float>::max(), std::numeric_limits<float>::max());
}

/// Bytes of `elems` stored K/V elements (int4: two per byte).
inline std::int64_t kv_row_bytes(const Problem& p, std::int64_t elems) {
  if (p.kv_format == KvFormat::kInt4) return elems / 2;
  return elems * static_cast<std::int64_t>(dtype_size(p.kv_dtype));
}

inline const std::byte* element_at(const void* base, std::int64_t offset, std::size_t es) {
  return static_cast<const std::byte*>(base) + offset * static_cast<std::int64_t>(es);
}

/// True when every (row, column) of the item's rows and columns [c0, c0 + nc) is in the band and
/// no full mask applies (a tree mask applies only from tree_start): the tile needs no per-element
/// visibility.
inline bool tile_fully_visible(const Problem& p, const WorkItem& it, std::int64_t c0, std::int64_t nc) {
  if (p.has_mask && !(p.tree_mask && c0 + nc <= p.tree_start[it.b])) return false;  // keys before a tree: visible
  return c0 >= it.row_end - 1 + p.band_lo[it.b] && c0 + nc - 1 <= it.row_begin + p.band_hi[it.b];
}

/// Sets masked scores of columns [c0, c0 + nc) to -inf and adds pse to the others (FIA-SPEC 5
/// steps 4-5, 6.3-6.4), for the item's real rows.
inline void apply_visibility(const Problem& p, const WorkItem& it, ScoreView sv, std::int64_t c0, std::int64_t nc) {
  const bool full = tile_fully_visible(p, it, c0, nc);
  if (full && !p.has_pse) return;
  const std::int64_t b = it.b, G = p.group, R = packed_rows(it);
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t n = it.query_head(G, r), i = it.query_row(r);
    float* row = sv.base + r * sv.row_stride;
    for (std::int64_t c = 0; c < nc; ++c) {
      const std::int64_t j = c0 + c;
      float& s = row[(j - it.col_begin) * sv.col_stride];
      if (!full && !p.visible(b, i, j)) {
        s = kNegInf;
      } else if (p.has_pse) {  // a pse of -inf excludes the key like a mask (25.1 #24-25)
        const float bias = load_one(p.pse.base, p.pse.dtype, p.pse_offset(b, n, i, j));
        s = bias == kNegInf ? kNegInf : saturate(s + bias);
      }
    }
  }
}

/// Prefetches every cache line that `bytes` bytes from `row` touch, however the row is aligned
/// (a 64-byte piece of a row 16 bytes past a line spans two lines: prefetching only the first left
/// D7's loads waiting on the second): by default into L2 (not L1, where strided rows would evict
/// each other before use); kLocality 3 into L1, for lines needed a few hundred cycles later, such
/// as the next pass of a kernel over rows it already holds in L2.
template <int kLocality = 2>
HWY_INLINE void prefetch_row(const void* row, std::int64_t bytes) {
  if (bytes <= 0) return;
  const auto begin = reinterpret_cast<std::uintptr_t>(row);
  for (std::uintptr_t a = begin & ~std::uintptr_t{63}; a < begin + static_cast<std::uintptr_t>(bytes); a += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(a), 0, kLocality);
}

/// The cache lines that `bytes` bytes from `row` touch (those prefetch_row fetches), prefetched
/// into L2 (prefetch_row's default) a few at a time over the steps of a decode product loop (Q·Kᵀ
/// over a group of tokens, an AVX2 P·V pass) instead of all at once before it: a Q·Kᵀ group of 3
/// or 4 tokens had issued its 12-16 lines in one burst, whose misses held the line fill buffers
/// that the group's own loads from L2 then waited for (Emerald Rapids VM, 2 threads, cold,
/// alternating calls in one process: D1 0.95-1.00x the time on AVX3 and 0.92-0.95x on AVX2, D2
/// 0.94-0.98x and 0.95-0.98x, D4 0.98-1.02x and 0.96-0.99x).
struct SpreadLines {
  const char* next = nullptr;  ///< the next line to prefetch
  std::int64_t left = 0;       ///< lines not yet prefetched
  std::int64_t per_step = 0;   ///< lines per step (over())

  /// The lines of [row, row + bytes); none for bytes <= 0.
  static SpreadLines of(const void* row, std::int64_t bytes) {
    if (bytes <= 0) return {};
    const auto begin = reinterpret_cast<std::uintptr_t>(row);
    const std::uintptr_t first = begin & ~std::uintptr_t{63};
    const auto lines = static_cast<std::int64_t>((begin + static_cast<std::uintptr_t>(bytes) - first + 63) / 64);
    return {reinterpret_cast<const char*>(first), lines, 0};
  }
  /// Spreads the lines left over `steps` steps (at least one line per step while any are left).
  HWY_INLINE void over(std::int64_t steps) { per_step = steps > 0 ? (left + steps - 1) / steps : left; }
  /// Prefetches the next per_step lines (fewer where fewer are left).
  HWY_INLINE void step() {
    for (std::int64_t e = 0; e < per_step && left > 0; ++e, --left, next += 64) __builtin_prefetch(next, 0, 2);
  }
  /// Prefetches every line left (after the loop: steps it did not take).
  HWY_INLINE void rest() {
    for (; left > 0; --left, next += 64) __builtin_prefetch(next, 0, 2);
  }
};

/// Prefetches into L2 every cache line of the first `elems` elements (`es` bytes each) of item
/// it's rows in `rows` (rows of a query-shaped tensor: query, query_rope, attention_out). Always
/// inlined (HWY_INLINE), as are its callers, WorkItem::for_each_row and the lambda it calls: GCC
/// takes a function whose only effect is prefetching for one without effects and drops its calls
/// (it had dropped every call of these three in cpu/run.cpp, and did again with the lambda not
/// forced inline).
HWY_INLINE void prefetch_item_rows(const Problem& p, const WorkItem& it, const RowIndex& rows, std::size_t es,
                                   std::int64_t elems) {
  it.for_each_row(p.group, [&](std::int64_t, std::int64_t n, std::int64_t i) __attribute__((always_inline)) {
    prefetch_row(element_at(rows.base, rows.offset(it.b, n, i), es), elems * static_cast<std::int64_t>(es));
  });
}

/// Prefetches into L2 every cache line of the query rows (and their rope parts) of item it. A
/// worker mostly runs items one after another, so the next item's rows arrive while this one
/// computes; otherwise each item waited on its query rows from memory (P3 on Zen 4: 0.976x the
/// time on AVX-512, 0.967x on AVX2, 19 and 17 of 24 alternating pairs faster).
HWY_INLINE void prefetch_query_rows(const Problem& p, const WorkItem& it) {
  prefetch_item_rows(p, it, p.query, dtype_size(p.dtype), p.qk_dim);
  if (p.rope_dim > 0) prefetch_item_rows(p, it, p.query_rope, dtype_size(p.dtype), p.rope_dim);
}

/// Prefetches into L2 every cache line of item it's attention_out rows, which item_finalize
/// writes once the item's P·V is done. Written cold, the rows' stores had waited on memory, full
/// store buffer and all (P3 on Zen 4, AVX3: `ScaleStoreRow` 3.8 % of the samples, 1.4 % with the
/// prefetch issued after the item's scores; P3 0.985x the time, P1 0.993x, faster in 8 of 8
/// alternating pairs each). `prefetchw` there instead ran P3 1.02x slower than this.
HWY_INLINE void prefetch_output_rows(const Problem& p, const WorkItem& it, const OutputRows& dst) {
  prefetch_item_rows(p, it, dst.out, dtype_size(p.out_dtype), p.v_dim);
}

/// Tokens of an NZ cache (FIA-SPEC 9.1) copied into contiguous rows at a time: 64 rows of 576
/// bf16 elements (decode MLA) stay in L2.
constexpr std::int64_t kUntileTokens = 64;

/// The per-thread buffer for_each_run copies NZ rows into.
inline std::vector<std::byte>& untile_scratch() {
  static thread_local std::vector<std::byte> scratch;
  return scratch;
}

/// Calls fn(token index relative to j0, run) for consecutive runs covering tokens [j0, j0 + count)
/// of batch b, KV head h; run.count is clipped to the range. With kUntile the rows `parts` of an
/// NZ cache come copied into contiguous rows of this head (kUntileTokens at a time), so that a
/// kernel reads one row layout (fn must then not call for_each_run again while it holds the run);
/// without, runs come as stored, NZ rows tiled (KvRun::*_tiling).
template <bool kUntile = true, class Fn>
void for_each_run(const Problem& p, std::int64_t b, std::int64_t h, std::int64_t j0, std::int64_t count, KvParts parts,
                  Fn fn) {
  std::int64_t c = 0;
  while (c < count) {
    KvRun run = p.locate(b, h, j0 + c);
    run.count = std::min(run.count, count - c);
    if (kUntile && run.tiled()) {
      run.count = std::min(run.count, kUntileTokens);
      run = p.untile(run, parts, &untile_scratch());
    }
    fn(c, run);
    c += run.count;
  }
}

/// Query (and rope) row of packed row r as floats at dst[x * stride] for x in [0, qk_dim) and
/// [qk_dim, qk_dim + rope_dim).
inline void load_query_row(const Problem& p, const WorkItem& it, std::int64_t r, float* dst, std::int64_t stride) {
  const std::int64_t n = it.query_head(p.group, r), i = it.query_row(r);
  const std::size_t es = dtype_size(p.dtype);
  const std::byte* q = element_at(p.query.base, p.query.offset(it.b, n, i), es);
  for (std::int64_t x = 0; x < p.qk_dim; ++x) dst[x * stride] = load_one(q, p.dtype, x);
  if (p.rope_dim == 0) return;
  const std::byte* qr = element_at(p.query_rope.base, p.query_rope.offset(it.b, n, i), es);
  for (std::int64_t x = 0; x < p.rope_dim; ++x) dst[(p.qk_dim + x) * stride] = load_one(qr, p.dtype, x);
}

}  // namespace fia::detail
