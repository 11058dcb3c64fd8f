// The scalar steps of int8 full quantization (FIA-SPEC 13.1, 22.14, 25.1 #12), shared by both
// backends so that they round identically. The pipeline itself is written out in
// reference/full_quant.cpp (docs/numerics.md "Full quantization").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "numeric/half.hpp"

namespace fia::detail {

inline constexpr float kF16Max = 65504.0f;
/// KV columns per chunk of the online softmax (13.1, 25.1 #12).
inline constexpr std::int64_t kFullQuantChunk = 1024;

/// KV columns per chunk of MLA full quantization's online softmax (13.3).
inline constexpr std::int64_t kMlaFullQuantChunk = 512;

/// FIA-SPEC 13.3: the int8 P of MLA full quantization, 127 * exp(S - chunk max) with `e` the
/// exponential (in [0, 1]), rounded half to even (the golden's round; docs/numerics.md "MLA full
/// quantization").
inline std::int32_t quantize_mla_p(double e) { return static_cast<std::int32_t>(std::nearbyint(127.0 * e)); }

/// The "19-bit" float the device's dequantization uses: the fp32 pattern with its 13 low mantissa
/// bits cleared (sign, 8 exponent and 10 mantissa bits; 13.1, 22.14: 0.1f -> 0.0999755859375).
inline float truncate_to_19_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits &= 0xFFFFE000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

/// x clamped to +-65504 and rounded to fp16 (nearest, ties to even), as a float; NaN stays NaN.
inline float clamp_to_f16(float x) { return round_to_f16(std::clamp(x, -kF16Max, kF16Max)); }

/// Step 1-3 of a score: the exact int32 Q·K dequantized in fp32 by deqScale1 (19-bit), clamped
/// to the fp16 range and rounded to fp16, times fp16(scale) rounded to fp16.
inline float full_quant_score(std::int32_t qk, float dequant1, float scale16) {
  const float a = clamp_to_f16(static_cast<float>(qk) * dequant1);
  return clamp_to_f16(a * scale16);
}

/// P quantized for P·V: E (already fp16) times fp16(quantScale1), rounded to fp16 (25.1 #12), then
/// to an integer half to even and saturated to int8.
inline std::int8_t quantize_p(float e16, float quant1_16) {
  const float y = clamp_to_f16(e16 * quant1_16);
  const float r = std::nearbyint(y);  // the default rounding mode: half to even
  return static_cast<std::int8_t>(std::clamp(r, -128.0f, 127.0f));
}

}  // namespace fia::detail
