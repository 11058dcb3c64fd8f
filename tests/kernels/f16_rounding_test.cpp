// round_f16 (cpu/f16_rounding-inl.h), the P cast of fp16 calls (FIA-SPEC 5 step 7) and the fp16
// steps of full quantization (13.1), is the scalar float -> fp16 -> float conversion bit for bit
// on every compiled instruction set, whether it runs on the conversion instructions (x86 AVX2 and
// AVX-512) or in integer arithmetic (the other targets).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/f16_rounding_test.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/f16_rounding-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {

/// any[i] = round_f16<true>(x[i]); nonnegative[i] = round_f16<false>(x[i]) where x[i] >= 0;
/// n a multiple of the lane count.
void RoundF16ForTest(const float* x, float* any, float* nonnegative, std::size_t n) {
  const hn::ScalableTag<float> df;
  for (std::size_t i = 0; i < n; i += hn::Lanes(df)) {
    const auto v = hn::LoadU(df, x + i);
    hn::StoreU(round_f16<true>(df, v), df, any + i);
    hn::StoreU(round_f16<false>(df, hn::Abs(v)), df, nonnegative + i);
  }
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include "cpu/isa.hpp"
#include "numeric/half.hpp"

namespace fia::detail {
HWY_EXPORT(RoundF16ForTest);
}  // namespace fia::detail

namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

/// Values within round_f16's domain |x| <= 65504, of both signs: every float around each power of
/// two from 2^-26 (below half the smallest subnormal) to 2^15, and around the fp16 values with the
/// lowest and highest mantissas, so that every rounding boundary (normal, subnormal, ties) is met;
/// then random bit patterns.
std::vector<float> arguments() {
  std::vector<float> x{0.0f, -0.0f, 65504.0f, -65504.0f};
  for (int e = -26; e <= 15; ++e)
    for (const float m : {1.0f, 1.5f, 1.0009765625f, 1.99951171875f}) {
      const std::uint32_t c = bits_of(std::ldexp(m, e));
      for (std::uint32_t d = 0; d < 4200; ++d)
        if (const float v = from_bits(c - 2100 + d); v <= 65504.0f) x.insert(x.end(), {v, -v});
    }
  std::mt19937 rng(7);
  while (x.size() < (1u << 20)) {
    const float v = from_bits(rng() & 0x7FFFFFFFu);
    if (v <= 65504.0f) x.push_back(rng() % 2 ? v : -v);
  }
  while (x.size() % 64 != 0) x.push_back(1.0f);
  return x;
}

TEST(F16Rounding, IsTheScalarConversionBitForBitOnEveryIsa) {
  const std::vector<float> x = arguments();
  std::vector<float> any(x.size()), nonnegative(x.size());
  for (const std::string& isa : fia::detail::available_isas()) {
    ASSERT_TRUE(fia::detail::force_isa(isa));
    HWY_DYNAMIC_DISPATCH(fia::detail::RoundF16ForTest)(x.data(), any.data(), nonnegative.data(), x.size());
    int shown = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float expected = fia::f16_to_f32(fia::f32_to_f16(x[i]));
      const float expected_abs = fia::f16_to_f32(fia::f32_to_f16(std::fabs(x[i])));
      if (bits_of(any[i]) != bits_of(expected) && shown++ < 5)
        ADD_FAILURE() << isa << ": round_f16<true>(" << x[i] << ") = " << any[i] << ", expected " << expected;
      if (bits_of(nonnegative[i]) != bits_of(expected_abs) && shown++ < 5)
        ADD_FAILURE() << isa << ": round_f16<false>(" << std::fabs(x[i]) << ") = " << nonnegative[i] << ", expected "
                      << expected_abs;
    }
    EXPECT_EQ(shown, 0) << isa << ": differing results";
  }
  fia::detail::force_isa("");
}

}  // namespace
#endif  // HWY_ONCE
