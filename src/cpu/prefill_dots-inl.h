// Q·Kᵀ of wide items (prefill) as bf16 dot products (cpu/bf16_dots-inl.h), for bf16 query and K
// rows on AVX-512 CPUs that have them (bf16_wide_key_dots): the query is packed once per item into
// pairs of dims, 16 rows per vector, and each token's pair of K elements is read from its stored
// row as one broadcast 32-bit operand, so K is never widened. Register blocks of 4 row vectors x 6
// tokens (24 accumulators), as the fp32 kernel's (prefill-inl.h). A score is one chain of dot
// products over its dims in order (key dims, then rope dims), whichever block it falls in, so
// paged, contiguous and NZ caches and any thread count give the same bits. P·V keeps the fp32
// kernel (wide_accumulate).
// Included per Highway target by cpu/attention_item.cpp (the toggle guard below lets
// foreach_target re-include it once per target).
#if defined(FIA_CPU_PREFILL_DOTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_PREFILL_DOTS_INL_H_
#undef FIA_CPU_PREFILL_DOTS_INL_H_
#else
#define FIA_CPU_PREFILL_DOTS_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#ifdef FIA_BF16_DOTS

/// One part (K or rope) of a run's rows: token t's row at base + t * stride bytes, `pairs` pairs
/// of bf16 elements, whose query pairs start at pair `first` of the item's.
struct PairRows {
  const char* base = nullptr;
  std::int64_t stride = 0, pairs = 0, first = 0;
};

/// acc[v][n] += the dot products of row vector v's query pairs with token n's K pairs over one
/// part of the rows, for NV row vectors and the NC tokens from t: qp holds pair k of row r at
/// qp[k * ldq + r] (the block's first row at qp).
template <int NV, int NC>
HWY_INLINE void pair_part_dots(const std::uint32_t* qp, std::int64_t ldq, const PairRows& r, std::int64_t t,
                               VF (&acc)[NV][NC]) {
  // Token n's row at bn + (n % 3) * stride, bn that of token 0 or 3: two pointers and the stride
  // stay in general registers, as in block_product.
  const char* b0 = r.base + t * r.stride;
  const char* b3 = b0 + 3 * r.stride;
  const std::uint32_t* q = qp + r.first * ldq;
  for (std::int64_t k = 0; k < r.pairs; ++k) {
    __m512i qv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) qv[v] = _mm512_loadu_si512(q + k * ldq + 16 * v);
#pragma GCC unroll 6
    for (int n = 0; n < NC; ++n) {
      const char* bn = (n < 3 ? b0 : b3) + (n % 3) * r.stride;
      std::uint32_t pair = 0;
      std::memcpy(&pair, bn + 4 * k, sizeof(pair));
      const __m512i kv = _mm512_set1_epi32(static_cast<int>(pair));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[v][n] = dot_pairs(acc[v][n], qv[v], kv);
    }
  }
}

/// Scores of NV row vectors (16 rows each, from qp's first) against the NC tokens of a run from t:
/// out[n * ldo + 16 v + i] = the saturated scale * Q·Kᵀ, as block_product stores them.
template <int NV, int NC>
HWY_INLINE void pair_block_product(DF df, const std::uint32_t* qp, std::int64_t ldq, const PairRows (&parts)[2],
                                   std::int64_t t, float* out, std::int64_t ldo, float scale) {
  VF acc[NV][NC];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v)
#pragma GCC unroll 6
    for (int n = 0; n < NC; ++n) acc[v][n] = hn::Zero(df);
  for (const PairRows& r : parts)
    if (r.pairs > 0) pair_part_dots<NV, NC>(qp, ldq, r, t, acc);
  const VF vs = hn::Set(df, scale);
#pragma GCC unroll 6
  for (int n = 0; n < NC; ++n)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) hn::Store(saturate_scores(df, hn::Mul(acc[v][n], vs)), df, out + n * ldo + 16 * v);
}

/// The scores of the item's Rp rows against one run of keys: token t's at st + t * ldo (rows in
/// order), row blocks of 4 vectors (then 2, then 1), tokens in blocks of 6 (then 4, 2, 1).
HWY_INLINE void pair_run_scores(DF df, const Problem& p, const std::uint32_t* qp, std::int64_t Rp, const KvRun& run,
                                float* st, std::int64_t ldo) {
  const PairRows parts[2] = {
      {static_cast<const char*>(run.key), run.key_stride * 2, p.qk_dim / 2, 0},
      {static_cast<const char*>(run.key_rope), run.rope_stride * 2, p.rope_dim / 2, p.qk_dim / 2}};
  auto rows = [&](auto nv) {
    constexpr int NV = decltype(nv)::value;
    return [&](std::int64_t r) {
      std::int64_t t = 0;
      auto block = [&](auto nc) {
        constexpr int NC = decltype(nc)::value;
        pair_block_product<NV, NC>(df, qp + r, Rp, parts, t, st + t * ldo + r, ldo, p.scale);
        t += NC;
      };
      while (t + 6 <= run.count) block(std::integral_constant<int, 6>());
      if (t + 4 <= run.count) block(std::integral_constant<int, 4>());
      if (t + 2 <= run.count) block(std::integral_constant<int, 2>());
      if (t < run.count) block(std::integral_constant<int, 1>());
    };
  };
  std::int64_t r = 0;
  for (; r + 64 <= Rp; r += 64) rows(std::integral_constant<int, 4>())(r);
  for (; r + 32 <= Rp; r += 32) rows(std::integral_constant<int, 2>())(r);
  for (; r < Rp; r += 16) rows(std::integral_constant<int, 1>())(r);
}

/// Phase A of a wide item over bf16 rows: wide_scores with Q·Kᵀ as bf16 dot products reading the
/// K rows where they are stored. The query pairs lie in the K tile buffer (tile.cols x kw floats;
/// Rp x kw / 2 words). A query that the dot products would not give the fp32 results for
/// (query_pairs: subnormal, infinite, NaN, 2^64 or more) takes wide_scores.
template <class QSrc, class Src>
void wide_pair_scores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                      float* m) {
  const DF df;
  const std::int64_t Rp = padded_rows(it), kw = p.qk_dim + p.rope_dim;
  auto* qp = reinterpret_cast<std::uint32_t*>(s.k);
  bool pairs = Rp <= 2 * tile.cols;
  if (pairs) {
    transposed_query<QSrc>(p, tile, it, s);
    for (std::int64_t r = 0; pairs && r < Rp; r += 16) pairs = query_pairs(s.q + r, Rp, kw, qp + r, Rp);
  }
  if (!pairs) return wide_scores<QSrc, Src>(p, tile, it, s, sv, m);
  std::fill(m, m + Rp, kNegInf);
  hold_columns<Src>(p, it, s.kv, false);  // V for phase B
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    for_each_run(p, it.b, it.h, c0, nc, KvParts::kKeys, [&](std::int64_t c, const KvRun& run) {
      pair_run_scores(df, p, qp, Rp, run, st + c * sv.col_stride, sv.col_stride);
    });
    finish_score_tile(df, p, it, sv, c0, nc, m);
  }
}

#endif  // FIA_BF16_DOTS

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_PREFILL_DOTS_INL_H_
