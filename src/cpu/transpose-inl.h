// Transposing float tiles: the query rows into the Q panel of a wide item and its P·V
// accumulators back into output rows. Included per Highway target by cpu/attention_item.cpp (the
// toggle guard lets foreach_target re-include it once per target).
#if defined(FIA_CPU_TRANSPOSE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_TRANSPOSE_INL_H_
#undef FIA_CPU_TRANSPOSE_INL_H_
#else
#define FIA_CPU_TRANSPOSE_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
/// d[x * ld + r] = s[r * ls + x] for r, x < 8, in registers: 8 loads, 24 shuffles, 8 stores.
HWY_INLINE void transpose_8x8(const float* s, std::int64_t ls, float* d, std::int64_t ld) {
  const __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ls), r2 = _mm256_loadu_ps(s + 2 * ls);
  const __m256 r3 = _mm256_loadu_ps(s + 3 * ls), r4 = _mm256_loadu_ps(s + 4 * ls), r5 = _mm256_loadu_ps(s + 5 * ls);
  const __m256 r6 = _mm256_loadu_ps(s + 6 * ls), r7 = _mm256_loadu_ps(s + 7 * ls);
  // Pairs of rows interleaved, then quads (columns x and x + 4 of 4 rows), then the 128-bit halves.
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(d + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(d + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(d + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(d + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(d + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(d + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(d + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

/// dst[x * ld_dst + r] = src[r * ld_src + x] for r < rows, x < cols. On x86 with AVX2 or AVX-512,
/// 8 x 8 blocks transposed in registers: gathering a vector per column took 13 % of P3's time on
/// AVX2 (Zen 4) and 6 % on AVX-512. Elsewhere a vector of rows gathered at a time. The rest one
/// by one.
template <class D>
HWY_INLINE void transpose_into(D df, const float* src, std::int64_t ld_src, std::int64_t rows, std::int64_t cols,
                               float* dst, std::int64_t ld_dst) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  (void)df;
  constexpr std::int64_t kBlock = 8;
#else
  const std::int64_t kBlock = static_cast<std::int64_t>(hn::Lanes(df));
#endif
  const std::int64_t whole_rows = rows / kBlock * kBlock;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const std::int64_t whole_cols = cols / kBlock * kBlock;
  for (std::int64_t r = 0; r < whole_rows; r += kBlock)
    for (std::int64_t x = 0; x < whole_cols; x += kBlock)
      transpose_8x8(src + r * ld_src + x, ld_src, dst + x * ld_dst + r, ld_dst);
#else
  const std::int64_t whole_cols = cols;
  const hn::RebindToSigned<D> di;
  HWY_ALIGN std::int32_t offsets[HWY_MAX_BYTES / sizeof(float)];
  for (std::int64_t k = 0; k < kBlock; ++k) offsets[k] = static_cast<std::int32_t>(k * ld_src);
  const auto index = hn::Load(di, offsets);
  for (std::int64_t r = 0; r < whole_rows; r += kBlock)
    for (std::int64_t x = 0; x < cols; ++x) hn::StoreU(hn::GatherIndex(df, src + r * ld_src + x, index), df, dst + x * ld_dst + r);
#endif
  for (std::int64_t r = 0; r < whole_rows; ++r)
    for (std::int64_t x = whole_cols; x < cols; ++x) dst[x * ld_dst + r] = src[r * ld_src + x];
  for (std::int64_t r = whole_rows; r < rows; ++r)
    for (std::int64_t x = 0; x < cols; ++x) dst[x * ld_dst + r] = src[r * ld_src + x];
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_TRANSPOSE_INL_H_
