// In-place wide items: wide items of exactly one row block (kInplaceRows = 16 packed rows, e.g.
// decode MLA's 16 heads, or 4 draft tokens x 4 GQA heads) over fp16/bf16/f32 K and V rows (bf16
// ones only where AMX tiles do not take both products: cpu/attention_item.cpp). Both
// products read the stored rows where they are and widen them in registers, so the rows stream
// from memory while the multiply-adds run, instead of a widening pass over every tile first
// (prefill-inl.h), which stalls on memory with no arithmetic to overlap.
//
// Q·Kᵀ has the 16 rows in the vector lanes ("outer-product" form): a block of kScoreTokens tokens
// keeps one accumulator per (token, row vector); a pair block (2 x Lanes dims) of the block's K
// rows at a time is widened into an L1 buffer, and each multiply-add takes its K element from
// there as a broadcast operand (bf16 rows on CPUs with bf16 dot products: each token's pair of K
// elements read from its row as one broadcast operand of a vdpbf16ps, pair_dots). No sum across
// lanes is needed, and a token's 16 scores come out
// as one vector, the layout phase B reads. P·V has the head dim in the lanes ("inner-product"
// form): (kGroupRows rows x 2 vectors) accumulators, P broadcast once for both vectors. Rows are
// read a "pair block" at a time; a bf16 block becomes its even and its odd elements (one shift or
// mask per vector), P·V's accumulators being stored in that order (pair_element). Measured on a
// 2-core AMD EPYC (Zen 4) VM, AVX3: the outer-product Q·Kᵀ made D6 about 0.87x and D7 about
// 0.94x the time of an inner-product one (transposing sums of Q·K vectors); an outer-product P·V
// was no faster than this one (docs/performance.md).
//
// Included per Highway target by cpu/attention_item.cpp (the toggle guard below lets
// foreach_target re-include it once per target).
#if defined(FIA_CPU_WIDE_INPLACE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_WIDE_INPLACE_INL_H_
#undef FIA_CPU_WIDE_INPLACE_INL_H_
#else
#define FIA_CPU_WIDE_INPLACE_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// On AVX-512, AVX2 and NEON (vector arrays of a fixed width: not SVE, whose vectors are sizeless).
// AVX2 has 16 registers: smaller blocks (kScoreTokens, kGroupRows). SSE4 keeps the tiled kernels.
#undef FIA_INPLACE_WIDE
#if !HWY_HAVE_SCALABLE && ((HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || \
                           (HWY_ARCH_ARM_A64 && (HWY_TARGET == HWY_NEON || HWY_TARGET == HWY_NEON_BF16 || HWY_TARGET == HWY_NEON_WITHOUT_AES)))
#define FIA_INPLACE_WIDE 1

/// Packed rows per register block of P·V: 2 x kGroupRows accumulators (two vectors), with the V
/// vectors and a P broadcast beside them (8 rows with 32 registers, 4 with AVX2's 16).
inline constexpr int kGroupRows = kVectorRegisters >= 32 ? 8 : 4;

/// Tokens of K rows prefetched ahead of Q·Kᵀ, and V rows per block of P·V (every pass over a block
/// before the next). Prefetches go with the products, a cache line per pair block and token, so
/// that they never come in bursts: a whole row at once (18 lines for decode MLA) waited for line fill
/// buffers and made D6 1.2x slower (Emerald Rapids, 2 threads, cold KV).
inline constexpr std::int64_t kInplaceAheadTokens = 16;
inline constexpr std::int64_t kInplacePvTokens = 16;

/// Stored V rows as pairs of f32 vectors: load2(df, row, d, v0, v1) reads the pair block of 2 x
/// Lanes elements at d (a multiple of 2 x Lanes). kInterleaved: v0 holds the even elements, v1 the
/// odd ones; otherwise v0 the first Lanes elements and v1 the others.
template <class Src>
struct PairLoads;

template <>
struct PairLoads<BF16Src> {
  static constexpr bool kInterleaved = true;
  static HWY_INLINE void load2(DF df, const hwy::bfloat16_t* row, std::int64_t d, VF& v0, VF& v1) {
    const hn::RebindToUnsigned<DF> du;
    const auto w = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(row + d));
    v0 = hn::BitCast(df, hn::ShiftLeft<16>(w));  // the low half of a word: the even element
    v1 = hn::BitCast(df, hn::And(w, hn::Set(du, 0xFFFF0000u)));
  }
};

template <>
struct PairLoads<F16Src> {
  static constexpr bool kInterleaved = false;
  static HWY_INLINE void load2(DF df, const hwy::float16_t* row, std::int64_t d, VF& v0, VF& v1) {
    v0 = F16Src::load(df, row, d);
    v1 = F16Src::load(df, row, d + static_cast<std::int64_t>(hn::Lanes(df)));
  }
};

template <>
struct PairLoads<F32Src> {
  static constexpr bool kInterleaved = false;
  static HWY_INLINE void load2(DF df, const float* row, std::int64_t d, VF& v0, VF& v1) {
    v0 = hn::LoadU(df, row + d);
    v1 = hn::LoadU(df, row + d + static_cast<std::int64_t>(hn::Lanes(df)));
  }
};

/// The element of a pair block that position k (< 2 x lanes) of load2's order holds.
template <class Src>
HWY_INLINE std::int64_t pair_element(std::int64_t k, std::int64_t lanes) {
  if constexpr (PairLoads<Src>::kInterleaved) return k < lanes ? 2 * k : 2 * (k - lanes) + 1;
  return k;
}

/// Tokens per block of Q·Kᵀ: each block keeps one accumulator per (token, row vector) beside the
/// 16 / Lanes row vectors of one query dim: 16 x 1 on AVX-512 and 4 x 4 on NEON (16 accumulators
/// of 32 registers), 6 x 2 on AVX2 (12 of 16).
inline constexpr int kScoreTokens = kVectorRegisters >= 32 ? static_cast<int>(HWY_LANES(float)) : 6;

/// Q·Kᵀ of the 16 rows against the kScoreTokens tokens of a block over one pair block (2 x Lanes
/// dims), added to a[t * NV + v] (token t, row vector v): qt holds the dims' query values, dim d's
/// 16 rows at qt + d * kInplaceRows; kb the tokens' widened dims, token t's at kb + t * 2L. Each
/// multiply-add takes its K element as a broadcast operand, so no sum across lanes is needed.
HWY_INLINE void outer_dots(DF df, const float* qt, const float* kb, VF* a) {
  constexpr int L = static_cast<int>(HWY_LANES(float)), NV = kInplaceRows / L;
  for (int d = 0; d < 2 * L; ++d) {
    VF q[NV];
    for (int v = 0; v < NV; ++v) q[v] = hn::Load(df, qt + d * kInplaceRows + v * L);
#pragma GCC unroll 16
    for (int t = 0; t < kScoreTokens; ++t) {
      const VF k = hn::Set(df, kb[t * 2 * L + d]);
      for (int v = 0; v < NV; ++v) a[t * NV + v] = hn::MulAdd(q[v], k, a[t * NV + v]);
    }
  }
}

/// One part (K or rope) of the rows of a block of tokens: row t at rows[t], `n` dims, the same
/// part of the rows kInplaceAheadTokens further on at ahead[t] (null: none) for prefetching.
template <class T>
struct BlockRows {
  const T* rows[kScoreTokens];
  const char* ahead[kScoreTokens];
  std::int64_t n = 0;
};

/// a += Q·Kᵀ over one part of a block's rows, pair block by pair block: the block's K elements of
/// a pair block are widened into kb (kScoreTokens x 2L floats, in L1), and the same pair block of
/// the rows ahead is prefetched, a line per token, so that prefetches spread over the products.
template <class Src>
HWY_INLINE void block_dots(DF df, const float* qt, const BlockRows<typename Src::T>& r, float* kb, VF* a) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), B2 = 2 * L;
  const std::int64_t bytes = B2 * static_cast<std::int64_t>(sizeof(typename Src::T));
  for (std::int64_t d = 0; d < r.n; d += B2) {
    for (int t = 0; t < kScoreTokens; ++t) {
      if (r.ahead[t]) prefetch_row(r.ahead[t] + d * static_cast<std::int64_t>(sizeof(typename Src::T)), bytes);
      widen_row<Src>(r.rows[t] + d, B2, kb + t * B2);
    }
    outer_dots(df, qt + d * kInplaceRows, kb, a);
  }
}

#ifdef FIA_BF16_DOTS
/// block_dots for bf16 rows as bf16 dot products (cpu/bf16_dots-inl.h): qp holds the 16 rows'
/// query pairs (query_pairs), pair k at qp + 16 k; each K pair of a token is read from its row as
/// one broadcast 32-bit operand, so the rows need no widening buffer. The same prefetches as
/// block_dots, a line per token every 32 dims.
HWY_INLINE void pair_dots(const std::uint32_t* qp, const BlockRows<hwy::bfloat16_t>& r, VF* a) {
  static_assert(kInplaceRows == 16 && kScoreTokens == 16, "one vector of rows, 16 tokens");
  for (std::int64_t d = 0; d < r.n; d += 2) {
    if (d % 32 == 0)
      for (int t = 0; t < kScoreTokens; ++t)
        if (r.ahead[t]) prefetch_row(r.ahead[t] + 2 * d, 64);
    const __m512i q = _mm512_loadu_si512(qp + 8 * d);
    for (int t = 0; t < kScoreTokens; ++t) {
      std::uint32_t pair = 0;
      std::memcpy(&pair, r.rows[t] + d, sizeof(pair));
      a[t] = dot_pairs(a[t], q, _mm512_set1_epi32(static_cast<int>(pair)));
    }
  }
}
#endif

/// Scaled, saturated scores of the 16 rows against the tokens of one run: token t's at
/// st + t * kInplaceRows ("outer-product" form: rows in the lanes, tokens in blocks of
/// kScoreTokens). qt: the transposed query rows (dim d's 16 values at qt + d * kInplaceRows, the
/// rope dims after the key dims); kb: scratch of kScoreTokens x 2L floats; qp: the query pairs
/// for bf16 dot products (query_pairs; bf16 rows only), or null for fp32 multiply-adds. A token's
/// score is one chain of multiply-adds (or dot products) over its dims in order, whichever block
/// it falls in (a short block repeats its last token), so paged, contiguous and NZ caches give the
/// same bits.
template <class Src>
void inplace_run_scores(DF df, const Problem& p, const float* qt, const std::uint32_t* qp, const KvRun& run, float* st,
                        const RowsAhead& ahead, float* kb) {
  using T = typename Src::T;
  constexpr int L = static_cast<int>(HWY_LANES(float)), NV = kInplaceRows / L;
  const T* k = static_cast<const T*>(run.key);
  const T* kr = static_cast<const T*>(run.key_rope);
  const VF vs = hn::Set(df, p.scale);
  BlockRows<T> key, rope;
  key.n = p.qk_dim;
  rope.n = p.rope_dim;
  for (std::int64_t t0 = 0; t0 < run.count; t0 += kScoreTokens) {
    for (int t = 0; t < kScoreTokens; ++t) {
      const std::int64_t tok = std::min(t0 + t, run.count - 1);
      key.rows[t] = k + tok * run.key_stride;
      key.ahead[t] = ahead.row(t0 + kInplaceAheadTokens + t, 0);
      if (rope.n > 0) {
        rope.rows[t] = kr + tok * run.rope_stride;
        rope.ahead[t] = ahead.row(t0 + kInplaceAheadTokens + t, 1);
      }
    }
    VF a[kScoreTokens * NV];
    for (VF& v : a) v = hn::Zero(df);
#ifdef FIA_BF16_DOTS
    if constexpr (std::is_same_v<Src, BF16Src>)
      if (qp != nullptr) {
        pair_dots(qp, key, a);
        if (rope.n > 0) pair_dots(qp + p.qk_dim / 2 * kInplaceRows, rope, a);
      }
#endif
    if (qp == nullptr) {
      block_dots<Src>(df, qt, key, kb, a);
      if (rope.n > 0) block_dots<Src>(df, qt + p.qk_dim * kInplaceRows, rope, kb, a);
    }
    const std::int64_t n = std::min<std::int64_t>(kScoreTokens, run.count - t0);
    for (std::int64_t t = 0; t < n; ++t)
      for (int v = 0; v < NV; ++v)
        hn::Store(saturate_scores(df, hn::Mul(a[t * NV + v], vs)), df, st + (t0 + t) * kInplaceRows + v * L);
  }
}

/// True when the in-place kernels compute `p` on this target: float K/V whose key, rope and value
/// dims are whole pair blocks.
HWY_INLINE bool inplace_supported(const Problem& p) {
  const std::int64_t B2 = 2 * static_cast<std::int64_t>(hn::Lanes(DF()));
  return p.kv_format == KvFormat::kFloat && p.qk_dim % B2 == 0 && p.rope_dim % B2 == 0 && p.v_dim % B2 == 0;
}

#endif  // FIA_INPLACE_WIDE

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_WIDE_INPLACE_INL_H_
