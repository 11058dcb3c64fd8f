// IEEE fp16 and bfloat16 conversions, round to nearest even (FIA-SPEC 25.1 #4): the same ones
// fia uses inside, for filling F16/BF16 tensors and reading outputs. Exact for every input,
// including subnormals, infinities and NaN. Values are the raw 16-bit patterns.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace fia {

/// fp16 bits -> float (exact).
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  // zero or subnormal: man * 2^-24
  const float mag = static_cast<float>(man) * 0x1p-24f;
  return sign ? -mag : mag;
}

/// Rounds a double to fp16 with round-to-nearest-even (one rounding, no detour through float).
inline std::uint16_t f64_to_f16(double x) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 48) & 0x8000u);
  const double a = std::fabs(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7E00u);
  if (a >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds to inf
  if (a < 0x1p-14) {
    // subnormal range: quantum 2^-24; nearbyint rounds half to even in the default mode
    const double q = std::nearbyint(a * 0x1p24);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(q));
  }
  int e = 0;
  const double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // 11 significant bits: scale m to [1024, 2048)
  double q = std::nearbyint(m * 2048.0);
  if (q == 2048.0) {
    q = 1024.0;
    ++e;
  }
  const int biased = e - 1 + 15;  // exponent of the value q/1024 * 2^(e-1)
  if (biased >= 31) return static_cast<std::uint16_t>(sign | 0x7C00u);
  return static_cast<std::uint16_t>(sign | (biased << 10) | (static_cast<int>(q) - 1024));
}

/// Rounds a float to fp16 with round-to-nearest-even (F. Giesen's branch-light formulation).
inline std::uint16_t f32_to_f16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = u & 0x80000000u;
  u ^= sign;
  std::uint32_t o;
  if (u >= (127u + 16u) << 23) {  // >= 65536, inf or NaN
    o = u > 0x7F800000u ? 0x7E00u : 0x7C00u;
  } else if (u < 113u << 23) {  // fp16 subnormal or zero: align with a magic addend
    constexpr std::uint32_t kMagic = 126u << 23;  // 0.5f
    const float f = std::bit_cast<float>(u) + std::bit_cast<float>(kMagic);
    o = std::bit_cast<std::uint32_t>(f) - kMagic;
  } else {
    const std::uint32_t mant_odd = (u >> 13) & 1u;
    u += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xFFFu;
    u += mant_odd;
    o = u >> 13;
  }
  return static_cast<std::uint16_t>(o | (sign >> 16));
}

/// bfloat16 bits -> float (exact).
inline float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

/// float -> bfloat16 bits, round to nearest even.
inline std::uint16_t f32_to_bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

/// Rounds a double to bfloat16 with round-to-nearest-even (one rounding).
inline std::uint16_t f64_to_bf16(double x) {
  if (std::isnan(x)) return f32_to_bf16(static_cast<float>(x));
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 48) & 0x8000u);
  const double a = std::fabs(x);
  if (a == 0.0) return sign;
  if (a < 0x1p-126) {
    // bf16 subnormals: quantum 2^-133
    const double q = std::nearbyint(a * 0x1p133);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(q));
  }
  int e = 0;
  const double m = std::frexp(a, &e);
  double q = std::nearbyint(m * 256.0);  // 8 significant bits
  if (q == 256.0) {
    q = 128.0;
    ++e;
  }
  const int biased = e - 1 + 127;
  if (biased >= 255) return static_cast<std::uint16_t>(sign | 0x7F80u);
  return static_cast<std::uint16_t>(sign | (biased << 7) | (static_cast<int>(q) - 128));
}

/// Rounds a float to the precision of fp16 / bf16 and back (the P cast of FIA-SPEC 5 step 7).
inline float round_to_f16(float x) { return f16_to_f32(f32_to_f16(x)); }
inline float round_to_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

}  // namespace fia
