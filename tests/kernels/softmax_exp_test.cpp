// softmax_exp and softmax_exps (cpu/softmax_exp-inl.h): within 1 ulp of e^x on every compiled
// instruction set, the same bits whether vectors go one at a time or several together, and
// hwy::contrib's Exp bit for bit where they take no table (all but x86 vectors of 8 or 16 floats);
// highway_exp and highway_exps: Exp bit for bit on every instruction set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax_exp_test.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cpu/softmax_exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {

/// For n arguments x (n a multiple of 20 times the lane count): one[i] = softmax_exp(x[i]),
/// five[i] by softmax_exps<5> of x[i] and the next four vectors, four[i] by softmax_exps<4, true>
/// (the P cast's, for x <= 0 or NaN) of x[i] and the next three (softmax_exp where the vectors are
/// sizeless), highway[i] = highway_exp(x[i]), highway_five[i] by highway_exps<5>, theirs[i] =
/// hn::Exp(x[i]). Returns true where softmax_exps takes table_exps.
bool ExpWaysForTest(const float* x, float* one, float* five, float* four, float* highway, float* highway_five,
                    float* theirs, std::size_t n) {
  const hn::ScalableTag<float> df;
  const std::size_t L = hn::Lanes(df);
  for (std::size_t i = 0; i < n; i += L) {
    const auto v = hn::LoadU(df, x + i);
    hn::StoreU(softmax_exp(df, v), df, one + i);
    hn::StoreU(highway_exp(df, v), df, highway + i);
    hn::StoreU(hn::Exp(df, v), df, theirs + i);
  }
#if HWY_HAVE_SCALABLE
  for (std::size_t i = 0; i < n; i += L) {
    hn::StoreU(softmax_exp(df, hn::LoadU(df, x + i)), df, five + i);
    hn::StoreU(softmax_exp<true>(df, hn::LoadU(df, x + i)), df, four + i);
    hn::StoreU(highway_exp(df, hn::LoadU(df, x + i)), df, highway_five + i);
  }
#else
  for (std::size_t i = 0; i < n; i += 5 * L) {
    hn::Vec<decltype(df)> v[5];
    for (std::size_t k = 0; k < 5; ++k) v[k] = hn::LoadU(df, x + i + k * L);
    softmax_exps<5>(df, v);
    for (std::size_t k = 0; k < 5; ++k) hn::StoreU(v[k], df, five + i + k * L);
    for (std::size_t k = 0; k < 5; ++k) v[k] = hn::LoadU(df, x + i + k * L);
    highway_exps<5>(df, v);
    for (std::size_t k = 0; k < 5; ++k) hn::StoreU(v[k], df, highway_five + i + k * L);
  }
  for (std::size_t i = 0; i < n; i += 4 * L) {
    hn::Vec<decltype(df)> v[4];
    for (std::size_t k = 0; k < 4; ++k) v[k] = hn::LoadU(df, x + i + k * L);
    softmax_exps<4, true>(df, v);
    for (std::size_t k = 0; k < 4; ++k) hn::StoreU(v[k], df, four + i + k * L);
  }
#endif
  return takes_table_exps<decltype(df)>();
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include "cpu/isa.hpp"

namespace fia::detail {
HWY_EXPORT(ExpWaysForTest);
}  // namespace fia::detail

namespace {

/// Softmax arguments x = S - m <= 0: a dense sweep of [-110, 0] (past Exp's lower bound of -104
/// and through the subnormal results below -87.3), every float near the boundaries, and the
/// special values the kernels can meet (-inf for masked scores, NaN, vectors of +0 and of -0);
/// also x > 0 up to past Exp's overflow (beyond about 128 Exp's result wraps around: softmax_exp
/// keeps to x <= 90).
/// A NaN or infinity among ordinary lanes at every position of a group of five vectors. Then all
/// of them again in a shuffled order, so that vectors mix ordinary lanes with lanes that give 0,
/// subnormal or large results.
std::vector<float> arguments() {
  std::vector<float> x;
  for (int i = 0; i <= 1 << 20; ++i) x.push_back(-110.0f * static_cast<float>(i) / static_cast<float>(1 << 20));
  for (int i = 0; i <= 1 << 14; ++i) x.push_back(90.0f * static_cast<float>(i) / static_cast<float>(1 << 14));
  for (const float edge :
       {-104.0f, -87.33654f, -103.97208f, -86.0f, -0.5f * 0.6931472f, -1e-30f, 0.0f, 88.0f, 88.72284f, 88.7228394f}) {
    float v = edge;
    for (int k = 0; k < 64; ++k) v = std::nextafter(v, std::numeric_limits<float>::infinity());
    for (int k = 0; k < 128; ++k, v = std::nextafter(v, -200.0f)) x.push_back(v);
  }
  x.insert(x.end(), {-std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -0.0f,
                     -std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::max()});
  x.insert(x.end(), 64, 0.0f);
  x.insert(x.end(), 64, -0.0f);
  // One NaN or infinity among ordinary lanes, at every position of a group of five vectors.
  while (x.size() % 80 != 0) x.push_back(-1.0f);
  for (const float odd : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()})
    for (int at = 0; at < 80; ++at)
      for (int k = 0; k < 80; ++k) x.push_back(k == at ? odd : -1.0f - 0.01f * static_cast<float>(k));
  std::vector<float> shuffled = x;
  std::mt19937 rng(7);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  x.insert(x.end(), shuffled.begin(), shuffled.end());
  while (x.size() % 320 != 0) x.push_back(-1.0f);
  return x;
}

/// The results of every way on one instruction set (ExpWaysForTest).
struct Ways {
  std::vector<float> one, five, four, highway, highway_five, theirs;
  bool table = false;
};

Ways run_ways(const std::vector<float>& x) {
  Ways w;
  w.one.resize(x.size());
  w.five.resize(x.size());
  w.four.resize(x.size());
  w.highway.resize(x.size());
  w.highway_five.resize(x.size());
  w.theirs.resize(x.size());
  w.table = HWY_DYNAMIC_DISPATCH(fia::detail::ExpWaysForTest)(x.data(), w.one.data(), w.five.data(), w.four.data(),
                                                               w.highway.data(), w.highway_five.data(),
                                                               w.theirs.data(), x.size());
  return w;
}

/// fn(isa, the results of every way) on every instruction set in turn.
template <class Fn>
void on_every_isa(const std::vector<float>& x, Fn fn) {
  for (const std::string& isa : fia::detail::available_isas()) {
    ASSERT_TRUE(fia::detail::force_isa(isa));
    fn(isa, run_ways(x));
  }
  fia::detail::force_isa("");
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// The error of y as an approximation of e^x, in units in the last place of the float nearest
/// e^x (2^-149 for subnormal results).
double ulp_error(float x, float y) {
  const double e = std::exp(static_cast<double>(x));
  const double ulp = e < 0x1p-126 ? 0x1p-149 : std::ldexp(1.0, std::ilogb(e) - 23);
  return std::fabs(static_cast<double>(y) - e) / ulp;
}

/// Whichever way of several vectors together gives the bits of one vector at a time: five
/// vectors for every argument, four with kNonPositive for those at most 0 (+0 and -0 included).
TEST(SoftmaxExp, VectorsTakenTogetherGiveTheSameBitsOnEveryIsa) {
  const std::vector<float> x = arguments();
  on_every_isa(x, [&](const std::string& isa, const Ways& w) {
    int shown = 0;
    for (std::size_t i = 0; i < x.size() && shown < 5; ++i) {
      if (!same_bits(w.five[i], w.one[i]) && ++shown)
        ADD_FAILURE() << isa << ": exp(" << x[i] << ") = " << w.five[i] << " five vectors at a time, " << w.one[i]
                      << " one";
      if (!(x[i] > 0.0f) && !same_bits(w.four[i], w.one[i]) && ++shown)
        ADD_FAILURE() << isa << ": exp(" << x[i] << ") = " << w.four[i] << " four non-positive vectors at a time, "
                      << w.one[i] << " one";
    }
  });
}

/// Within 1 ulp of e^x for every x in [-104, 88.72], and at least 80 % of those results correctly
/// rounded (of arguments()'s, Exp rounds 91.3 % correctly, the tables 82.4 % on AVX-512 and 85.5 %
/// on AVX2; the worst are 0.96, 0.98 and 0.93 ulp); exactly 1 at +0 and -0; 0 below -104 (e^x <
/// 2^-150) and for NaN; +inf from the overflow (e^x rounds to +inf from 88.7228394) up to 90 and
/// at +inf (the kernels' x = S - m is at most 0).
TEST(SoftmaxExp, IsWithinOneUlpOfTheExponentialOnEveryIsa) {
  const std::vector<float> x = arguments();
  on_every_isa(x, [&](const std::string& isa, const Ways& w) {
    int shown = 0;
    std::size_t in_range = 0, rounded = 0;
    double worst = 0.0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float y = w.one[i];
      bool ok;
      if (std::isnan(x[i]) || x[i] < -104.0f) {
        ok = same_bits(y, 0.0f);
      } else if (std::exp(double{x[i]}) >= 0x1.ffffffp127) {  // rounds to +inf
        ok = std::isinf(y) && y > 0.0f;
      } else if (x[i] == 0.0f) {
        ok = y == 1.0f;
      } else {
        const double err = ulp_error(x[i], y);
        worst = std::max(worst, err);
        ++in_range;
        rounded += err <= 0.5 ? 1 : 0;
        ok = err < 1.0;
      }
      if (!ok && shown++ < 5) ADD_FAILURE() << isa << ": exp(" << x[i] << ") = " << y << ", e^x = " << std::exp(double{x[i]});
    }
    EXPECT_GE(static_cast<double>(rounded), 0.8 * static_cast<double>(in_range))
        << isa << ": " << in_range - rounded << " of " << in_range << " results not correctly rounded";
    EXPECT_LT(worst, 1.0) << isa;
  });
}

/// highway_exp and highway_exps are hwy::contrib's Exp bit for bit on every instruction set (NaN
/// and every x up to 90), one vector at a time or five together; so is softmax_exp where it takes
/// no table.
TEST(SoftmaxExp, HighwayExpsAreHighwaysExpBitForBitOnEveryIsa) {
  const std::vector<float> x = arguments();
  on_every_isa(x, [&](const std::string& isa, const Ways& w) {
    std::vector<std::pair<const std::vector<float>*, const char*>> checked = {{&w.highway, "highway_exp"},
                                                                              {&w.highway_five, "highway_exps<5>"}};
    if (!w.table) checked.emplace_back(&w.one, "softmax_exp");
    int shown = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      for (const auto& [ours, how] : checked)
        if (!same_bits((*ours)[i], w.theirs[i]) && shown++ < 5)
          ADD_FAILURE() << isa << ": " << how << "(" << x[i] << ") = " << (*ours)[i] << ", Exp gives " << w.theirs[i];
    }
  });
}

}  // namespace
#endif  // HWY_ONCE
