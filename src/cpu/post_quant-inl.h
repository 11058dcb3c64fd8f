// The device post-quant formula (FIA-SPEC 14.1, 25.1 #3) over a row, in SIMD: the same operations
// as the scalar post_quant_device of numeric/post_quant.hpp (a product, then a sum, both in
// float32; the fp16 rounding with ties away from zero done on the bits; a half-away integer
// rounding; saturation), so both give the same int8 for every input. Included per Highway target
// by cpu/attention_item.cpp (the toggle guard lets foreach_target re-include it once per target).
#if defined(FIA_CPU_POST_QUANT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_POST_QUANT_INL_H_
#undef FIA_CPU_POST_QUANT_INL_H_
#else
#define FIA_CPU_POST_QUANT_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// dst[d] = post_quant_device(src[d], scale[d or 0], offset[d or 0] or 0) for d in [0, n):
/// `channel` selects per-element scales and offsets, `offset` may be null.
HWY_INLINE void post_quant_device_row(const float* src, const float* scale, const float* offset, bool channel,
                                      std::int64_t n, std::int8_t* dst) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<std::int8_t, decltype(di)> d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const auto lo = hn::Set(df, -256.0f), hi = hn::Set(df, 256.0f), half = hn::Set(df, 0.5f);
  const auto sign_bit = hn::Set(di, static_cast<std::int32_t>(0x80000000u));
  const auto mag_bits = hn::Set(di, 0x7FFFFFFF), tiny = hn::Set(di, 0x38800000);
  const auto carry = hn::Set(di, 0x1000), grid = hn::Set(di, ~0x1FFF);
  const auto max_pos = hn::Set(di, 127), max_neg = hn::Set(di, 128);
  const float s0 = scale[0], f0 = offset ? offset[0] : 0.0f;
  std::int64_t d = 0;
  for (; d + L <= n; d += L) {
    const VF s = channel ? hn::LoadU(df, scale + d) : hn::Set(df, s0);
    const VF f = channel && offset ? hn::LoadU(df, offset + d) : hn::Set(df, f0);
    const VF product = hn::Mul(hn::LoadU(df, src + d), s);
    const VF y = hn::Add(product, f);
    const auto nan = hn::RebindMask(di, hn::IsNaN(y));
    const auto bits = hn::BitCast(di, hn::Min(hn::Max(y, lo), hi));
    const auto sign = hn::And(bits, sign_bit);
    const auto mag = hn::And(bits, mag_bits);
    const auto small = hn::Lt(mag, tiny);
    const VF h = hn::BitCast(df, hn::And(hn::Add(mag, carry), grid));
    const auto q = hn::ConvertTo(di, hn::Add(h, half));
    const auto negative = hn::Ne(sign, hn::Zero(di));
    const auto limited = hn::Min(q, hn::IfThenElse(negative, max_neg, max_pos));
    auto r = hn::IfThenElse(negative, hn::Neg(limited), limited);
    r = hn::IfThenZeroElse(hn::Or(nan, small), r);
    hn::StoreU(hn::DemoteTo(d8, r), d8, dst + d);
  }
  for (; d < n; ++d) dst[d] = post_quant_device(src[d], channel ? scale[d] : s0, offset ? (channel ? offset[d] : f0) : 0.0f);
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
