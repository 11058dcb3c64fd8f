// Layer 4: Problem -> work items and workspace (pure; no thread count in any split decision).
//
// FIA rounds the unnormalised exponentials exp(S - m) to the query dtype with m the FINAL row max
// (FIA-SPEC 5 step 7, 25.1 #4), so the cpu backend computes every score of a row, takes the exact
// max, and only then forms P. A work item therefore runs in phases: (A) scores and their row
// max, (B) P = round(exp(S - m)) and P·V, (C) normalisation. Items with few query rows and a long
// KV range are split into fixed-size KV chunks ("split groups", flash-decoding): phase A of all
// chunks runs first, then phase B with the exact max over chunks, then a merge in chunk order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "problem/problem.hpp"

namespace fia::detail {

/// Query rows [row_begin, row_end) of batch b for all `group` query heads of KV head h (GQA
/// packing), over logical KV columns [col_begin, col_end).
struct WorkItem {
  std::int64_t b = 0, h = 0;
  std::int64_t row_begin = 0, row_end = 0;
  std::int64_t col_begin = 0, col_end = 0;
  std::int64_t split = -1;  ///< index into CpuPlan::splits, or -1 for a self-contained item
  std::int64_t chunk = 0;   ///< chunk index within its split group
};

/// One split group: the rows of `item` over its whole column range, cut into `chunks` chunks.
/// Global workspace (floats, from CpuPlan::global offset): scores [R x cols], then per chunk the
/// row max [R], the row sum [R] and the accumulators [R x v_dim], R = packed rows.
struct SplitGroup {
  WorkItem item;
  std::int64_t chunks = 0;
  std::size_t offset = 0;  ///< first float of this group in the global workspace
};

/// Tile sizes of the cpu kernels, chosen from the problem shape only.
struct TileShape {
  std::int64_t rows = 0;  ///< packed query rows (group x query rows) per tile, at most
  std::int64_t cols = 0;  ///< KV columns per tile
};

/// The cpu backend's schedule.
struct CpuPlan {
  TileShape tile;
  std::int64_t chunk_cols = 0;      ///< KV tokens per chunk of a split group
  std::vector<WorkItem> items;      ///< self-contained items (all three phases)
  std::vector<WorkItem> chunks;     ///< chunk items of split groups (phases A, then B)
  std::vector<SplitGroup> splits;
  int threads = 1;                  ///< workers the per-thread scratch is sized for
  std::size_t floats_per_thread = 0;
  std::size_t global_floats = 0;    ///< split-group storage
  std::size_t workspace_bytes = 0;
};

/// Builds the schedule for `threads` workers (>= 1). Items, tiles and chunks depend only on the
/// problem; `threads` only sizes the per-thread scratch.
CpuPlan make_cpu_plan(const Problem& p, int threads);

/// Columns [lo, hi] (inclusive) some row in [row_begin, row_end) of batch b can see; lo > hi
/// when none.
void visible_columns(const Problem& p, std::int64_t b, std::int64_t row_begin, std::int64_t row_end,
                     std::int64_t* lo, std::int64_t* hi);

}  // namespace fia::detail
