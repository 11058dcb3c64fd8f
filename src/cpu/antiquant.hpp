// Antiquant (FIA-SPEC 12) in the decode kernels: the scales fold multiplicatively around the
// products, so scaled K and V are never formed.
//
// With the factors of problem/problem.hpp (scale = cs[h][d] * ts(t), offset = co[h][d] + to(t)) and
// x' = x + offset (formed per element before any product: decode-inl.h for_each_row_block):
//   score(t) = Σ_d q[d] x'[t][d] cs[d] ts(t) = ts(t) * Σ_d (q ⊙ cs)[d] x'[t][d]
//   acc[d]   = Σ_t P(t) x'[t][d] cs[d] ts(t) = cs[d] * Σ_t (P ⊙ ts)(t) x'[t][d]
// Products reassociated this way differ from dequantize-then-multiply only by f32 rounding; an
// offset is never folded into a separate sum, where cancellation would lose the result.
// Target-independent: the work here is per row and per token, not per product.
#pragma once

#include <cstdint>

#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// Multiplies the item's loaded query rows (packed row r at q + r * kw, qk_dim floats) by the key
/// channel scales of their KV head (FIA-SPEC 12.1).
void fold_key_scale(const Problem& p, const WorkItem& it, float* q, std::int64_t kw);

/// Multiplies the products of the item's rows with tokens [j0, j0 + count) (logical columns of one
/// KvRun, element (r, c) at s[r * row_stride + c]) by the key token scales. No-op without them.
void finish_key_scores(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, float* s,
                       std::int64_t row_stride);

/// Multiplies P of tokens [j0, j0 + count) (one KvRun; element (r, c) at pr[r * row_stride + c])
/// by the value token scales; a masked key (P = 0) stays 0 whatever its scale slot holds
/// (25.1 #24). No-op without token scales.
void scale_p_for_values(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, float* pr,
                        std::int64_t row_stride);

/// acc[r][d] *= cs[d] (the value channel scales) for the item's rows. No-op without them.
void finish_values(const Problem& p, const WorkItem& it, float* acc);

}  // namespace fia::detail
