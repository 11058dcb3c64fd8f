// Builds MLA full-quantization calls (FIA-SPEC 13.3) for tests: the shapes, lengths, masks and
// storage of a CallSpec with an INT8 query and latent key, BF16 rope, dequant_scale_query
// (query_quant_mode 3) and per-tensor key/value_antiquant_scale.
#pragma once

#include <cstdint>

#include "support/call_builder.hpp"

namespace fia::test {

struct MlaFullQuantCall {
  TestCall call;  ///< the INT8 call
  /// The same values as a non-quantized BF16 MLA call (query, key, value and rope as BF16): with
  /// unit scales it has the same scores, and differs only by the int8 P of 13.3.
  TestCall twin;
};

/// spec: dtype is ignored (INT8 query, key and value, BF16 rope); rope_dim should be 64, and
/// num_kv_heads 1. With `unit_scales`, small integers (Q, K in [-3, 3], rope in [-2, 2]), every
/// latent row one of four patterns (so that a row's distinct scores differ by at least 1 before
/// scaling and several keys share the max) and every dequant scale 1;
/// otherwise Q, K uniform in [-127, 127], rope uniform in [-100, 100], key scale 1/64, value scale
/// 1/50 and per-row query scales chosen so that scores spread over a few units.
MlaFullQuantCall build_mla_full_quant_call(const CallSpec& spec, std::uint64_t seed, bool unit_scales = false);

}  // namespace fia::test
