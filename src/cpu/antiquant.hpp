// Antiquant (FIA-SPEC 12) in the decode kernels: the scales fold multiplicatively around the
// products, so scaled K and V are never formed.
//
// With the factors of problem/problem.hpp (scale = cs[h][d] * ts(t), offset = co[h][d] + to(t)) and
// x' = x + offset (formed per element before any product: decode_rows-inl.h for_each_row_block):
//   score(t) = Σ_d q[d] x'[t][d] cs[d] ts(t) = ts(t) * Σ_d (q ⊙ cs)[d] x'[t][d]
//   acc[d]   = Σ_t P(t) x'[t][d] cs[d] ts(t) = cs[d] * Σ_t (P ⊙ ts)(t) x'[t][d]
// Products reassociated this way differ from dequantize-then-multiply only by f32 rounding; an
// offset is never folded into a separate sum, where cancellation would lose the result.
// Target-independent: the work here is per row, not per product; the per-token scales are applied
// by the decode kernels a vector at a time (decode-inl.h, token_scale_rows).
#pragma once

#include <cstdint>

#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// Multiplies the item's loaded query rows (packed row r at q + r * kw, qk_dim floats) by the key
/// channel scales of their KV head (FIA-SPEC 12.1).
void fold_key_scale(const Problem& p, const WorkItem& it, float* q, std::int64_t kw);

/// The token scales of packed row r of item `it` from logical column j0 on (per-token modes of
/// FIA-SPEC 12.3): the scale of column j0 + c at (*scales)[c * *stride]. False without token scales.
/// The decode kernels multiply the scores (K) and P (V) by them (decode-inl.h, token_scale_rows).
bool row_token_scales(const Problem& p, const Antiquant& q, const WorkItem& it, std::int64_t r, std::int64_t j0,
                      const float** scales, std::int64_t* stride);

/// acc[r][d] *= cs[d] (the value channel scales) for the item's rows. No-op without them.
void finish_values(const Problem& p, const WorkItem& it, float* acc);

}  // namespace fia::detail
