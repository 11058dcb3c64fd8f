// Guards against non-finite intermediates (docs/numerics.md, "Overflow" and "Excluded keys"):
// scores saturate so that an overflowed row shows in its max, and non-finite V rows are kept out
// of the rows that do not see them. Included per Highway target by
// cpu/attention_item.cpp (the toggle guard below lets foreach_target re-include it once per target).
#if defined(FIA_CPU_GUARDS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_GUARDS_INL_H_
#undef FIA_CPU_GUARDS_INL_H_
#else
#define FIA_CPU_GUARDS_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// s clamped to [lo, hi], NaN lanes set to hi. On x86 in 2 instructions (`minps` returns its
/// second operand where either is NaN, so NaN becomes hi before the max) instead of the 4 of the
/// portable form (NaN test, max, min, blend): the scale-and-store epilogue of every score block
/// runs it, 24 vectors per 6 columns, against 64 multiply-adds per vector at head dim 64.
/// In-process A/B (Emerald Rapids VM, 2 threads): P2 0.993x the time on AVX3 (faster in 10 of 10
/// pairs), P3 0.994x (9 of 10), P2 on AVX2 0.992x (7 of 8); decode within the noise.
template <class V>
HWY_INLINE V clamp_nan_high(V s, V lo, V hi) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  if constexpr (sizeof(s.raw) == 16) return V{_mm_max_ps(_mm_min_ps(s.raw, hi.raw), lo.raw)};
#if HWY_TARGET <= HWY_AVX2
  if constexpr (sizeof(s.raw) == 32) return V{_mm256_max_ps(_mm256_min_ps(s.raw, hi.raw), lo.raw)};
#endif
#if HWY_TARGET <= HWY_AVX3
  if constexpr (sizeof(s.raw) == 64) return V{_mm512_max_ps(_mm512_min_ps(s.raw, hi.raw), lo.raw)};
#endif
#endif
  return hn::IfThenElse(hn::IsNaN(s), hi, hn::Min(hn::Max(s, lo), hi));
}

/// Scores as the kernels keep them (saturate()): overflow saturates at +-FLT_MAX, and NaN (an
/// overflow with both signs inside a dot product, or a NaN input) becomes +FLT_MAX, so that the
/// row max shows it and phase C recomputes the row in float64 (item_finalize). A product of -inf
/// becomes -FLT_MAX too: -inf stays reserved for the keys a row does not see, set after.
HWY_INLINE VF saturate_scores(DF df, VF s) {
  return clamp_nan_high(s, hn::Set(df, -std::numeric_limits<float>::max()), hn::Set(df, std::numeric_limits<float>::max()));
}

/// True when the n values at x are all finite.
HWY_INLINE bool all_finite(DF df, const float* x, std::int64_t n) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF big = hn::Set(df, std::numeric_limits<float>::max());
  auto bad = hn::FirstN(df, 0);
  std::int64_t c = 0;
  for (; c + L <= n; c += L) bad = hn::Or(bad, hn::Not(hn::Le(hn::Abs(hn::LoadU(df, x + c)), big)));
  for (; c < n; ++c)
    if (!std::isfinite(x[c])) return false;
  return hn::AllFalse(df, bad);
}

/// Wide P·V over a tile whose V rows (nc rows of vd) may hold non-finite values: such a row is
/// added in scalar to the rows that weight it (P != 0) and then zeroed, so that the panel product
/// never forms 0 * inf or 0 * NaN for rows that exclude it (25.1 #24). P is column-major (element
/// (c, r) at pt[c * cs + r], Rp rows); V row c starts at v + c * ldv; acc_t is vd x Rp. True when
/// a row was zeroed.
HWY_INLINE bool isolate_non_finite_values(DF df, const float* pt, std::int64_t cs, std::int64_t Rp, float* v,
                                          std::int64_t ldv, std::int64_t nc, std::int64_t vd, float* acc_t) {
  bool zeroed = false;
  for (std::int64_t c = 0; c < nc; ++c) {
    float* vc = v + c * ldv;
    if (all_finite(df, vc, vd)) continue;
    zeroed = true;
    for (std::int64_t r = 0; r < Rp; ++r) {
      const float w = pt[c * cs + r];
      if (w == 0.0f) continue;
      for (std::int64_t d = 0; d < vd; ++d) acc_t[d * Rp + r] += w * vc[d];
    }
    std::fill(vc, vc + vd, 0.0f);
  }
  return zeroed;
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_GUARDS_INL_H_
