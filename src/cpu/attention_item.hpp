// The cpu kernel for one work item: flash-style online softmax over KV tiles, f32 accumulation.
#pragma once

#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// Where a work item writes its rows.
struct OutputRows {
  RowIndex out;       ///< attention_out rows (dtype Problem::out_dtype)
  RowIndex lse;       ///< softmax_lse rows (F32), used when Problem::lse
};

/// Computes the output (and LSE) rows of `item` into `dst`, using `scratch` (tile_floats floats,
/// 64-byte aligned). Rows without any allowed column are left untouched (the caller pre-fills 0
/// and +inf). Deterministic: the result depends only on the problem, the item and the tile shape.
void compute_item(const Problem& p, const TileShape& tile, const WorkItem& item, const OutputRows& dst,
                  float* scratch);

}  // namespace fia::detail
