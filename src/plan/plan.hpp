// Layer 4: Problem -> work items and workspace (pure; no thread count in any split decision).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "problem/problem.hpp"

namespace fia::detail {

/// One independent unit of cpu work: query rows [row_begin, row_end) of batch `b` for all
/// `group` query heads that share KV head `h` (GQA packing), over every KV column they see.
/// Every output row belongs to exactly one item, so items run in any order on any thread.
struct WorkItem {
  std::int64_t b = 0, h = 0;
  std::int64_t row_begin = 0, row_end = 0;
};

/// Tile sizes of the cpu kernels, chosen from the problem shape only.
struct TileShape {
  std::int64_t rows = 0;  ///< packed query rows (group x query rows) per tile
  std::int64_t cols = 0;  ///< KV columns per tile
};

/// The cpu backend's schedule.
struct CpuPlan {
  TileShape tile;
  std::vector<WorkItem> items;
  int threads = 1;                       ///< workers the workspace is sized for
  std::size_t floats_per_thread = 0;     ///< scratch per worker
  std::size_t workspace_bytes = 0;       ///< threads * floats_per_thread * 4, 64-byte padded
};

/// Builds the schedule for `threads` workers (>= 1). Items and tiles depend only on the problem.
CpuPlan make_cpu_plan(const Problem& p, int threads);

/// Floats of scratch one worker needs for `tile` on problem `p`.
std::size_t tile_floats(const Problem& p, const TileShape& tile);

}  // namespace fia::detail
