// Rounding float32 lanes to fp16 values (nearest, ties to even), kept as float32: the P cast of
// FIA-SPEC 5 step 7 and the fp16 steps of full quantization (13.1). Included per Highway target
// by cpu/p_rounding-inl.h and cpu/full_quant.cpp (the toggle guard lets foreach_target re-include
// it once per target).
#if defined(FIA_CPU_F16_ROUNDING_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_F16_ROUNDING_INL_H_
#undef FIA_CPU_F16_ROUNDING_INL_H_
#else
#define FIA_CPU_F16_ROUNDING_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// x (|x| <= 65504) rounded to fp16. On x86 with AVX2 or AVX-512 the conversion instructions
/// (F16C vcvtps2ph, nearest even, subnormals kept; and back with vcvtph2ps) do it in 4 micro-ops
/// instead of 9. Elsewhere in integer arithmetic: 10 mantissa bits for normal values (adding 0xFFF
/// plus the kept lsb to the bits, then cutting 13 bits, works for either sign); below 2^-14 the
/// subnormal quantum 2^-24, obtained by adding and subtracting 0.5 (whose float ulp is 2^-24) to
/// |x|. kSigned false: x >= 0 is known (the P cast), which saves the sign handling there. Both
/// agree bit for bit with the scalar conversion (tests/kernels/f16_rounding_test.cpp).
template <bool kSigned, class D>
HWY_INLINE hn::Vec<D> round_f16(D df, hn::Vec<D> x) {
#if (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) && !defined(HWY_DISABLE_F16C)
  if constexpr (hn::MaxLanes(D()) >= 4) {
    const hn::Rebind<hwy::float16_t, D> dh;
    return hn::PromoteTo(df, hn::DemoteTo(dh, x));
  }
#endif
  const hn::RebindToUnsigned<D> du;
  auto u = hn::BitCast(du, x);
  const auto lsb = hn::And(hn::ShiftRight<13>(u), hn::Set(du, 1u));
  u = hn::And(hn::Add(u, hn::Add(hn::Set(du, 0xFFFu), lsb)), hn::Set(du, 0xFFFFE000u));
  const auto a = kSigned ? hn::Abs(x) : x, half = hn::Set(df, 0.5f);
  auto sub = hn::Sub(hn::Add(a, half), half);
  if constexpr (kSigned) sub = hn::CopySign(sub, x);
  return hn::IfThenElse(hn::Lt(a, hn::Set(df, 0x1p-14f)), sub, hn::BitCast(df, u));
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_F16_ROUNDING_INL_H_
