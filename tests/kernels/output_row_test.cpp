// scale_store_row (cpu/output_row-inl.h), which writes every output row of the cpu backend
// (FIA-SPEC 5 step 9), equals the scalar conversions of fia/half.hpp bit for bit on every compiled
// instruction set, and reports rows that hold a value that is not finite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "numeric/half.hpp"

namespace fia::detail {
namespace {

float from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

/// Floats of both signs around every fp16 and bf16 rounding boundary: the neighbours of each power
/// of two from 2^-27 to 2^17 (fp16 subnormals, normals, the overflow to infinity past 65504), of
/// fp16 and bf16 midpoints, then random bit patterns of finite floats.
std::vector<float> row_values() {
  std::vector<float> x{0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, std::numeric_limits<float>::max()};
  for (int e = -27; e <= 17; ++e)
    for (const float m :
         {1.0f, 1.00048828125f, 1.00146484375f, 1.0009765625f, 1.00390625f, 1.01171875f, 1.99951171875f}) {
      std::uint32_t c;
      const float v = std::ldexp(m, e);
      std::memcpy(&c, &v, sizeof(c));
      for (std::uint32_t d = 0; d < 64; ++d) {
        const float y = from_bits(c - 32 + d);
        x.insert(x.end(), {y, -y});
      }
    }
  std::mt19937 rng(11);
  while (x.size() < 60000) {
    const float v = from_bits(rng());
    if (std::isfinite(v)) x.push_back(v);
  }
  return x;
}

std::uint16_t scalar_16(float y, DType t) { return t == DType::F16 ? f32_to_f16(y) : f32_to_bf16(y); }

TEST(OutputRow, EqualsTheScalarConversionsOnEveryIsa) {
  const std::vector<float> x = row_values();
  for (const std::string& isa : available_isas()) {
    ASSERT_TRUE(force_isa(isa));
    for (const float scale : {1.0f, 0.3f, 1.0f / 4097.0f})
      for (const DType t : {DType::F16, DType::BF16, DType::F32})
        for (const std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{16}, std::int64_t{33},
                                     static_cast<std::int64_t>(x.size())}) {
          std::vector<std::uint16_t> half(static_cast<std::size_t>(n));
          std::vector<float> full(static_cast<std::size_t>(n));
          void* dst = t == DType::F32 ? static_cast<void*>(full.data()) : static_cast<void*>(half.data());
          ASSERT_TRUE(scale_store_row(x.data(), n, scale, t, dst)) << isa;
          for (std::int64_t d = 0; d < n; ++d) {
            const float y = x[static_cast<std::size_t>(d)] * scale;
            if (t == DType::F32) ASSERT_EQ(std::memcmp(&full[d], &y, sizeof(y)), 0) << isa << " " << y;
            else
              ASSERT_EQ(half[d], scalar_16(y, t)) << isa << " " << dtype_name(t) << " x " << x[d] << " scale " << scale;
          }
        }
  }
  force_isa("");
}

TEST(OutputRow, ReportsValuesThatAreNotFinite) {
  const float bad[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN()};
  for (const std::string& isa : available_isas()) {
    ASSERT_TRUE(force_isa(isa));
    for (const DType t : {DType::F16, DType::BF16, DType::F32})
      for (const float b : bad)
        for (const std::int64_t at : {0, 5, 16, 40}) {  // in a vector and in the scalar tail
          std::vector<float> row(41, 0.5f);
          row[static_cast<std::size_t>(at)] = b;
          std::vector<float> dst(41);
          EXPECT_FALSE(scale_store_row(row.data(), 41, 0.5f, t, dst.data())) << isa << " at " << at;
          row[static_cast<std::size_t>(at)] = 1.0f;
          EXPECT_TRUE(scale_store_row(row.data(), 41, 0.5f, t, dst.data())) << isa << " at " << at;
        }
  }
  force_isa("");
}

}  // namespace
}  // namespace fia::detail
