// Output rows (FIA-SPEC 5 step 9): the normalised f32 row rounded to the output dtype, a vector at
// a time, bit for bit as the scalar conversions of fia/half.hpp (f32_to_f16, f32_to_bf16). Included
// per Highway target by cpu/attention_item.cpp (the toggle guard lets foreach_target re-include it
// once per target).
#if defined(FIA_CPU_OUTPUT_ROW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_OUTPUT_ROW_INL_H_
#undef FIA_CPU_OUTPUT_ROW_INL_H_
#else
#define FIA_CPU_OUTPUT_ROW_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// bf16 bits of finite lanes v, rounded to nearest even (f32_to_bf16 without its NaN case).
HWY_INLINE hn::Vec<hn::Rebind<std::uint16_t, DF>> finite_to_bf16(DF df, VF v) {
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), lsb)));  // <= 0xFFFF
  return hn::DemoteTo(hn::Rebind<std::uint16_t, DF>(), hn::BitCast(hn::RebindToSigned<DF>(), rounded));
}

/// dst[0:n) = src[0:n) * scale rounded to `t` (F16 and BF16 to nearest even, as f32_to_f16 and
/// f32_to_bf16, values beyond fp16's range to infinity; F32 as it is). False when src holds a value
/// that is not finite: dst is then partly written, and the caller recomputes the row. fp16 takes
/// the conversion instructions on x86 AVX2 and AVX-512 (vcvtps2ph: nearest even, subnormals kept)
/// and the scalar conversion elsewhere.
HWY_INLINE bool scale_store_row(const float* src, std::int64_t n, float scale, DType t, void* dst) {
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF vs = hn::Set(df, scale);
  auto finite = hn::Eq(vs, vs);  // all true for a finite scale
  std::int64_t d = 0;
  if (t == DType::F32) {
    for (; d + L <= n; d += L) {
      const VF x = hn::LoadU(df, src + d);
      finite = hn::And(finite, hn::IsFinite(x));
      hn::StoreU(hn::Mul(x, vs), df, static_cast<float*>(dst) + d);
    }
  } else if (t == DType::BF16) {
    for (; d + L <= n; d += L) {
      const VF x = hn::LoadU(df, src + d);
      finite = hn::And(finite, hn::IsFinite(x));
      hn::StoreU(finite_to_bf16(df, hn::Mul(x, vs)), hn::Rebind<std::uint16_t, DF>(),
                 static_cast<std::uint16_t*>(dst) + d);
    }
  }
#if (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) && !defined(HWY_DISABLE_F16C)
  else if (t == DType::F16) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    for (; d + L <= n; d += L) {
      const VF x = hn::LoadU(df, src + d);
      finite = hn::And(finite, hn::IsFinite(x));
      hn::StoreU(hn::DemoteTo(dh, hn::Mul(x, vs)), dh, reinterpret_cast<hwy::float16_t*>(dst) + d);
    }
  }
#endif
  bool ok = hn::AllTrue(df, finite);
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(t));
  for (; d < n; ++d) {  // the rest one by one, with the scalar conversions (cpu/convert.hpp)
    ok = ok && std::isfinite(src[d]);
    const float y = src[d] * scale;
    store_row(&y, 1, t, static_cast<std::byte*>(dst) + d * es);
  }
  return ok;
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_OUTPUT_ROW_INL_H_
