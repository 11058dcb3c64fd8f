// e^x for the softmax exponentials, shared by every kernel: hwy::contrib's Exp bit for bit,
// several vectors step by step together, with fewer instructions (vscalefps on AVX-512, an
// exponent add for arguments in [-86, 88] elsewhere, no overflow fix-up on x86). Included per Highway
// target by cpu/p_rounding-inl.h and the full-quant kernels (the toggle guard below lets foreach_target
// re-include it once per target).
#if defined(FIA_CPU_SOFTMAX_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_SOFTMAX_EXP_INL_H_
#undef FIA_CPU_SOFTMAX_EXP_INL_H_
#else
#define FIA_CPU_SOFTMAX_EXP_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if !HWY_HAVE_SCALABLE  // arrays of vectors: not SVE, whose vectors are sizeless

/// for (int k = 0; k < N; ++k), unrolled: each step of softmax_exps for all N vectors before
/// the next step (a lambda per step would not always be inlined).
#define FIA_EACH_VECTOR(k) _Pragma("GCC unroll 16") for (int k = 0; k < N; ++k)

/// Exp's conversion of q to int32 (toward zero), on x86 without Highway's fix-up for positive
/// overflow (5 instructions): the same below 2^31 (x below 2^31 ln 2, about 1.49e9), and NaN lanes
/// give 0 either way.
template <class DI, class V>
HWY_INLINE hn::Vec<DI> truncate_to_int(DI di, V q) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  if constexpr (sizeof(q.raw) == 16) return hn::Vec<DI>{_mm_cvttps_epi32(q.raw)};
#if HWY_TARGET <= HWY_AVX2
  if constexpr (sizeof(q.raw) == 32) return hn::Vec<DI>{_mm256_cvttps_epi32(q.raw)};
#endif
#if HWY_TARGET <= HWY_AVX3
  if constexpr (sizeof(q.raw) == 64) return hn::Vec<DI>{_mm512_cvttps_epi32(q.raw)};
#endif
#endif
  return hn::ConvertTo(di, q);
}

/// x[k] = e^x[k] for k < N, the softmax exponentials: hwy::contrib's Exp (documented maximum
/// error 1 ulp on f32, 0 below -104 and for NaN), bit for bit for NaN and every x up to 90, past
/// its overflow at 88.7 (tests/kernels/softmax_exp_test.cpp); the softmax's x = S - m is at most 0.
/// The N exponentials go step by step together: one is a chain of about 20 dependent
/// instructions, and written one after another the out-of-order window holds about two of them
/// (the P cast of a tile on AVX2, Zen 4: 9.1 time units per vector with N = 4 against 11.4 with 1).
/// On AVX-512 the result 2^q * poly(r) is put together by one vscalefps (exact scaling, rounded
/// once like Exp's two multiplications) and the range test by a zeroing mask: 16 instructions
/// instead of 27, in the loop that dominates short-head-dim prefill. Elsewhere, when all N
/// vectors lie in [-86, 88] (softmax scores within 86 of their max, the common case), q is added
/// to poly's exponent bits instead (the tile's P cast on AVX2, Zen 4: 0.88x the time per vector in
/// a standalone loop).
/// kNonPositive: every x is at most 0 or NaN (x = S - m, m the row max), so that Exp's rounding
/// term 0.5 with the sign of x is -0.5 but for x = +0, where q is 0 either way (trunc(-0.5) = -0
/// scales by 2^-0): one constant instead of 1-2 instructions per vector.
template <int N, bool kNonPositive = false, class D>
HWY_INLINE void softmax_exps(D df, hn::Vec<D>* x) {
  using V = hn::Vec<D>;
  const hn::Rebind<std::int32_t, D> di;
  using VI = hn::Vec<decltype(di)>;
  V q[N], r[N], r2[N], r4[N], poly[N];
  FIA_EACH_VECTOR(k) {
    const V half = kNonPositive ? hn::Set(df, -0.5f) : hn::Or(hn::Set(df, 0.5f), hn::And(x[k], hn::Set(df, -0.0f)));
    q[k] = hn::MulAdd(x[k], hn::Set(df, 1.442695040888963407359924681f), half);
  }
#if HWY_TARGET == HWY_AVX3
  constexpr bool kScalef = hn::MaxLanes(D()) == 16;
#else
  constexpr bool kScalef = false;
#endif
  VI qi[N];
  if constexpr (kScalef) {
    FIA_EACH_VECTOR(k) { q[k] = hn::Trunc(q[k]); }
  } else {
    FIA_EACH_VECTOR(k) { qi[k] = truncate_to_int(di, q[k]); }
    FIA_EACH_VECTOR(k) { q[k] = hn::ConvertTo(df, qi[k]); }
  }
  FIA_EACH_VECTOR(k) { r[k] = hn::MulAdd(q[k], hn::Set(df, -0.693145751953125f), x[k]); }  // ExpReduce
  FIA_EACH_VECTOR(k) { r[k] = hn::MulAdd(q[k], hn::Set(df, -1.428606765330187045e-6f), r[k]); }
  FIA_EACH_VECTOR(k) { r2[k] = hn::Mul(r[k], r[k]); }  // ExpPoly: Estrin, degree 5
  FIA_EACH_VECTOR(k) { r4[k] = hn::Mul(r2[k], r2[k]); }
  const V c0 = hn::Set(df, +0.5f), c1 = hn::Set(df, +0.166666671633720397949219f);
  const V c2 = hn::Set(df, +0.0416664853692054748535156f), c3 = hn::Set(df, +0.00833336077630519866943359f);
  const V c4 = hn::Set(df, +0.00139304355252534151077271f), c5 = hn::Set(df, +0.000198527617612853646278381f);
  FIA_EACH_VECTOR(k) {
    poly[k] = hn::MulAdd(r4[k], hn::MulAdd(c5, r[k], c4), hn::MulAdd(r2[k], hn::MulAdd(c3, r[k], c2), hn::MulAdd(c1, r[k], c0)));
  }
  FIA_EACH_VECTOR(k) { poly[k] = hn::Add(hn::MulAdd(poly[k], r2[k], r[k]), hn::Set(df, 1.0f)); }
  if constexpr (kScalef) {
#if HWY_TARGET == HWY_AVX3
    FIA_EACH_VECTOR(k) {
      const __mmask16 in_range = _mm512_cmp_ps_mask(x[k].raw, _mm512_set1_ps(-104.0f), _CMP_GE_OQ);
      x[k] = V{_mm512_maskz_scalef_ps(in_range, poly[k].raw, q[k].raw)};
    }
#endif
  } else {
    // Every x in [-86, 88]: q in [-124, 127] and poly in [0.70, 1.42], so poly * 2^q is a normal
    // float, which Exp's two exact multiplications give; adding q to poly's exponent bits gives it
    // in 2 instructions instead of 10 (with the range test). The test compares every lane (a NaN
    // lane fails it; a min over the lanes could drop the NaN).
    const V lo = hn::Set(df, -86.0f), hi = hn::Set(df, 88.0f);
    auto in_range = hn::And(hn::Ge(x[0], lo), hn::Le(x[0], hi));
    _Pragma("GCC unroll 16") for (int k = 1; k < N; ++k) {
      in_range = hn::And(in_range, hn::And(hn::Ge(x[k], lo), hn::Le(x[k], hi)));
    }
    if (hn::AllTrue(df, in_range)) {
      FIA_EACH_VECTOR(k) { x[k] = hn::BitCast(df, hn::Add(hn::BitCast(di, poly[k]), hn::ShiftLeft<23>(qi[k]))); }
      return;
    }
    // Elsewhere Exp's LoadExpShortRange: times 2^(q >> 1), then 2^(q - (q >> 1)).
    const VI bias = hn::Set(di, 0x7F);
    VI half[N];
    FIA_EACH_VECTOR(k) { half[k] = hn::ShiftRight<1>(qi[k]); }
    FIA_EACH_VECTOR(k) { poly[k] = hn::Mul(poly[k], hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(half[k], bias)))); }
    FIA_EACH_VECTOR(k) {
      poly[k] = hn::Mul(poly[k], hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::Sub(qi[k], half[k]), bias))));
    }
    FIA_EACH_VECTOR(k) { x[k] = hn::IfThenElseZero(hn::Ge(x[k], hn::Set(df, -104.0f)), poly[k]); }
  }
}

#endif  // !HWY_HAVE_SCALABLE

/// e^x for the softmax exponentials: softmax_exps of one vector (on SVE, Exp itself).
template <bool kNonPositive = false, class D>
HWY_INLINE hn::Vec<D> softmax_exp(D df, hn::Vec<D> x) {
#if HWY_HAVE_SCALABLE
  return hn::Exp(df, x);
#else
  softmax_exps<1, kNonPositive>(df, &x);
  return x;
#endif
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_SOFTMAX_EXP_INL_H_
