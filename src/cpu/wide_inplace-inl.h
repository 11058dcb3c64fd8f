// In-place wide items: wide items of exactly one row block (kInplaceRows = 16 packed rows, e.g.
// decode MLA's 16 heads, or 4 draft tokens x 4 GQA heads) over fp16/bf16/f32 K and V rows. Both
// products read the stored rows where they are and widen them in registers, so the rows stream
// from memory while the multiply-adds run, instead of a widening pass over every tile first
// (prefill-inl.h), which stalls on memory with no arithmetic to overlap.
//
// The head dim is in the vector lanes ("inner-product" form): Q·Kᵀ keeps (kGroupRows rows x 2
// tokens) accumulators, each Q vector loaded once for both tokens and each K vector widened once
// for kGroupRows rows, then one transposing sum per (row, token); P·V keeps (kGroupRows rows x 2
// vectors) accumulators, P broadcast once for both vectors. A row of 16 heads in one AVX-512 vector
// (the tiled kernels' layout) needs a broadcast load per multiply-add instead, and waits on the
// load ports. Rows are read a "pair block" (2 x Lanes elements) at a time; a bf16 block becomes its
// even and its odd elements (one shift or mask per vector), the query rows and the accumulators
// being stored in that order (pair_element).
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

// On targets with 32 vector registers of a fixed width: AVX-512 and NEON (vector arrays: not SVE,
// whose vectors are sizeless). With 16 registers (AVX2: blocks of 4 rows, each K vector widened
// for 4 rows) D6 and D7 ran 0.95-1.03x the time of the tiled kernels (Emerald Rapids capped at
// AVX2, 2 threads, cold KV), so AVX2 and SSE4 keep those.
#undef FIA_INPLACE_WIDE
#if !HWY_HAVE_SCALABLE && ((HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3) || \
                           (HWY_ARCH_ARM_A64 && (HWY_TARGET == HWY_NEON || HWY_TARGET == HWY_NEON_BF16 || HWY_TARGET == HWY_NEON_WITHOUT_AES)))
#define FIA_INPLACE_WIDE 1

/// Packed rows per register block: Q·Kᵀ keeps 2 x kGroupRows accumulators (two tokens) and P·V
/// 2 x kGroupRows (two vectors), with the K or V vectors and a Q vector or P broadcast beside them.
inline constexpr int kGroupRows = 8;

/// Tokens of K rows prefetched ahead of Q·Kᵀ, and V rows per block of P·V (every pass over a block
/// before the next). Prefetches go into the product loops, a cache line per pair block, so that
/// they never come in bursts: a whole row at once (18 lines for decode MLA) waited for line fill
/// buffers and made D6 1.2x slower (Emerald Rapids, 2 threads, cold KV).
inline constexpr std::int64_t kInplaceAheadTokens = 16;
inline constexpr std::int64_t kInplacePvTokens = 16;

/// Stored rows as pairs of f32 vectors: load2(df, row, d, v0, v1) reads the pair block of 2 x
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

/// Keeps v in a register. Otherwise GCC folds the load of a query vector into both multiply-adds
/// that use it, and two loads per two multiply-adds keep the products waiting on the load ports.
HWY_INLINE void keep_in_register(VF& v) {
#if HWY_ARCH_X86
  asm("" : "+v"(v.raw));
#else
  asm("" : "+w"(v.raw));
#endif
}

/// The lane sums of Lanes vectors in one vector, lane j the sum of v[j]: on AVX-512 sum16, on
/// NEON (4 lanes) pairwise adds.
HWY_INLINE VF lane_sums(DF df, VF* v) {
#if defined(FIA_SUM16)
  (void)df;
  return sum16(v);
#else
  return sums_of_4(df, v[0], v[1], v[2], v[3]);
#endif
}

/// Q·Kᵀ of kGroupRows arranged query rows (row h of pair block i at q + (i * kInplaceRows + h) *
/// 2L) with tokens k0 and k1 over nb pair blocks, added to a[h] (k0) and a[kGroupRows + h] (k1).
/// With `ahead` (else null) the pair blocks of that row are prefetched as the products go.
template <class Src>
HWY_INLINE void group_dots(DF df, const float* q, const typename Src::T* k0, const typename Src::T* k1, std::int64_t nb,
                           VF* a, const typename Src::T* ahead) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), B2 = 2 * L;
  for (std::int64_t i = 0; i < nb; ++i) {
    if (ahead) prefetch_row(ahead + i * B2, B2 * static_cast<std::int64_t>(sizeof(typename Src::T)));
    VF x0, y0, x1, y1;
    PairLoads<Src>::load2(df, k0, i * B2, x0, y0);
    PairLoads<Src>::load2(df, k1, i * B2, x1, y1);
    const float* qi = q + i * kInplaceRows * B2;
    for (int h = 0; h < kGroupRows; ++h) {
      VF qv = hn::Load(df, qi + h * B2);
      keep_in_register(qv);
      a[h] = hn::MulAdd(qv, x0, a[h]);
      a[kGroupRows + h] = hn::MulAdd(qv, x1, a[kGroupRows + h]);
    }
    for (int h = 0; h < kGroupRows; ++h) {
      VF qv = hn::Load(df, qi + h * B2 + L);
      keep_in_register(qv);
      a[h] = hn::MulAdd(qv, y0, a[h]);
      a[kGroupRows + h] = hn::MulAdd(qv, y1, a[kGroupRows + h]);
    }
  }
}

/// The rows of the item's tokens some way ahead of the products, for prefetching: from the run
/// being computed on into the run after it (a paged cache's next block), so that every run
/// starts with its rows on the way.
struct RowsAhead {
  struct Rows {
    const char* base = nullptr;
    std::int64_t stride = 0, bytes = 0;
  };
  Rows now[2], next[2];  ///< K (or V) and rope rows of this run and the next
  std::int64_t count = 0, next_count = 0;

  /// Row k (0: K or V, 1: rope) of token t of the run (t >= count: of the next run), or null.
  HWY_INLINE const char* row(std::int64_t t, int k) const {
    if (t < count) return now[k].bytes > 0 ? now[k].base + t * now[k].stride : nullptr;
    t -= count;
    return t < next_count && next[k].bytes > 0 ? next[k].base + t * next[k].stride : nullptr;
  }
};

/// The rows ahead of one run of keys (K and rope) or values of item `it` from logical column j.
HWY_INLINE RowsAhead rows_ahead(const Problem& p, const WorkItem& it, const KvRun& run, std::int64_t j, bool keys) {
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(p.kv_dtype));
  auto rows = [&](const KvRun& r, RowsAhead::Rows* out) {
    if (keys) {
      out[0] = {static_cast<const char*>(r.key), r.key_stride * es, p.qk_dim * es};
      if (p.rope_dim > 0) out[1] = {static_cast<const char*>(r.key_rope), r.rope_stride * es, p.rope_dim * es};
    } else {
      out[0] = {static_cast<const char*>(r.value), r.value_stride * es, p.v_dim * es};
    }
  };
  RowsAhead a;
  a.count = run.count;
  rows(run, a.now);
  if (j + run.count < it.col_end) {
    const KvRun n = p.locate(it.b, it.h, j + run.count);
    if (!n.tiled()) {  // NZ rows are copied into contiguous ones first (for_each_run)
      a.next_count = std::min(n.count, it.col_end - j - run.count);
      rows(n, a.next);
    }
  }
  return a;
}

/// Scaled, saturated scores of the 16 rows against the tokens of one run: token t's at
/// st + t * kInplaceRows. q: the arranged query rows (arrange_query).
template <class Src>
void inplace_run_scores(DF df, const Problem& p, const float* q, const KvRun& run, float* st, const RowsAhead& ahead) {
  using T = typename Src::T;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), B2 = 2 * L;
  const std::int64_t nbk = p.qk_dim / B2, nbr = p.rope_dim / B2;
  const T* k = static_cast<const T*>(run.key);
  const T* kr = static_cast<const T*>(run.key_rope);
  const VF vs = hn::Set(df, p.scale);
  for (std::int64_t t = 0; t < run.count; t += 2) {
    const std::int64_t t1 = std::min(t + 1, run.count - 1);  // a lone last token is computed twice
    for (std::int64_t g = 0; g < kInplaceRows; g += kGroupRows) {
      // Each row group prefetches the rows of one token kInplaceAheadTokens ahead.
      const std::int64_t pt = t + kInplaceAheadTokens + (g / kGroupRows) % 2;
      VF a[2 * kGroupRows];
      for (VF& v : a) v = hn::Zero(df);
      group_dots<Src>(df, q + g * B2, k + t * run.key_stride, k + t1 * run.key_stride, nbk, a,
                      reinterpret_cast<const T*>(ahead.row(pt, 0)));
      if (nbr > 0)
        group_dots<Src>(df, q + (nbk * kInplaceRows + g) * B2, kr + t * run.rope_stride, kr + t1 * run.rope_stride,
                        nbr, a, reinterpret_cast<const T*>(ahead.row(pt, 1)));
      HWY_ALIGN float sums[2 * kGroupRows];
      for (std::int64_t v = 0; v < 2 * kGroupRows; v += L)
        hn::Store(saturate_scores(df, hn::Mul(lane_sums(df, a + v), vs)), df, sums + v);
      std::memcpy(st + t * kInplaceRows + g, sums, sizeof(float) * kGroupRows);
      if (t + 1 < run.count) std::memcpy(st + (t + 1) * kInplaceRows + g, sums + kGroupRows, sizeof(float) * kGroupRows);
    }
  }
}

/// The query rows of an in-place item arranged for inplace_run_scores: pair block i of the key
/// part, then of the rope part, of row r at dst + (i * kInplaceRows + r) * 2L in load2's order;
/// `rows` holds the rows widened to f32 (row r at rows + r * kw).
template <class Src>
HWY_INLINE void arrange_query(DF df, const Problem& p, const float* rows, float* dst) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), B2 = 2 * L, kw = p.qk_dim + p.rope_dim;
  for (std::int64_t i = 0; i < kw / B2; ++i)
    for (std::int64_t r = 0; r < kInplaceRows; ++r) {
      const float* src = rows + r * kw + i * B2;
      float* out = dst + (i * kInplaceRows + r) * B2;
      const VF lo = hn::LoadU(df, src), hi = hn::LoadU(df, src + L);
      if constexpr (PairLoads<Src>::kInterleaved) {  // the even elements, then the odd ones
        hn::Store(hn::ConcatEven(df, hi, lo), df, out);
        hn::Store(hn::ConcatOdd(df, hi, lo), df, out + L);
      } else {
        hn::Store(lo, df, out);
        hn::Store(hi, df, out + L);
      }
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
