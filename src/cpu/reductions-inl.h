// Horizontal sums of the decode dot products, per target: AVX2 horizontal adds, NEON pairwise
// adds (faddp), the same pairwise tree from Highway shuffles on the other 128-bit targets, an
// AVX-512 transposing tree, and one reduction per sum elsewhere (SVE: one faddv each). Included per
// Highway target by cpu/attention_item.cpp (the toggle guard below lets foreach_target re-include it
// once per target).
#if defined(FIA_CPU_REDUCTIONS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_REDUCTIONS_INL_H_
#undef FIA_CPU_REDUCTIONS_INL_H_
#else
#define FIA_CPU_REDUCTIONS_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef FIA_PAIRWISE_SUMS  // this file is compiled once per target
#if HWY_MAX_BYTES == 16 && HWY_TARGET != HWY_SCALAR
#define FIA_PAIRWISE_SUMS 1
/// [lo0 + lo1, lo2 + lo3, hi0 + hi1, hi2 + hi3] for 4-lane vectors: NEON's faddp, SSE's haddps.
HWY_INLINE VF pair_sums(DF df, VF lo, VF hi) {
#if HWY_ARCH_ARM_A64 && (HWY_TARGET == HWY_NEON || HWY_TARGET == HWY_NEON_BF16 || HWY_TARGET == HWY_NEON_WITHOUT_AES)
  (void)df;
  return VF{vpaddq_f32(lo.raw, hi.raw)};
#else
  return hn::Add(hn::ConcatEven(df, hi, lo), hn::ConcatOdd(df, hi, lo));
#endif
}

/// The lane sums of four 4-lane vectors, lane j holding the sum of the j-th: three pairwise adds.
/// Lane j depends only on the j-th vector.
HWY_INLINE VF sums_of_4(DF df, VF a, VF b, VF c, VF d) {
  return pair_sums(df, pair_sums(df, a, b), pair_sums(df, c, d));
}
#endif

/// out[0..4) = the lane sums of a, b, c, d. On AVX2 three horizontal adds serve all four sums, on
/// 128-bit targets three pairwise adds; elsewhere one reduction each. (AVX-512 targets use sum16.)
HWY_INLINE void sum4(DF df, VF a, VF b, VF c, VF d, float* out) {
#if HWY_TARGET == HWY_AVX2
  (void)df;
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a.raw, b.raw), _mm256_hadd_ps(c.raw, d.raw));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
#elif defined(FIA_PAIRWISE_SUMS)
  hn::StoreU(sums_of_4(df, a, b, c, d), df, out);
#else
  out[0] = hn::GetLane(hn::SumOfLanes(df, a));
  out[1] = hn::GetLane(hn::SumOfLanes(df, b));
  out[2] = hn::GetLane(hn::SumOfLanes(df, c));
  out[3] = hn::GetLane(hn::SumOfLanes(df, d));
#endif
}

// Four tokens at a time (dots4 below: 16 accumulators, 4 K rows and a query row live) on targets
// with 32 vector registers whose 16 lane sums are cheap: AVX-512 (a transposing tree, sum16) and
// NEON (four pairwise trees, sums_of_4). Not SVE: its vectors are sizeless (no arrays of them).
#undef FIA_DOTS4
#undef FIA_SUM16
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3_ZEN4 || HWY_TARGET == HWY_AVX3_SPR
#define FIA_DOTS4 1
#define FIA_SUM16 1
#elif defined(FIA_PAIRWISE_SUMS) && HWY_ARCH_ARM_A64 && \
    (HWY_TARGET == HWY_NEON || HWY_TARGET == HWY_NEON_BF16 || HWY_TARGET == HWY_NEON_WITHOUT_AES)
#define FIA_DOTS4 1
#endif

#ifdef FIA_SUM16
/// a shuffled by kLo plus a shuffled by kHi, the shuffles picking 128-bit quarters of a and b.
template <int kLo, int kHi>
HWY_INLINE __m512 fold_quarters(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, kLo), _mm512_shuffle_f32x4(a, b, kHi));
}

/// The same with the shuffles picking lanes within each 128-bit quarter.
template <int kLo, int kHi>
HWY_INLINE __m512 fold_lanes(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, kLo), _mm512_shuffle_ps(a, b, kHi));
}

/// The lane sums of 16 vectors in one vector: lane 4r + j holds the sum of v[4r + j]. A
/// transposing tree of 15 adds, instead of 16 separate reductions.
HWY_INLINE VF sum16(const VF* v) {
  __m512 u[4];
  for (int j = 0; j < 4; ++j) {  // u[j], quarter r: four partial sums of v[4r + j]
    const __m512 s01 = fold_quarters<0x44, 0xEE>(v[j].raw, v[4 + j].raw);
    const __m512 s23 = fold_quarters<0x44, 0xEE>(v[8 + j].raw, v[12 + j].raw);
    u[j] = fold_quarters<0x88, 0xDD>(s01, s23);
  }
  return VF{fold_lanes<0x88, 0xDD>(fold_lanes<0x44, 0xEE>(u[0], u[1]), fold_lanes<0x44, 0xEE>(u[2], u[3]))};
}

#endif  // FIA_SUM16

#ifdef FIA_DOTS4
/// a[4r + j] += q row r (from element d) times x[j], for ROWS rows: one vector of 4 tokens.
template <int ROWS>
HWY_INLINE void dots4_step(DF df, const float* q, std::int64_t kw, std::int64_t d, VF x0, VF x1, VF x2, VF x3, VF* a) {
#define FIA_ROW(r)                                   \
  if constexpr (ROWS > r) {                          \
    const VF qv = hn::LoadU(df, q + r * kw + d);     \
    a[4 * r] = hn::MulAdd(qv, x0, a[4 * r]);         \
    a[4 * r + 1] = hn::MulAdd(qv, x1, a[4 * r + 1]); \
    a[4 * r + 2] = hn::MulAdd(qv, x2, a[4 * r + 2]); \
    a[4 * r + 3] = hn::MulAdd(qv, x3, a[4 * r + 3]); \
  }
  FIA_ROW(0) FIA_ROW(1) FIA_ROW(2) FIA_ROW(3)
#undef FIA_ROW
}

/// a[4r + j] += q row r times K row k[j] over n elements, for ROWS rows and 4 tokens; the
/// elements past the last full vector go to tail[4r + j]. Each lane's FMA chain and the sum tree
/// (sum16 or sums_of_4) depend only on (row, token), so a token's score is the same bits in any group of 4.
/// Sources loading two vectors at a time (BlockPairSource) need n a multiple of 2 vectors. The
/// lines of `spread` go out over the vector steps (after the loop for pair sources, int4 rows,
/// whose prefetches are never spread: row_prefetches).
template <class Src, int ROWS>
HWY_INLINE void dots4(DF df, const float* q, std::int64_t kw, const typename Src::T* const* k, std::int64_t n, VF* a,
                      float* tail, SpreadLines spread = {}) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const auto *k0 = k[0], *k1 = k[1], *k2 = k[2], *k3 = k[3];
  std::int64_t d = 0;
  if constexpr (BlockPairSource<Src>) {
    for (; d + 2 * L <= n; d += 2 * L) {
      VF x0, x1, x2, x3, y0, y1, y2, y3;
      Src::load2(df, k0, d, x0, y0);
      Src::load2(df, k1, d, x1, y1);
      Src::load2(df, k2, d, x2, y2);
      Src::load2(df, k3, d, x3, y3);
      dots4_step<ROWS>(df, q, kw, d, x0, x1, x2, x3, a);
      dots4_step<ROWS>(df, q, kw, d + L, y0, y1, y2, y3, a);
    }
  } else {
    spread.over(n / L);
    for (; d + L <= n; d += L) {
      spread.step();
      const VF x0 = Src::load(df, k0, d), x1 = Src::load(df, k1, d);
      const VF x2 = Src::load(df, k2, d), x3 = Src::load(df, k3, d);
      dots4_step<ROWS>(df, q, kw, d, x0, x1, x2, x3, a);
    }
  }
  spread.rest();
  for (; d < n; ++d)
    for (int r = 0; r < ROWS; ++r)
      for (int j = 0; j < 4; ++j) tail[4 * r + j] += q[r * kw + d] * Src::one(k[j], d);
}

/// Scores of ROWS rows against tokens t .. t + count of the run (count 1..4), stored at
/// out[r * os + j] for j < count; the lines of `spread` prefetched over the loop of the K part.
template <class Src, int ROWS>
HWY_INLINE void dots4_store(DF df, const Problem& p, const float* q, std::int64_t kw, const KvRun& run, std::int64_t t,
                            std::int64_t count, float* out, std::int64_t os, SpreadLines spread = {}) {
  using T = typename Src::T;
  const T* k[4];
  const T* kr[4];
  for (std::int64_t j = 0; j < 4; ++j) {
    const std::int64_t tj = t + std::min(j, count - 1);
    k[j] = static_cast<const T*>(run.key) + tj * run.key_stride;
    kr[j] = p.rope_dim > 0 ? static_cast<const T*>(run.key_rope) + tj * run.rope_stride : nullptr;
  }
  VF a[16];
  for (VF& v : a) v = hn::Zero(df);
  HWY_ALIGN float tail[16] = {};
  dots4<Src, ROWS>(df, q, kw, k, p.qk_dim, a, tail, spread);
  if (p.rope_dim > 0) dots4<Src, ROWS>(df, q + p.qk_dim, kw, kr, p.rope_dim, a, tail);
#ifdef FIA_SUM16
  const VF sums = hn::Add(sum16(a), hn::Load(df, tail));
  if (count == 4) {
    const __m512 v = sums.raw;
    _mm_storeu_ps(out, _mm512_castps512_ps128(v));
    if constexpr (ROWS > 1) _mm_storeu_ps(out + os, _mm512_extractf32x4_ps(v, 1));
    if constexpr (ROWS > 2) _mm_storeu_ps(out + 2 * os, _mm512_extractf32x4_ps(v, 2));
    if constexpr (ROWS > 3) _mm_storeu_ps(out + 3 * os, _mm512_extractf32x4_ps(v, 3));
    return;
  }
  HWY_ALIGN float all[16];
  hn::Store(sums, df, all);
  for (int r = 0; r < ROWS; ++r)
    for (std::int64_t j = 0; j < count; ++j) out[r * os + j] = all[4 * r + j];
#else  // 4-lane vectors: row r's four sums in one vector, lane j for token j
  for (int r = 0; r < ROWS; ++r) {
    const VF sums = hn::Add(sums_of_4(df, a[4 * r], a[4 * r + 1], a[4 * r + 2], a[4 * r + 3]), hn::Load(df, tail + 4 * r));
    if (count == 4) {
      hn::StoreU(sums, df, out + r * os);
      continue;
    }
    HWY_ALIGN float all[4];
    hn::Store(sums, df, all);
    for (std::int64_t j = 0; j < count; ++j) out[r * os + j] = all[j];
  }
#endif
}
#ifdef FIA_SUM16
/// One row's scores against the 16 tokens t .. t + 15 of the run, stored at out[0..16): 16
/// accumulators, one per token, and one sum16 tree. Each token's FMA chain (the K part, then the
/// rope part), its tail and its tree are dots4_store's, so its score is the same bits in either.
/// The lines of `spread` go out over the K part's vector steps.
template <class Src>
HWY_INLINE void dots16_store(DF df, const Problem& p, const float* q, const KvRun& run, std::int64_t t, float* out,
                             SpreadLines spread) {
  using T = typename Src::T;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  VF a[16];
  for (VF& v : a) v = hn::Zero(df);
  HWY_ALIGN float tail[16] = {};
  auto part = [&](const T* base, std::int64_t stride, const float* qp, std::int64_t n, SpreadLines lines) {
    const T* k = base + t * stride;
    std::int64_t d = 0;
    lines.over(n / L);
    for (; d + L <= n; d += L) {
      lines.step();
      const VF qv = hn::LoadU(df, qp + d);
      for (int j = 0; j < 16; ++j) a[j] = hn::MulAdd(qv, Src::load(df, k + j * stride, d), a[j]);
    }
    lines.rest();
    for (; d < n; ++d)
      for (int j = 0; j < 16; ++j) tail[j] += qp[d] * Src::one(k + j * stride, d);
  };
  part(static_cast<const T*>(run.key), run.key_stride, q, p.qk_dim, spread);
  if (p.rope_dim > 0) part(static_cast<const T*>(run.key_rope), run.rope_stride, q + p.qk_dim, p.rope_dim, {});
  hn::StoreU(hn::Add(sum16(a), hn::Load(df, tail)), df, out);
}
#endif  // FIA_SUM16

#endif  // FIA_DOTS4

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_REDUCTIONS_INL_H_
