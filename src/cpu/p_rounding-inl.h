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

/// E = exp(s - m) on n values at x (in place becomes the rounded P); returns the sum of E.
/// Lanes past n are computed on a copy so that x[n..] is never touched.
HWY_INLINE float exp_row(DF df, float* x, std::int64_t n, float m, DType t) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF vm = hn::Set(df, m);
  VF sum = hn::Zero(df);
  std::int64_t c = 0;
#if !HWY_HAVE_SCALABLE
  constexpr int N = 4;  // exponentials step by step together (softmax_exps), summed in order
  for (; c + N * L <= n; c += N * L) {
    VF e[N];
    FIA_EACH_VECTOR(k) { e[k] = hn::Sub(hn::LoadU(df, x + c + k * L), vm); }
    softmax_exps<N>(df, e);
    FIA_EACH_VECTOR(k) { sum = hn::Add(sum, e[k]); }
    FIA_EACH_VECTOR(k) { hn::StoreU(round_p(df, e[k], t), df, x + c + k * L); }
  }
#endif
  for (; c + L <= n; c += L) {
    const VF e = softmax_exp(df, hn::Sub(hn::LoadU(df, x + c), vm));
    sum = hn::Add(sum, e);
    hn::StoreU(round_p(df, e, t), df, x + c);
  }
  if (c < n) {
    HWY_ALIGN float tmp[HWY_MAX_BYTES / sizeof(float)];
    for (std::int64_t k = 0; k < L; ++k) tmp[k] = c + k < n ? x[c + k] : kNegInf;
    const VF e = softmax_exp(df, hn::Sub(hn::Load(df, tmp), vm));
    sum = hn::Add(sum, e);
    hn::Store(round_p(df, e, t), df, tmp);
    for (std::int64_t k = 0; c + k < n; ++k) x[c + k] = tmp[k];
  }
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_P_ROUNDING_INL_H_
