// Post-quantization of the attention output to int8 (FIA-SPEC 14.1, 25.1 #3): the device formula
// and the vendor golden's, element by element. Shared by both backends, so that they agree bit for
// bit on the same float value.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "fia/args.hpp"
#include "numeric/half.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// x rounded to fp16 to nearest, ties away from zero (AscendC CAST_ROUND), as a float.
inline float round_to_f16_ties_away(float x) {
  const float a = round_to_f16(x);  // ties to even
  if (a == x || !std::isfinite(a)) return a;
  // The other fp16 neighbour of x: one fp16 step from a towards x.
  const std::uint16_t h = f32_to_f16(a);
  const bool up = (x > a) == (a >= 0.0f);  // away from zero in magnitude
  const std::uint16_t other_bits = static_cast<std::uint16_t>(up ? h + 1 : h - 1);
  const float other = f16_to_f32(other_bits);
  const double da = std::fabs(static_cast<double>(x) - a), dother = std::fabs(static_cast<double>(other) - x);
  return da == dother && std::fabs(other) > std::fabs(a) ? other : a;
}

/// The int8 of a value already rounded for it: saturated to [-128, 127]; NaN gives 0.
inline std::int8_t saturate_int8(double r) {
  if (std::isnan(r)) return 0;
  return static_cast<std::int8_t>(r < -128.0 ? -128.0 : r > 127.0 ? 127.0 : r);
}

/// FIA-SPEC 14.1, device: y = fp32(o) * scale + offset in fp32, rounded to fp16 (ties away from
/// zero), then to an integer (ties away from zero), saturated to int8.
///
/// Computed on the float's bits, without an fp16 conversion: |y| is clamped to 256 (beyond 128
/// everything saturates alike), values below 2^-14 (fp16 subnormals) become 0 as integers anyway,
/// and for the rest rounding away the 13 low mantissa bits with a carry of half their weight is
/// fp16 rounding with ties away from zero (equal to round_to_f16_ties_away, tested exhaustively
/// around every fp16 midpoint in tests/kernels/post_quant_test.cpp).
inline std::int8_t post_quant_device(float o, float scale, float offset) {
  const float product = o * scale;
  float y = product + offset;
  if (std::isnan(y)) return 0;
  y = y < -256.0f ? -256.0f : y > 256.0f ? 256.0f : y;
  std::uint32_t bits;
  std::memcpy(&bits, &y, 4);
  const std::uint32_t sign = bits & 0x80000000u;
  std::uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag < 0x38800000u) return 0;  // |y| < 2^-14
  mag = (mag + 0x1000u) & ~0x1FFFu;  // fp16 grid, ties away from zero
  float h;
  std::memcpy(&h, &mag, 4);
  const int q = static_cast<int>(h + 0.5f);  // h >= 0: half away from zero
  return static_cast<std::int8_t>(sign ? -std::min(q, 128) : std::min(q, 127));
}

/// FIA-SPEC 14.1, golden G1: h = fp16(o); h = fp16(h * fp16(scale)); h = fp16(h + fp16(offset)),
/// every fp16 rounding to nearest even; clamp to [-256, 255]; round half to even; saturate.
inline std::int8_t post_quant_golden(float o, float scale, float offset) {
  float h = round_to_f16(o);
  h = round_to_f16(h * round_to_f16(scale));
  h = round_to_f16(h + round_to_f16(offset));
  h = h < -256.0f ? -256.0f : h > 255.0f ? 255.0f : h;
  return saturate_int8(std::nearbyint(h));
}

/// Quantizes one output row of query head n: dst[d] = post_quant(src[d]) with the scale and offset
/// of (n, d) (per-tensor or per-channel, FIA-SPEC 14.2). `src` holds V_D normalised values. The
/// loops are specialised so that the per-element work is the formula alone.
inline void post_quant_row(const Problem& p, std::int64_t n, const float* src, std::int8_t* dst) {
  const auto& pq = p.post_quant;
  const std::int64_t vd = p.v_dim;
  const bool channel = pq.scale.size() != 1;
  const float* scale = pq.scale.data() + (channel ? n * vd : 0);
  const float* offset = pq.offset.empty() ? nullptr : pq.offset.data() + (channel ? n * vd : 0);
  if (pq.rounding == PostQuantRounding::kGolden) {
    for (std::int64_t d = 0; d < vd; ++d)
      dst[d] = post_quant_golden(src[d], scale[channel ? d : 0], offset ? offset[channel ? d : 0] : 0.0f);
  } else if (!channel) {
    const float s = scale[0], f = offset ? offset[0] : 0.0f;
    for (std::int64_t d = 0; d < vd; ++d) dst[d] = post_quant_device(src[d], s, f);
  } else if (offset) {
    for (std::int64_t d = 0; d < vd; ++d) dst[d] = post_quant_device(src[d], scale[d], offset[d]);
  } else {
    for (std::int64_t d = 0; d < vd; ++d) dst[d] = post_quant_device(src[d], scale[d], 0.0f);
  }
}

}  // namespace fia::detail
