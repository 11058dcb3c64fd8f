// e^x for the softmax exponentials, shared by every kernel, several vectors step by step together.
// softmax_exps: on x86 with AVX2 or AVX-512 (vectors of 8 or 16 floats) a table of 2^(j/8) or
// 2^(j/16) and a short polynomial, within 1 ulp of e^x; elsewhere highway_exps. highway_exps (the
// full-quant kernels, the same bytes on every ISA): hwy::contrib's Exp bit for bit, with fewer
// instructions (an exponent add for arguments in [-86, 88]). Included per Highway target by
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

#include <cmath>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// True where softmax_exps takes table_exps: vectors of 8 floats on AVX2, of 16 on AVX-512 (the
/// kernels' full vectors).
template <class D>
constexpr bool takes_table_exps() {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return hn::MaxLanes(D()) == (HWY_TARGET == HWY_AVX2 ? 8 : 16);
#else
  return false;
#endif
}

#if !HWY_HAVE_SCALABLE  // arrays of vectors: not SVE, whose vectors are sizeless

/// for (int k = 0; k < N; ++k), unrolled: each step of softmax_exps for all N vectors before
/// the next step (a lambda per step would not always be inlined).
#define FIA_EACH_VECTOR(k) _Pragma("GCC unroll 16") for (int k = 0; k < N; ++k)

/// Exp's conversion of q to int32 (toward zero), on x86 without Highway's fix-up for positive
/// overflow (5 instructions): the same below 2^31 (x below 2^31 ln 2, about 1.49e9), and NaN lanes
/// give 0 either way. (AVX-512 vectors of 16 floats take Trunc and vscalefps instead.)
template <class DI, class V>
HWY_INLINE hn::Vec<DI> truncate_to_int(DI di, V q) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  if constexpr (sizeof(q.raw) == 16) return hn::Vec<DI>{_mm_cvttps_epi32(q.raw)};
#if HWY_TARGET <= HWY_AVX2
  if constexpr (sizeof(q.raw) == 32) return hn::Vec<DI>{_mm256_cvttps_epi32(q.raw)};
#endif
#endif
  return hn::ConvertTo(di, q);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
/// x[k] = e[k] * 2^floor(y[k]) for k < N on AVX-512 vectors of 16 floats, by one vscalefps
/// (exact, rounded once), 0 where x[k] < -104 or NaN (a zeroing mask); vscalefps(NaN, +inf) is
/// +inf, so that x = +inf gives +inf where e is NaN.
template <int N, class V>
HWY_INLINE void scale_in_range(const V* e, const V* y, V* x) {
  FIA_EACH_VECTOR(k) {
    const __mmask16 in_range = _mm512_cmp_ps_mask(x[k].raw, _mm512_set1_ps(-104.0f), _CMP_GE_OQ);
    x[k] = V{_mm512_maskz_scalef_ps(in_range, e[k].raw, y[k].raw)};
  }
}
#endif

/// x[k] = e[k] * 2^(m[k] - bias) for k < N, 0 where x[k] < -104 or NaN: e in [0.5, 2), m - bias
/// the integer exponent of e^x[k] (in [-151, 130] for x in [-104, 90]). When every x lies in
/// [-86, 88] the result is a normal float, and m << 23 is added to e's bits (2 instructions
/// instead of 10 with the range test; only m's low 9 bits count, so that a bias that is a multiple
/// of 2^9 needs no subtraction; the test compares every lane, where a min over the lanes could
/// drop a NaN). Elsewhere Exp's LoadExpShortRange: times 2^(n >> 1), then 2^(n - (n >> 1)), n =
/// m - bias, each a normal power of two, so that only the second multiplication rounds; +inf
/// above 88.8 (e^x overflows from 88.73), x = +inf included, whose e may be NaN.
template <int N, class D, class VI>
HWY_INLINE void times_powers_of_two(D df, hn::Vec<D>* e, const VI* m, VI bias, hn::Vec<D>* x) {
  using V = hn::Vec<D>;
  const hn::Rebind<std::int32_t, D> di;
  const V lo = hn::Set(df, -86.0f), hi = hn::Set(df, 88.0f);
  auto in_range = hn::And(hn::Ge(x[0], lo), hn::Le(x[0], hi));
  _Pragma("GCC unroll 16") for (int k = 1; k < N; ++k) {
    in_range = hn::And(in_range, hn::And(hn::Ge(x[k], lo), hn::Le(x[k], hi)));
  }
  if (hn::AllTrue(df, in_range)) {
    FIA_EACH_VECTOR(k) { x[k] = hn::BitCast(df, hn::Add(hn::BitCast(di, e[k]), hn::ShiftLeft<23>(m[k]))); }
    return;
  }
  const VI ieee_bias = hn::Set(di, 0x7F);
  FIA_EACH_VECTOR(k) {
    const VI n = hn::Sub(m[k], bias), half = hn::ShiftRight<1>(n);
    e[k] = hn::Mul(e[k], hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(half, ieee_bias))));
    e[k] = hn::Mul(e[k], hn::BitCast(df, hn::ShiftLeft<23>(hn::Add(hn::Sub(n, half), ieee_bias))));
    const V finite = hn::IfThenElseZero(hn::Ge(x[k], hn::Set(df, -104.0f)), e[k]);
    x[k] = hn::IfThenElse(hn::Gt(x[k], hn::Set(df, 88.8f)), hn::Set(df, HUGE_VALF), finite);  // +inf from +inf too
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
/// 2^(j/16) for j < 16, each rounded to the nearest float (the table of 16-lane table_exps), and
/// 2^(j/8) for j < 8 (8 lanes).
struct alignas(64) Exp2Table {
  float at[16];
};
inline constexpr Exp2Table kExp2Sixteenths = {{0x1.000000p+0f, 0x1.0b5586p+0f, 0x1.172b84p+0f, 0x1.2387a6p+0f,
                                               0x1.306fe0p+0f, 0x1.3dea64p+0f, 0x1.4bfdaep+0f, 0x1.5ab07ep+0f,
                                               0x1.6a09e6p+0f, 0x1.7a1148p+0f, 0x1.8ace54p+0f, 0x1.9c4918p+0f,
                                               0x1.ae89fap+0f, 0x1.c199bep+0f, 0x1.d5818ep+0f, 0x1.ea4afap+0f}};
constexpr Exp2Table exp2_eighths() {
  Exp2Table t{};
  for (int j = 0; j < 8; ++j) t.at[j] = kExp2Sixteenths.at[2 * j];
  return t;
}
inline constexpr Exp2Table kExp2Eighths = exp2_eighths();

/// x[k] = e^x[k] for k < N on x86 vectors of T = 16 floats (AVX-512) or T = 8 (AVX2), for x up
/// to 90 (past the overflow at 88.7 to +inf), 0 below -104 and for NaN: e^x = 2^(k/T) e^r with k =
/// round(x T / ln 2) and r = x - (k/T) ln 2, |r| <= ln 2 / 2T. Adding 1.5 * 2^(23 - log2 T) to
/// x / ln 2 rounds it to k/T and leaves k (mod 2^22) in the low mantissa bits, whose last log2 T
/// bits index the table (vpermps ignores the rest); e^r - 1 is a polynomial of degree 3 (T = 16)
/// or 4 (T = 8) fitted for relative error on [-ln 2 / 2T, ln 2 / 2T] (below 2e-9); the result
/// 2^(j/T) (1 + q) is one fma from the table entry, then scaled by 2^floor(k/T): by vscalefps
/// on AVX-512 (exact, rounded once, a zeroing mask for the range), else times_powers_of_two.
/// Every float in [-104, 88.72] is within 1 ulp of e^x (worst 0.99 ulp with 16 lanes, 0.93 with 8;
/// tests/kernels/softmax_exp_test.cpp). 11 instructions per vector on AVX-512 where Exp's
/// algorithm took 17 with vscalefps: P2 0.964x the time on AVX3, 0.974x on AVX2 (Emerald Rapids).
template <int N, class D>
HWY_INLINE void table_exps(D df, hn::Vec<D>* x) {
  using V = hn::Vec<D>;
  constexpr bool k16 = hn::MaxLanes(D()) == 16;
  const V shifter = hn::Set(df, k16 ? 0x1.8p19f : 0x1.8p20f);
  V t[N], y[N], r[N], q[N], e[N];
  FIA_EACH_VECTOR(k) { t[k] = hn::MulAdd(x[k], hn::Set(df, 1.442695040888963407359924681f), shifter); }
  FIA_EACH_VECTOR(k) { y[k] = hn::Sub(t[k], shifter); }  // k/T, exactly
  FIA_EACH_VECTOR(k) { r[k] = hn::MulAdd(y[k], hn::Set(df, -0.693145751953125f), x[k]); }
  FIA_EACH_VECTOR(k) { r[k] = hn::MulAdd(y[k], hn::Set(df, -1.428606765330187045e-6f), r[k]); }
  if constexpr (k16) {
    FIA_EACH_VECTOR(k) {
      const V c = hn::MulAdd(r[k], hn::Set(df, 0x1.55559ep-3f), hn::Set(df, 0x1.00021ep-1f));
      q[k] = hn::MulAdd(hn::Mul(r[k], r[k]), c, r[k]);
    }
  } else {
    FIA_EACH_VECTOR(k) {
      const V c = hn::MulAdd(r[k], hn::MulAdd(r[k], hn::Set(df, 0x1.55483ep-5f), hn::Set(df, 0x1.555c78p-3f)),
                             hn::Set(df, 0.5f));
      q[k] = hn::MulAdd(hn::Mul(r[k], r[k]), c, r[k]);
    }
  }
#if HWY_TARGET <= HWY_AVX3
  if constexpr (k16) {
    const __m512 table = _mm512_load_ps(kExp2Sixteenths.at);
    FIA_EACH_VECTOR(k) { e[k] = V{_mm512_permutexvar_ps(_mm512_castps_si512(t[k].raw), table)}; }
    FIA_EACH_VECTOR(k) { e[k] = hn::MulAdd(e[k], q[k], e[k]); }
    scale_in_range<N>(e, y, x);
    return;
  }
#endif
  if constexpr (!k16) {
    const __m256 table = _mm256_load_ps(kExp2Eighths.at);
    FIA_EACH_VECTOR(k) { e[k] = V{_mm256_permutevar8x32_ps(table, _mm256_castps_si256(t[k].raw))}; }
    FIA_EACH_VECTOR(k) { e[k] = hn::MulAdd(e[k], q[k], e[k]); }
    // t's bits >> 3 are floor(k/8) plus those of 1.5 * 2^20 >> 3, a multiple of 2^9.
    const hn::Rebind<std::int32_t, D> di;
    hn::Vec<decltype(di)> m[N];
    FIA_EACH_VECTOR(k) { m[k] = hn::ShiftRight<3>(hn::BitCast(di, t[k])); }
    times_powers_of_two<N>(df, e, m, hn::ShiftRight<3>(hn::BitCast(di, shifter)), x);
  }
}
#endif

/// x[k] = e^x[k] for k < N: hwy::contrib's Exp (documented maximum error 1 ulp on f32, 0 below
/// -104 and for NaN) bit for bit for NaN and every x up to 90, past its overflow at 88.7, on every
/// instruction set (tests/kernels/softmax_exp_test.cpp): the full-quant kernels, whose int8 P =
/// round(127 E) gives the same bytes on every ISA, take these. When all N vectors lie in
/// [-86, 88] (softmax scores within 86 of their max, the common case), q is added to poly's
/// exponent bits instead of Exp's two multiplications (times_powers_of_two; the tile's P cast on
/// AVX2, Zen 4: 0.88x the time per vector in a standalone loop, before table_exps). On AVX-512 one
/// vscalefps puts 2^q * poly together (exact, rounded once) and a zeroing mask takes the range
/// test: 17 instructions instead of 27 (P4 about 4 % faster).
/// kNonPositive: every x is at most 0 or NaN (x = S - m, m the row max), so that Exp's rounding
/// term 0.5 with the sign of x is -0.5 but for x = +0, where q is 0 either way (trunc(-0.5) = -0
/// scales by 2^-0): one constant instead of 1-2 instructions per vector.
template <int N, bool kNonPositive = false, class D>
HWY_INLINE void highway_exps(D df, hn::Vec<D>* x) {
  using V = hn::Vec<D>;
  const hn::Rebind<std::int32_t, D> di;
  using VI = hn::Vec<decltype(di)>;
  V q[N], r[N], r2[N], r4[N], poly[N];
  FIA_EACH_VECTOR(k) {
    const V half = kNonPositive ? hn::Set(df, -0.5f) : hn::Or(hn::Set(df, 0.5f), hn::And(x[k], hn::Set(df, -0.0f)));
    q[k] = hn::MulAdd(x[k], hn::Set(df, 1.442695040888963407359924681f), half);
  }
#if HWY_TARGET <= HWY_AVX3 && HWY_ARCH_X86
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
#if HWY_TARGET <= HWY_AVX3 && HWY_ARCH_X86
  if constexpr (kScalef) {
    scale_in_range<N>(poly, q, x);
    return;
  }
#endif
  times_powers_of_two<N>(df, poly, qi, hn::Zero(di), x);  // poly in [0.70, 1.42]
}

/// x[k] = e^x[k] for k < N, the softmax exponentials (the softmax's x = S - m is at most 0),
/// within 1 ulp: table_exps on AVX2 (8 floats) and AVX-512 (16), highway_exps elsewhere. The N
/// exponentials go step by step together: one is a chain of about 20 dependent instructions, and
/// written one after another the out-of-order window holds about two of them (the P cast of a
/// tile on AVX2, Zen 4: 9.1 time units per vector with N = 4 against 11.4 with 1). kNonPositive
/// (every x at most 0 or NaN) only shortens highway_exps.
template <int N, bool kNonPositive = false, class D>
HWY_INLINE void softmax_exps(D df, hn::Vec<D>* x) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  if constexpr (takes_table_exps<D>()) {
    table_exps<N>(df, x);
    return;
  }
#endif
  highway_exps<N, kNonPositive>(df, x);
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

/// e^x as hwy::contrib's Exp on every instruction set: highway_exps of one vector (on SVE, Exp).
template <class D>
HWY_INLINE hn::Vec<D> highway_exp(D df, hn::Vec<D> x) {
#if HWY_HAVE_SCALABLE
  return hn::Exp(df, x);
#else
  highway_exps<1>(df, &x);
  return x;
#endif
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_SOFTMAX_EXP_INL_H_
