// e^x for the softmax exponentials, shared by every kernel: hwy::contrib's Exp bit for bit,
// reassembled with fewer instructions on AVX-512. Included per Highway target by
// cpu/p_rounding-inl.h and the full-quant kernels (the toggle guard below lets foreach_target
// re-include it once per target).
#if defined(FIA_CPU_SOFTMAX_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_SOFTMAX_EXP_INL_H_
#undef FIA_CPU_SOFTMAX_EXP_INL_H_
#else
#define FIA_CPU_SOFTMAX_EXP_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// e^x for the softmax exponentials: hwy::contrib's Exp (documented maximum error 1 ulp on f32, 0
/// below -104 and for NaN), bit for bit (tests/kernels/softmax_exp_test.cpp). On AVX-512 the
/// result 2^q * poly(r) is put together by one vscalefps (exact scaling, rounded once like Exp's
/// two multiplications) and the range test by a zeroing mask: 16 instructions instead of 27, in
/// the loop that dominates short-head-dim prefill.
template <class D>
HWY_INLINE hn::Vec<D> softmax_exp(D df, hn::Vec<D> x) {
#if HWY_TARGET == HWY_AVX3
  if constexpr (hn::MaxLanes(D()) == 16) {
    using V = hn::Vec<D>;
    const V half = hn::Or(hn::Set(df, 0.5f), hn::And(x, hn::Set(df, -0.0f)));
    const V q = hn::Trunc(hn::MulAdd(x, hn::Set(df, 1.442695040888963407359924681f), half));
    V r = hn::MulAdd(q, hn::Set(df, -0.693145751953125f), x);  // Exp's ExpReduce
    r = hn::MulAdd(q, hn::Set(df, -1.428606765330187045e-6f), r);
    const V r2 = hn::Mul(r, r), r4 = hn::Mul(r2, r2);  // Exp's ExpPoly: Estrin, degree 5
    const V c0 = hn::Set(df, +0.5f), c1 = hn::Set(df, +0.166666671633720397949219f);
    const V c2 = hn::Set(df, +0.0416664853692054748535156f), c3 = hn::Set(df, +0.00833336077630519866943359f);
    const V c4 = hn::Set(df, +0.00139304355252534151077271f), c5 = hn::Set(df, +0.000198527617612853646278381f);
    const V poly = hn::MulAdd(r4, hn::MulAdd(c5, r, c4), hn::MulAdd(r2, hn::MulAdd(c3, r, c2), hn::MulAdd(c1, r, c0)));
    const V y = hn::Add(hn::MulAdd(poly, r2, r), hn::Set(df, 1.0f));
    const __mmask16 in_range = _mm512_cmp_ps_mask(x.raw, _mm512_set1_ps(-104.0f), _CMP_GE_OQ);
    return V{_mm512_maskz_scalef_ps(in_range, y.raw, q.raw)};
  }
#endif
  return hn::Exp(df, x);
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_SOFTMAX_EXP_INL_H_
