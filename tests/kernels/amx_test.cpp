// amx_key_sums (cpu/amx.hpp): Q·Kᵀ sums on AMX tiles against exact sums of the bf16 products, at
// every tile edge of the tokens (16) and query rows (16, in blocks of 32), with a rope part; a
// token's sums keep their bits wherever it lies in the call, prefetching the next rows or not
// (storage forms and thread counts give the same bits: FIA-SPEC 21.1 criterion C);
// amx_output_sums (P·V) at every tile edge; and the setting (FIA_AMX, set_amx, reset_amx).
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
  /// The exact sum for token t and row r over the key dims (and the rope dims `with_rope`), and
  /// the sum of the products' magnitudes.
  void exact(std::int64_t t, std::int64_t r, double* sum, double* magnitude, bool with_rope = true) const {
    *sum = *magnitude = 0.0;
    for (std::int64_t d = 0; d < kKeyDims + (with_rope ? kRopeDims : 0); ++d) {
      const double k = d < kKeyDims ? value_of(key[static_cast<std::size_t>(t * kKeyStride + d)])
                                    : value_of(rope[static_cast<std::size_t>(t * kRopeStride + d - kKeyDims)]);
      *sum += query(r, d) * k;
      *magnitude += std::fabs(query(r, d) * k);
    }
  }
  /// The sums of tokens [first, tokens) at out[t * ldo + r] (over the key dims alone, not
  /// `with_rope`: a rope part of 0 pairs and no rows); every other float stays NaN.
  /// With `prefetch`, the next block's rows are prefetched, past the last token from `next` rows
  /// (the key rows again).
  std::vector<float> sums(std::int64_t first, std::int64_t ldo, bool with_rope = true, bool prefetch = false) const {
    std::vector<float> out(static_cast<std::size_t>((tokens - first + 1) * ldo), std::numeric_limits<float>::quiet_NaN());
    AmxKeyPart p[2];
    parts(first, p);
    if (!with_rope) p[1] = AmxKeyPart{};
    if (prefetch) {
      p[0].next = key.data(), p[0].next_row_bytes = kKeyStride * 2, p[0].next_count = tokens;
      p[1].next = rope.data(), p[1].next_row_bytes = kRopeStride * 2, p[1].next_count = tokens;
    }
    detail::amx_key_sums(qp.data(), ldq, rows, p, tokens - first, prefetch, out.data(), ldo);
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

// A part of no dims and no rows adds nothing; no tokens write nothing.
TEST(AmxKeySums, AnEmptyPartAndNoTokens) {
  SKIP_WITHOUT_AMX();
  const Operands ops(20, 32, 5);
  const std::vector<float> out = ops.sums(0, 32, false);
  for (std::int64_t t = 0; t < 20; ++t)
    for (std::int64_t r = 0; r < 32; ++r) {
      double sum = 0, magnitude = 0;
      ops.exact(t, r, &sum, &magnitude, false);
      ASSERT_NEAR(out[static_cast<std::size_t>(t * 32 + r)], sum, magnitude * 128 * 0x1p-24) << t << " " << r;
    }
  const std::vector<float> none = ops.sums(20, 32);  // count 0
  for (const float x : none) EXPECT_TRUE(std::isnan(x));
}

TEST(AmxKeySums, ATokenKeepsItsBitsWhereverItLies) {
  SKIP_WITHOUT_AMX();
  const Operands ops(70, 48, 7);
  const std::int64_t ldo = 48;
  const std::vector<float> all = ops.sums(0, ldo);
  for (std::int64_t first : {1, 2, 15, 16, 17, 31, 33, 54, 55, 69}) {
    const std::vector<float> part = ops.sums(first, ldo, true, first % 2 == 1);  // prefetching or not
    for (std::int64_t t = first; t < ops.tokens; ++t)
      for (std::int64_t r = 0; r < ops.rows; ++r)
        ASSERT_EQ(std::memcmp(&part[static_cast<std::size_t>((t - first) * ldo + r)],
                              &all[static_cast<std::size_t>(t * ldo + r)], sizeof(float)),
                  0)
            << "first " << first << " token " << t << " row " << r;
  }
}

// P·V sums on tiles onto what the accumulators held, against exact sums, at every tile edge of
// the rows (16, in blocks of 32) and the V dims (16, in blocks of 32), over 1 and 3 chunks of 32
// tokens, with P in one piece and in three; the accumulators' padding past vd stays as it was.
TEST(AmxOutputSums, MatchTheExactSumsAtEveryTileEdge) {
  SKIP_WITHOUT_AMX();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (std::int64_t vd : {16, 32, 48})
    for (std::int64_t rows : {16, 32, 48})
      for (std::int64_t chunks : {1, 3})
        for (std::int64_t pieces : {1, 3}) {
          const std::int64_t tokens = chunks * 32, piece_words = chunks * 16 * rows, ld = vd + 8;
          std::vector<std::uint16_t> v(static_cast<std::size_t>(tokens * vd));
          std::vector<std::uint16_t> pv(static_cast<std::size_t>(pieces * rows * tokens));  // piece i, row r, token t
          for (auto& x : v) x = bf16_of(u(rng));
          for (auto& x : pv) x = bf16_of(u(rng));
          auto V = [&](std::int64_t t, std::int64_t d) { return v[static_cast<std::size_t>(t * vd + d)]; };
          auto P = [&](std::int64_t i, std::int64_t r, std::int64_t t) {
            return pv[static_cast<std::size_t>((i * rows + r) * tokens + t)];
          };
          std::vector<std::uint32_t> vi(static_cast<std::size_t>(tokens / 2 * vd)), pa(static_cast<std::size_t>(pieces * piece_words));
          for (std::int64_t k = 0; k < tokens / 2; ++k)
            for (std::int64_t d = 0; d < vd; ++d)
              vi[static_cast<std::size_t>(k * vd + d)] = V(2 * k, d) | static_cast<std::uint32_t>(V(2 * k + 1, d)) << 16;
          for (std::int64_t i = 0; i < pieces; ++i)
            for (std::int64_t kk = 0; kk < chunks; ++kk)
              for (std::int64_t r = 0; r < rows; ++r)
                for (std::int64_t j = 0; j < 16; ++j) {
                  const std::int64_t t = 32 * kk + 2 * j;
                  pa[static_cast<std::size_t>(i * piece_words + (kk * rows + r) * 16 + j)] =
                      P(i, r, t) | static_cast<std::uint32_t>(P(i, r, t + 1)) << 16;
                }
          std::vector<float> acc(static_cast<std::size_t>(rows * ld));
          for (auto& x : acc) x = u(rng);
          const std::vector<float> before = acc;
          detail::amx_output_sums(pa.data(), pieces, piece_words, vi.data(), vd, chunks, rows, acc.data(), ld);
          for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t d = vd; d < ld; ++d)
              ASSERT_EQ(acc[static_cast<std::size_t>(r * ld + d)], before[static_cast<std::size_t>(r * ld + d)]);
            for (std::int64_t d = 0; d < vd; ++d) {
              const double a0 = before[static_cast<std::size_t>(r * ld + d)];
              double sum = a0, magnitude = std::fabs(a0);
              for (std::int64_t i = 0; i < pieces; ++i)
                for (std::int64_t t = 0; t < tokens; ++t) {
                  sum += value_of(P(i, r, t)) * value_of(V(t, d));
                  magnitude += std::fabs(value_of(P(i, r, t)) * value_of(V(t, d)));
                }
              ASSERT_NEAR(acc[static_cast<std::size_t>(r * ld + d)], sum,
                          magnitude * static_cast<double>(pieces * tokens + 1) * 0x1p-24)
                  << "vd " << vd << " rows " << rows << " chunks " << chunks << " pieces " << pieces << " d " << d
                  << " r " << r;
            }
          }
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
