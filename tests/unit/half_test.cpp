// fp16 / bf16 conversions: round to nearest even, exact on every input (DESIGN.md numeric contract).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "numeric/half.hpp"

namespace fia::detail {
namespace {

TEST(Half, EveryF16RoundTripsThroughF32AndF64) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
    ASSERT_EQ(f64_to_f16(f), h) << std::hex << h;
  }
}

TEST(Half, FloatAndDoublePathsAgreeOnRandomFloats) {
  std::mt19937 rng(3);
  for (int i = 0; i < 2000000; ++i) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), f64_to_f16(f)) << f;
    ASSERT_EQ(f32_to_bf16(f), f64_to_bf16(f)) << f;
  }
}

TEST(Half, TiesRoundToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: rounds to 1 (even); 1 + 3*2^-11 rounds up.
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // rounds to infinity
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);          // tie between 0 and the smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1p-25f * 1.5f), 0x0001);
  EXPECT_EQ(f64_to_bf16(1.0 + 0x1p-8 + 0x1p-40), 0x3F81);  // just above the tie: one rounding only
}

TEST(Half, RoundingHelpers) {
  EXPECT_EQ(round_to_f16(0.36787944f), 0.36791992f);  // FIA-SPEC 22.1
  EXPECT_EQ(round_to_bf16(0.36787944f), 0.3671875f);
}

}  // namespace
}  // namespace fia::detail
