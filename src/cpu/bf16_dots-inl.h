// bf16 dot products (x86 AVX512_BF16: vdpbf16ps) for Q·Kᵀ of bf16 query and K rows, and P·V of bf16
// V rows where P is E rounded to bf16, on AVX-512 targets, where they are taken
// (bf16_dots_enabled(), cpu/isa.hpp, read at plan time into Problem::bf16_dots). One instruction
// takes 32 multiply-adds of bf16 pairs into 16 f32 lanes, at the rate of one fp32 FMA of 16 lanes
// on Zen 4 (on Emerald Rapids at half that rate: bf16_dots_faster()), and reads the stored rows
// without widening them. FIA-SPEC 5 steps 2 and 8 ask for the products of the exact inputs summed
// in fp32: the products of two bf16 values are exact in f32, and lane i adds those of elements 2i +
// 1 and 2i, in that order, each rounded once, so the order of the sums changes; besides, the
// instruction reads subnormal inputs as 0 (query_pairs and bf16_query_pairs keep such queries off
// it, and P·V adds tokens with a subnormal P by fp32 multiply-adds), reads a subnormal
// accumulator as 0 too, and flushes products and partial sums below 2^-126 to 0 (an absolute
// error below 2^-126 each).
// Included per Highway target by cpu/attention_item.cpp (the toggle guard below lets foreach_target
// re-include it once per target).
#if defined(FIA_CPU_BF16_DOTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_BF16_DOTS_INL_H_
#undef FIA_CPU_BF16_DOTS_INL_H_
#else
#define FIA_CPU_BF16_DOTS_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef FIA_BF16_DOTS
#if HWY_ARCH_X86_64 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3_ZEN4 || \
                        HWY_TARGET == HWY_AVX3_SPR)
#define FIA_BF16_DOTS 1

/// acc + the dot products of the bf16 pairs of a and b: lane i gains a[2i+1] b[2i+1], then
/// a[2i] b[2i]. The instruction reads subnormal inputs as 0 and flushes subnormal results to 0;
/// query_pairs (bf16_query_pairs) keeps the query values with which that could matter away from
/// it. Inline assembly: Highway 1.0.3 has no target with AVX512_BF16, and this runs only where
/// bf16_dots_enabled().
HWY_INLINE VF dot_pairs(VF acc, __m512i a, __m512i b) {
  asm("vdpbf16ps %2, %1, %0" : "+v"(acc.raw) : "v"(a), "v"(b));
  return acc;
}

/// Where P·V by dot products of token pairs keeps element d of an accumulator row: V rows t and
/// t + 1 interleave (vpunpck[lh]wd) into one vector of the low 4 elements of each 128-bit quarter
/// of a block of 32 and one of the high 4, stored one after the other.
HWY_INLINE std::int64_t dot_pair_position(std::int64_t d) {
  const std::int64_t e = d & 31, quarter = e / 8, i = e & 7;
  return d - e + (i < 4 ? 0 : 16) + 4 * quarter + (i & 3);
}

/// The lanes of x (32 bf16 values) that the dot products would not give the fp32 results for: a
/// subnormal (read as 0), an infinity or NaN, or a magnitude of 2^64 or more (whose product with a
/// subnormal K element, read as 0, could exceed 2^-62).
HWY_INLINE __mmask32 bf16_query_misfits(__m512i x) {
  const __m512i exponent = _mm512_set1_epi16(0x7F80), mantissa = _mm512_set1_epi16(0x007F);
  const __m512i huge = _mm512_set1_epi16((127 + 64) << 7);
  return _mm512_mask_test_epi16_mask(_mm512_testn_epi16_mask(x, exponent), x, mantissa) |  // subnormal
         _mm512_cmpge_epu16_mask(_mm512_and_si512(x, exponent), huge);  // 2^64 or more, infinity, NaN
}

/// The query of 16 rows for the dot products: qt holds dim d's 16 values (widened from bf16) at
/// qt + ld d, for kw (even) dims; out[ldo k + r] gets the bf16 pair (dim 2k, dim 2k + 1) of row r,
/// dim 2k in the low half. False, and the caller keeps the fp32 products, when a value is one of
/// bf16_query_misfits's.
HWY_INLINE bool query_pairs(const float* qt, std::int64_t ld, std::int64_t kw, std::uint32_t* out, std::int64_t ldo) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __mmask32 bad = 0;
  for (std::int64_t k = 0; 2 * k < kw; ++k) {
    const __m512i lo = _mm512_loadu_si512(qt + 2 * k * ld), hi = _mm512_loadu_si512(qt + (2 * k + 1) * ld);
    const __m512i pairs = _mm512_or_si512(_mm512_srli_epi32(lo, 16), _mm512_and_si512(hi, high));
    bad |= bf16_query_misfits(pairs);
    _mm512_storeu_si512(out + ldo * k, pairs);
  }
  return bad == 0;
}

/// The words of n bf16 values (n even) from src to dst, one pair of values per word as stored;
/// returns the values bf16_query_misfits finds, or 0.
HWY_INLINE __mmask32 copy_query_words(const std::uint16_t* src, std::int64_t n, std::uint32_t* dst) {
  __mmask32 bad = 0;
  for (std::int64_t d = 0; d < n; d += 32) {
    const std::int64_t m = std::min<std::int64_t>(32, n - d);
    const __mmask32 halves = m == 32 ? ~__mmask32{0} : (__mmask32{1} << m) - 1;
    const __m512i x = _mm512_maskz_loadu_epi16(halves, src + d);
    bad |= bf16_query_misfits(x);
    _mm512_mask_storeu_epi16(dst + d / 2, halves, x);
  }
  return bad;
}

#endif  // FIA_BF16_DOTS

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_BF16_DOTS_INL_H_
