// amx_key_sums (cpu/amx.hpp): Q·Kᵀ sums on AMX tiles against exact sums of the bf16 products, at
// every tile edge of the tokens (16) and query rows (16, in blocks of 32), with a rope part; a
// token's sums keep their bits wherever it lies in the call (FIA-SPEC 25.1: storage forms and
// thread counts give the same bits); and the setting (FIA_AMX, set_amx, reset_amx).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu/amx.hpp"
#include "support/call_builder.hpp"
#include "support/scoped_env.hpp"

namespace fia::test {
namespace {

using detail::AmxKeyPart;

std::uint16_t bf16_of(float f) {
  std::uint32_t b = 0;
  std::memcpy(&b, &f, sizeof b);
  return static_cast<std::uint16_t>(b >> 16);
}

double value_of(std::uint16_t h) {
  const std::uint32_t b = static_cast<std::uint32_t>(h) << 16;
  float f = 0;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

/// Random bf16 query and K rows for `tokens` tokens and `rows` query rows, key and rope dims,
/// each stored with padding past its row (stride) so that a sum that read past a row would show.
struct Operands {
  static constexpr std::int64_t kKeyDims = 128, kRopeDims = 64, kKeyStride = 136, kRopeStride = 80;
  std::int64_t tokens, rows, ldq;
  std::vector<std::uint16_t> key, rope;
  std::vector<std::uint32_t> qp;  // pair k of row r at qp[k * ldq + r]

  Operands(std::int64_t t, std::int64_t r, std::uint32_t seed) : tokens(t), rows(r), ldq(r + 16) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    key.resize(static_cast<std::size_t>(t * kKeyStride));
    rope.resize(static_cast<std::size_t>(t * kRopeStride));
    for (auto& x : key) x = bf16_of(u(rng));
    for (auto& x : rope) x = bf16_of(u(rng));
    qp.resize(static_cast<std::size_t>((kKeyDims + kRopeDims) / 2 * ldq));
    for (auto& w : qp) w = bf16_of(u(rng)) | static_cast<std::uint32_t>(bf16_of(u(rng))) << 16;
  }
  /// The parts from token `first` on.
  void parts(std::int64_t first, AmxKeyPart (&p)[2]) const {
    p[0] = {key.data() + first * kKeyStride, kKeyStride * 2, kKeyDims / 2, 0};
    p[1] = {rope.data() + first * kRopeStride, kRopeStride * 2, kRopeDims / 2, kKeyDims / 2};
  }
  /// Query row r's dim d.
  double query(std::int64_t r, std::int64_t d) const {
    const std::uint32_t w = qp[static_cast<std::size_t>(d / 2 * ldq + r)];
    return value_of(static_cast<std::uint16_t>(d % 2 == 0 ? w & 0xFFFF : w >> 16));
  }
  /// The exact sum for token t and row r, and the sum of the products' magnitudes.
  void exact(std::int64_t t, std::int64_t r, double* sum, double* magnitude) const {
    *sum = *magnitude = 0.0;
    for (std::int64_t d = 0; d < kKeyDims + kRopeDims; ++d) {
      const double k = d < kKeyDims ? value_of(key[static_cast<std::size_t>(t * kKeyStride + d)])
                                    : value_of(rope[static_cast<std::size_t>(t * kRopeStride + d - kKeyDims)]);
      *sum += query(r, d) * k;
      *magnitude += std::fabs(query(r, d) * k);
    }
  }
  /// The sums of tokens [first, tokens) at out[t * ldo + r]; every other float stays NaN.
  std::vector<float> sums(std::int64_t first, std::int64_t ldo) const {
    std::vector<float> out(static_cast<std::size_t>((tokens - first + 1) * ldo), std::numeric_limits<float>::quiet_NaN());
    AmxKeyPart p[2];
    parts(first, p);
    detail::amx_key_sums(qp.data(), ldq, rows, p, tokens - first, out.data(), ldo);
    return out;
  }
};

#define SKIP_WITHOUT_AMX()                                                 \
  if (!detail::amx_bf16_supported()) GTEST_SKIP() << "no AMX tiles with bf16 products here"

TEST(AmxKeySums, MatchTheExactSumsAtEveryTileEdge) {
  SKIP_WITHOUT_AMX();
  for (std::int64_t rows : {16, 32, 48, 64, 80})
    for (std::int64_t tokens : {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65}) {
      const Operands ops(tokens, rows, static_cast<std::uint32_t>(rows * 100 + tokens));
      const std::int64_t ldo = rows + 8;
      const std::vector<float> out = ops.sums(0, ldo);
      for (std::int64_t t = 0; t <= tokens; ++t)
        for (std::int64_t r = 0; r < ldo; ++r) {
          const float got = out[static_cast<std::size_t>(t * ldo + r)];
          if (t == tokens || r >= rows) {
            ASSERT_TRUE(std::isnan(got)) << "wrote past the sums: token " << t << " row " << r;
            continue;
          }
          double sum = 0, magnitude = 0;
          ops.exact(t, r, &sum, &magnitude);
          // 192 products summed in fp32: at most 192 roundings of 2^-24 relative to the magnitudes.
          ASSERT_NEAR(got, sum, magnitude * 192 * 0x1p-24 + 1e-30)
              << "rows " << rows << " tokens " << tokens << " token " << t << " row " << r;
          ASSERT_NE(magnitude, 0.0);
        }
    }
}

TEST(AmxKeySums, ATokenKeepsItsBitsWhereverItLies) {
  SKIP_WITHOUT_AMX();
  const Operands ops(70, 48, 7);
  const std::int64_t ldo = 48;
  const std::vector<float> all = ops.sums(0, ldo);
  for (std::int64_t first : {1, 2, 15, 16, 17, 31, 33, 54, 55, 69}) {
    const std::vector<float> part = ops.sums(first, ldo);
    for (std::int64_t t = first; t < ops.tokens; ++t)
      for (std::int64_t r = 0; r < ops.rows; ++r)
        ASSERT_EQ(std::memcmp(&part[static_cast<std::size_t>((t - first) * ldo + r)],
                              &all[static_cast<std::size_t>(t * ldo + r)], sizeof(float)),
                  0)
            << "first " << first << " token " << t << " row " << r;
  }
}

// By default plans take the tiles wherever the CPU (and the OS) has them; FIA_AMX=0 (or
// set_amx(false)) forbids them; reset_amx reads the environment again; any other value is an
// error plan() reports, naming FIA_AMX.
TEST(AmxSetting, FollowsTheCpuTheEnvironmentAndTheSetting) {
  {  // FIA_AMX back as it was at the end of the block, then read again
    const ScopedEnv env("FIA_AMX");
    env.unset();
    detail::reset_amx();
    EXPECT_EQ(detail::amx_enabled(), detail::amx_bf16_supported());
    detail::set_amx(false);
    EXPECT_FALSE(detail::amx_enabled());
    detail::set_amx(true);
    EXPECT_EQ(detail::amx_enabled(), detail::amx_bf16_supported());
    env.set("0");
    detail::reset_amx();
    EXPECT_FALSE(detail::amx_enabled());
    env.set("1");
    detail::reset_amx();
    EXPECT_EQ(detail::amx_enabled(), detail::amx_bf16_supported());
    EXPECT_TRUE(detail::amx_setting_valid());
    env.set("yes");
    detail::reset_amx();
    EXPECT_FALSE(detail::amx_setting_valid());
    const TestCall call = build_call(CallSpec{}, 3);
    Plan plan_out;
    const Status st = plan(call.args, Options{}, &plan_out);
    EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
    EXPECT_EQ(st.parameter, "FIA_AMX") << st.to_string();
    EXPECT_NE(st.message.find("'yes'"), std::string::npos) << st.to_string();
    detail::set_amx(false);
    EXPECT_TRUE(detail::amx_setting_valid());
    EXPECT_TRUE(plan(call.args, Options{}, &plan_out).ok());
  }
  detail::reset_amx();
}

}  // namespace
}  // namespace fia::test
