// The P cast of FIA-SPEC 5 step 7 (round to the query dtype, nearest even) and the exponentials.
// Included per Highway target by cpu/attention_item.cpp (the toggle guard below lets foreach_target
// re-include it once per target).
#if defined(FIA_CPU_P_ROUNDING_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_P_ROUNDING_INL_H_
#undef FIA_CPU_P_ROUNDING_INL_H_
#else
#define FIA_CPU_P_ROUNDING_INL_H_
#endif

#include "cpu/f16_rounding-inl.h"
#include "cpu/softmax_exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- the P cast (FIA-SPEC 5 step 7): round to the query dtype, nearest even ----------------

/// bf16: keep the top 16 bits after adding 0x7FFF + lsb. Exact for the finite E in [0, 1].
HWY_INLINE VF round_bf16(DF df, VF e) {
  const hn::RebindToUnsigned<DF> du;
  auto u = hn::BitCast(du, e);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  u = hn::And(hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), lsb)), hn::Set(du, 0xFFFF0000u));
  return hn::BitCast(df, u);
}

HWY_INLINE VF round_p(DF df, VF e, DType t) {
  if (t == DType::BF16) return round_bf16(df, e);
  if (t == DType::F16) return round_f16<false>(df, e);  // E >= 0
  return e;
}

/// The P cast of the vector at x: E = exp(x - m) (vm holds m, the row max: x - m <= 0 or NaN),
/// x becomes round(E); returns sum + E.
HWY_INLINE VF p_cast_vector(DF df, float* x, VF vm, VF sum, DType t) {
  const VF e = softmax_exp<true>(df, hn::Sub(hn::LoadU(df, x), vm));
  hn::StoreU(round_p(df, e, t), df, x);
  return hn::Add(sum, e);
}

#if !HWY_HAVE_SCALABLE
/// Vectors whose exponentials p_cast_vectors takes step by step together (softmax_exps).
inline constexpr int kExpVectors = 4;

/// p_cast_vector of the kExpVectors vectors at x, x + stride, ...: their exponentials step by
/// step together, each E added to sum in that order (the same bits as one vector at a time).
HWY_INLINE VF p_cast_vectors(DF df, float* x, std::int64_t stride, VF vm, VF sum, DType t) {
  constexpr int N = kExpVectors;
  VF e[N];
  FIA_EACH_VECTOR(k) { e[k] = hn::Sub(hn::LoadU(df, x + k * stride), vm); }
  softmax_exps<N, true>(df, e);
  FIA_EACH_VECTOR(k) { sum = hn::Add(sum, e[k]); }
  FIA_EACH_VECTOR(k) { hn::StoreU(round_p(df, e[k], t), df, x + k * stride); }
  return sum;
}
#endif

/// E = exp(s - m) on n values at x (in place becomes the rounded P); returns the sum of E.
/// Lanes past n are computed on a copy so that x[n..] is never touched.
HWY_INLINE float exp_row(DF df, float* x, std::int64_t n, float m, DType t) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF vm = hn::Set(df, m);
  VF sum = hn::Zero(df);
  std::int64_t c = 0;
#if !HWY_HAVE_SCALABLE
  for (; c + kExpVectors * L <= n; c += kExpVectors * L) sum = p_cast_vectors(df, x + c, L, vm, sum, t);
#endif
  for (; c + L <= n; c += L) sum = p_cast_vector(df, x + c, vm, sum, t);
  if (c < n) {
    HWY_ALIGN float tmp[HWY_MAX_BYTES / sizeof(float)];
    for (std::int64_t k = 0; k < L; ++k) tmp[k] = c + k < n ? x[c + k] : kNegInf;
    sum = p_cast_vector(df, tmp, vm, sum, t);
    for (std::int64_t k = 0; c + k < n; ++k) x[c + k] = tmp[k];
  }
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_P_ROUNDING_INL_H_
