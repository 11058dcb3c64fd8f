// Antiquant (FIA-SPEC 12) in the decode kernels, without materialising dequantized K or V: the
// scales and offsets are folded around the integer rows' dot products.
//
// With the factors of problem/problem.hpp (scale = cs[h][d] * ts(t), offset = co[h][d] + to(t)):
//   score(t) = Σ_d q[d] (k[t][d] + co[d] + to(t)) cs[d] ts(t)
//            = ts(t) * ( Σ_d q'[d] k[t][d]  +  a  +  to(t) * b ),   q' = q ⊙ cs, a = Σ q'⊙co, b = Σ q'
//   acc[d]   = Σ_t P(t) (v[t][d] + co[d] + to(t)) cs[d] ts(t)
//            = cs[d] * ( Σ_t P'(t) v[t][d]  +  co[d] Σ_t P'(t)  +  Σ_t P'(t) to(t) ),   P' = P ⊙ ts
// The kernels compute the raw integer-row products Σ q' k and Σ P' v; these helpers do the rest.
// Target-independent: the work here is per row and per token, not per element.
#pragma once

#include <cstdint>

#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// True when the key side needs the per-row terms a and b (a channel offset or token factors).
bool key_needs_terms(const Problem& p);
/// True when the value side needs per-row sums of P (a channel offset or token factors).
bool value_needs_sums(const Problem& p);

/// Multiplies the item's loaded query rows (packed row r at q + r * kw, qk_dim floats) by the key
/// channel scales of their KV head, and sets a[r] = Σ q'⊙co and b[r] = Σ q' (FIA-SPEC 12.1).
void fold_key_scale(const Problem& p, const WorkItem& it, float* q, std::int64_t kw, float* a, float* b);

/// Turns the raw products of the item's rows with tokens [j0, j0 + count) (logical columns of one
/// KvRun, element (r, c) at s[r * row_stride + c]) into the scores with dequantized keys:
/// s = ts * (s + a + to * b). A no-op when !key_needs_terms(p).
void finish_key_scores(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, float* s,
                       std::int64_t row_stride, const float* a, const float* b);

/// Multiplies P of tokens [j0, j0 + count) (one KvRun; element (r, c) at pr[r * row_stride + c])
/// by the value token scales and adds Σ P' to sum_p[r] and Σ P'⊙to to sum_po[r].
void scale_p_for_values(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, float* pr,
                        std::int64_t row_stride, float* sum_p, float* sum_po);

/// acc[r][d] = cs[d] * (acc[r][d] + co[d] * sum_p[r] + sum_po[r]) for the item's rows.
void finish_values(const Problem& p, const WorkItem& it, float* acc, const float* sum_p, const float* sum_po);

}  // namespace fia::detail
