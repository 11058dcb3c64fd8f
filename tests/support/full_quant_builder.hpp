// Builds int8 full-quantization calls (FIA-SPEC 13.1) for tests: the shapes, lengths, masks and
// pse of a CallSpec with int8 query, key and value and the three per-tensor scales.
#pragma once

#include <cstdint>

#include "support/call_builder.hpp"

namespace fia::test {

struct FullQuantSpec {
  CallSpec spec;           ///< dtype is ignored: query, key and value become INT8
  bool int8_out = false;   ///< quant_scale2 (post-quant, FIA-SPEC 14)
  bool per_channel = false;  ///< quant_scale2 (and offset) of shape (Q_N, V_D)
  bool offset = false;     ///< quant_offset2
};

struct FullQuantCall {
  TestCall call;
  float offset_value = 0.0f;  ///< the per-tensor quant_offset2, when there is one
};

/// Random int8 Q/K/V in [-127, 127]; dequant_scale1 chosen so that scores spread over a few units
/// (as UINT64 for odd seeds), quant_scale1 127, dequant_scale2 1 / (127 * 16).
FullQuantCall build_full_quant_call(const FullQuantSpec& fs, std::uint64_t seed);

/// BNSD, one head, one query row of ones over L keys of head dim D: K(j, d) = j % 5 - 2, V(j, d)
/// = (j + d) % 7 - 3; dequant_scale1 0.01, quant_scale1 127, dequant_scale2 1/127, scale 0.5, LSE.
FullQuantCall hand_call(std::int64_t L, std::int64_t D);

/// Sets every 7th element of an INT8 tensor to -128, a byte the builder does not draw (its values
/// lie in [-127, 127]).
void put_int8_extremes(const TensorView& t);
/// Plans and runs a valid call (asserting success).
Outputs run_full_quant(const FiaArgs& args, Backend backend, int threads);

/// Element k (row-major) of an F16, BF16, F32 or I8 tensor.
double value_at(const OwnedTensor& t, std::int64_t k);

}  // namespace fia::test
