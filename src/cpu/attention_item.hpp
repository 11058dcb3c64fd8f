// The cpu kernels for one work item, in three phases (see plan/plan.hpp for why):
//   A  scores S = scale * (Q·Kᵀ [+ Qr·Krᵀ]) + pse over the item's columns, -inf where not allowed,
//      and each packed row's max;
//   B  with the exact row max m: l = sum exp(S - m), acc = sum round(exp(S - m)) · V;
//   C  O = acc / l (the learnable sink joins the denominator), LSE = m + ln(l).
// Packed row r of an item is query row row_begin + r / G of query head h*G + r % G.
#pragma once

#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// Where attention_out and softmax_lse rows go.
struct OutputRows {
  RowIndex out;  ///< attention_out rows (dtype Problem::out_dtype)
  RowIndex lse;  ///< softmax_lse rows (F32), used when Problem::lse
};

/// Per-worker tiles (64-byte aligned): Q [rows x (qk+rope)], K [cols x (qk+rope)], V [cols x v].
struct TileBuffers {
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
};

/// Phase A: scores[r * ld + (j - item.col_begin)] for the item's columns, and m[r] = row max
/// (-inf when the row sees nothing there).
void item_scores(const Problem& p, const TileShape& tile, const WorkItem& item, const TileBuffers& buf,
                 float* scores, std::int64_t ld, float* m);

/// Phase B: l[r] and acc[r * v_dim + d] over the item's columns, from the phase-A scores and the
/// exact row max m (over the whole row).
void item_accumulate(const Problem& p, const TileShape& tile, const WorkItem& item, const TileBuffers& buf,
                     const float* scores, std::int64_t ld, const float* m, float* l, float* acc);

/// Phase C: writes the item's output (and LSE) rows; rows with m = -inf are fully masked and left
/// as pre-filled (0 / +inf). `acc` is scaled in place.
void item_finalize(const Problem& p, const WorkItem& item, const float* m, const float* l, float* acc,
                   const OutputRows& dst);

}  // namespace fia::detail
