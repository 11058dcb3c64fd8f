// softmax_exp and softmax_exps (cpu/softmax_exp-inl.h) are hwy::contrib's Exp bit for bit on
// every compiled instruction set: they only order the steps differently (several vectors at a
// time), convert without Exp's overflow fix-up on x86 and reassemble the result differently
// (vscalefps on AVX-512, an exponent add elsewhere when every lane lies in [-86, 88]).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/softmax_exp_test.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/softmax_exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {

/// ours[i] = softmax_exp(x[i]), together[i] = softmax_exps<5> of x[i] and the next four vectors
/// (softmax_exp where the vectors are sizeless), theirs[i] = hn::Exp(x[i]); n a multiple of five
/// times the lane count.
void ExpBothForTest(const float* x, float* ours, float* together, float* theirs, std::size_t n) {
  const hn::ScalableTag<float> df;
  const std::size_t L = hn::Lanes(df);
  for (std::size_t i = 0; i < n; i += L) {
    const auto v = hn::LoadU(df, x + i);
    hn::StoreU(softmax_exp(df, v), df, ours + i);
    hn::StoreU(hn::Exp(df, v), df, theirs + i);
  }
#if HWY_HAVE_SCALABLE
  for (std::size_t i = 0; i < n; i += L) hn::StoreU(softmax_exp(df, hn::LoadU(df, x + i)), df, together + i);
#else
  for (std::size_t i = 0; i < n; i += 5 * L) {
    hn::Vec<decltype(df)> v[5];
    for (std::size_t k = 0; k < 5; ++k) v[k] = hn::LoadU(df, x + i + k * L);
    softmax_exps<5>(df, v);
    for (std::size_t k = 0; k < 5; ++k) hn::StoreU(v[k], df, together + i + k * L);
  }
#endif
}

/// e^x[i] as the P cast takes it (x <= 0 or NaN): one[i] by softmax_exp<true>, four[i] by
/// softmax_exps<4, true> of x[i] and the next three vectors (softmax_exp<true> where the vectors
/// are sizeless); n a multiple of four times the lane count.
void ExpNonPositiveForTest(const float* x, float* one, float* four, std::size_t n) {
  const hn::ScalableTag<float> df;
  const std::size_t L = hn::Lanes(df);
  for (std::size_t i = 0; i < n; i += L) hn::StoreU(softmax_exp<true>(df, hn::LoadU(df, x + i)), df, one + i);
#if HWY_HAVE_SCALABLE
  for (std::size_t i = 0; i < n; i += L) hn::StoreU(softmax_exp<true>(df, hn::LoadU(df, x + i)), df, four + i);
#else
  for (std::size_t i = 0; i < n; i += 4 * L) {
    hn::Vec<decltype(df)> v[4];
    for (std::size_t k = 0; k < 4; ++k) v[k] = hn::LoadU(df, x + i + k * L);
    softmax_exps<4, true>(df, v);
    for (std::size_t k = 0; k < 4; ++k) hn::StoreU(v[k], df, four + i + k * L);
  }
#endif
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include "cpu/isa.hpp"

namespace fia::detail {
HWY_EXPORT(ExpBothForTest);
HWY_EXPORT(ExpNonPositiveForTest);
}  // namespace fia::detail

namespace {

/// Softmax arguments x = S - m <= 0: a dense sweep of [-110, 0] (past Exp's lower bound of -104
/// and through the subnormal results below -87.3), every float near the boundaries, and the
/// special values the kernels can meet (-inf for masked scores, NaN, -0); also x > 0 up to past
/// Exp's overflow (beyond about 128 Exp's result wraps around: softmax_exp keeps to x <= 90).
/// A NaN or infinity among ordinary lanes at every position of a group of five vectors. Then all
/// of them again in a shuffled order, so that vectors mix ordinary lanes with lanes that give 0,
/// subnormal or large results.
std::vector<float> arguments() {
  std::vector<float> x;
  for (int i = 0; i <= 1 << 20; ++i) x.push_back(-110.0f * static_cast<float>(i) / static_cast<float>(1 << 20));
  for (int i = 0; i <= 1 << 14; ++i) x.push_back(90.0f * static_cast<float>(i) / static_cast<float>(1 << 14));
  for (const float edge : {-104.0f, -87.33654f, -103.97208f, -86.0f, -0.5f * 0.6931472f, -1e-30f, 0.0f, 88.0f, 88.72284f}) {
    float v = edge;
    for (int k = 0; k < 64; ++k) v = std::nextafter(v, 0.0f);
    for (int k = 0; k < 128; ++k, v = std::nextafter(v, -200.0f)) x.push_back(v);
  }
  x.insert(x.end(), {-std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -0.0f,
                     -std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::max()});
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

/// Results of one way of computing e^x, and how (appended to a failure's message).
struct Results {
  const std::vector<float>* values;
  const char* how;
};

/// How many results of `ours` differ in any bit from Exp's results `theirs` for the arguments x,
/// each way at each argument in turn; the first five are reported as failures.
int differences(const std::string& isa, const std::vector<float>& x, std::initializer_list<Results> ours,
                const std::vector<float>& theirs) {
  int shown = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    for (const Results& r : ours) {
      std::uint32_t a, b;
      std::memcpy(&a, &(*r.values)[i], 4);
      std::memcpy(&b, &theirs[i], 4);
      if (a != b && shown++ < 5)
        ADD_FAILURE() << isa << ": exp(" << x[i] << ") = " << (*r.values)[i] << r.how << ", Exp gives " << theirs[i];
    }
  }
  return shown;
}

TEST(SoftmaxExp, IsHighwaysExpBitForBitOnEveryIsa) {
  const std::vector<float> x = arguments();
  std::vector<float> ours(x.size()), together(x.size()), theirs(x.size());
  for (const std::string& isa : fia::detail::available_isas()) {
    ASSERT_TRUE(fia::detail::force_isa(isa));
    HWY_DYNAMIC_DISPATCH(fia::detail::ExpBothForTest)(x.data(), ours.data(), together.data(), theirs.data(), x.size());
    EXPECT_EQ(differences(isa, x, {{&ours, ""}, {&together, " five vectors at a time"}}, theirs), 0)
        << isa << ": differing results";
  }
  fia::detail::force_isa("");
}

/// The P cast's exponentials (kNonPositive: x = S - m <= 0, -inf or NaN) are Exp bit for bit too,
/// +0 and -0 included, over every such argument of arguments() and a few vectors of 0.
TEST(SoftmaxExp, NonPositiveArgumentsAreHighwaysExpBitForBit) {
  std::vector<float> x;
  for (const float v : arguments())
    if (!(v > 0.0f)) x.push_back(v);
  x.insert(x.end(), 64, 0.0f);
  x.insert(x.end(), 64, -0.0f);
  while (x.size() % 320 != 0) x.push_back(0.0f);
  std::vector<float> one(x.size()), four(x.size()), unused(x.size()), theirs(x.size());
  for (const std::string& isa : fia::detail::available_isas()) {
    ASSERT_TRUE(fia::detail::force_isa(isa));
    HWY_DYNAMIC_DISPATCH(fia::detail::ExpNonPositiveForTest)(x.data(), one.data(), four.data(), x.size());
    HWY_DYNAMIC_DISPATCH(fia::detail::ExpBothForTest)(x.data(), unused.data(), unused.data(), theirs.data(), x.size());
    EXPECT_EQ(differences(isa, x, {{&one, ""}, {&four, " four vectors at a time"}}, theirs), 0)
        << isa << ": differing results";
  }
  fia::detail::force_isa("");
}

}  // namespace
#endif  // HWY_ONCE
