// A case for the bf16 dot products' subnormal inputs (cpu/bf16_dots-inl.h): a key whose weight P
// is subnormal in every row, against a V row so large that dropping it moves every output element.
#pragma once

#include <cmath>
#include <cstdint>

#include "problem/problem.hpp"
#include "support/call_builder.hpp"

namespace fia::test {

/// Key `key` of batch 0, KV head 0 gets the score -88 exactly against every query row (query dim
/// 5 set to 1 in every row of batch 0, the key's dim 5 to -88 / scale and its other dims to 0), so
/// that with the other keys' scores within 2 of 0 (random values in [-1, 1]) its E lies between
/// 2^-130 and 2^-127, subnormal in bf16 and f32; its V row is 2^126, so that E·V (1/16 to 1/2)
/// moves every output element well past the tolerance. Read as 0, it would be lost.
inline void plant_subnormal_weight(const detail::Problem& p, std::int64_t key) {
  for (std::int64_t n = 0; n < p.num_heads; ++n)
    for (std::int64_t i = 0; i < p.act_q[0]; ++i) set_stored_value(p.query.base, p.dtype, p.query.offset(0, n, i) + 5, 1.0f);
  const detail::KvRun row = p.locate(0, 0, key);
  for (std::int64_t d = 0; d < p.qk_dim; ++d)
    set_stored_value(row.key, p.kv_dtype, d, d == 5 ? static_cast<float>(-88.0 / p.scale) : 0.0f);
  for (std::int64_t d = 0; d < p.v_dim; ++d) set_stored_value(row.value, p.kv_dtype, d, std::ldexp(1.0f, 126));
}

}  // namespace fia::test
