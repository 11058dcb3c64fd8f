// In-place wide items (cpu/wide_inplace-inl.h): P·V over V rows read in place, and the phase A
// and B kernels of such items. Included per Highway target by cpu/attention_item.cpp after
// wide_inplace-inl.h and prefill-inl.h (the toggle guard below lets foreach_target re-include it
// once per target).
#if defined(FIA_CPU_WIDE_INPLACE_PV_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_WIDE_INPLACE_PV_INL_H_
#undef FIA_CPU_WIDE_INPLACE_PV_INL_H_
#else
#define FIA_CPU_WIDE_INPLACE_PV_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#ifdef FIA_INPLACE_WIDE

/// Where element d of a row lands in load2's order (the inverse of pair_element).
template <class Src>
HWY_INLINE std::int64_t pair_position(std::int64_t d, std::int64_t lanes) {
  if constexpr (!PairLoads<Src>::kInterleaved) return d;
  const std::int64_t e = d % (2 * lanes);
  return d - e + (e % 2 == 0 ? e / 2 : lanes + e / 2);
}

/// Where element d of an accumulator row lies: load2's order, or with `pairs` (P·V by bf16 dot
/// products of token pairs) dot_pair_position's.
template <class Src>
HWY_INLINE std::int64_t accumulator_position(std::int64_t d, std::int64_t lanes, bool pairs) {
#ifdef FIA_BF16_DOTS
  if (pairs) return dot_pair_position(d);
#endif
  (void)pairs;
  return pair_position<Src>(d, lanes);
}

/// True when the n elements of a stored row (n a multiple of a pair block) are all finite.
template <class Src>
HWY_INLINE bool row_finite(DF df, const typename Src::T* row, std::int64_t n) {
  const std::int64_t B2 = 2 * static_cast<std::int64_t>(hn::Lanes(df));
  const VF big = hn::Set(df, std::numeric_limits<float>::max());
  auto bad = hn::FirstN(df, 0);
  for (std::int64_t d = 0; d < n; d += B2) {
    VF x, y;
    PairLoads<Src>::load2(df, row, d, x, y);
    bad = hn::Or(bad, hn::Or(hn::Not(hn::Le(hn::Abs(x), big)), hn::Not(hn::Le(hn::Abs(y), big))));
  }
  return hn::AllFalse(df, bad);
}

/// For a block of n <= 64 tokens of a tile where rows may exclude keys (masks, pse): bit t set for
/// the tokens P·V's vector passes leave out. These are the tokens no row weights (P = 0 for all
/// rows: masked keys, whose V may hold anything, 25.1 #24), and the tokens some rows exclude whose
/// V row is not finite, which are added here, in scalar, to the rows that weight them. V row t at
/// v + t * stride, P of token t at pt + t * kInplaceRows; acc rows ld floats apart, in load2's order.
template <class Src>
HWY_INLINE std::uint64_t tokens_left_out(DF df, const Problem& p, const typename Src::T* v, std::int64_t stride,
                                         std::int64_t n, const float* pt, float* acc, std::int64_t ld, bool pairs) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), vd = p.v_dim;
  const VF zero = hn::Zero(df);
  std::uint64_t out = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    const float* w = pt + t * kInplaceRows;
    auto any = hn::FirstN(df, 0), all = hn::FirstN(df, L);
    for (std::int64_t r = 0; r < kInplaceRows; r += L) {
      const auto weighted = hn::Ne(hn::Load(df, w + r), zero);
      any = hn::Or(any, weighted);
      all = hn::And(all, weighted);
    }
    if (hn::AllTrue(df, all)) continue;
    const typename Src::T* row = v + t * stride;
    if (!hn::AllFalse(df, any) && row_finite<Src>(df, row, vd)) continue;
    out |= std::uint64_t{1} << t;
    for (std::int64_t r = 0; r < kInplaceRows; ++r) {
      if (w[r] == 0.0f) continue;
      for (std::int64_t d = 0; d < vd; ++d) acc[r * ld + accumulator_position<Src>(d, L, pairs)] += w[r] * Src::one(row, d);
    }
  }
  return out;
}

/// The rows a P·V block's first row group prefetches: those of the next block (tokens next ..
/// next + n of the run, through `ahead`), past the item's end this block's own (v, `stride` apart).
template <class T>
HWY_INLINE void next_block_rows(const RowsAhead& ahead, std::int64_t next, const T* v, std::int64_t stride,
                                std::int64_t n, const char** rows) {
  for (std::int64_t t = 0; t < n; ++t) {
    const char* r = ahead.row(next + t, 0);
    rows[t] = r ? r : reinterpret_cast<const char*>(v + t * stride);
  }
}

/// The accumulators of a row group: two vectors of each of kGroupRows rows ld floats apart at a.
HWY_INLINE void load_group(DF df, const float* a, std::int64_t ld, VF* c0, VF* c1) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  for (int h = 0; h < kGroupRows; ++h) {
    c0[h] = hn::Load(df, a + h * ld);
    c1[h] = hn::Load(df, a + h * ld + L);
  }
}
HWY_INLINE void store_group(DF df, float* a, std::int64_t ld, const VF* c0, const VF* c1) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  for (int h = 0; h < kGroupRows; ++h) {
    hn::Store(c0[h], df, a + h * ld);
    hn::Store(c1[h], df, a + h * ld + L);
  }
}

/// One pass of pv_block: c0/c1[h] += P of row h (at w + t * kInplaceRows) times the pair block
/// at d0 of V row t (v + t * stride), over the n tokens of the block, the tokens set in `skip` left
/// out (kChecked); with kPrefetch, token t's step prefetches `bytes` at ahead[t] into L2 and at
/// soon[t] into L1 (n pointers each).
template <class Src, bool kChecked, bool kPrefetch>
HWY_INLINE void pv_pass(DF df, const typename Src::T* v, std::int64_t stride, std::int64_t n, const float* w,
                        std::uint64_t skip, std::int64_t d0, const char* const* ahead, const char* const* soon,
                        std::int64_t bytes, VF* c0, VF* c1) {
  for (std::int64_t t = 0; t < n; ++t, v += stride, w += kInplaceRows) {
    if constexpr (kPrefetch) {
      prefetch_row(ahead[t], bytes);
      prefetch_row<3>(soon[t], bytes);
    }
    if (kChecked && ((skip >> t) & 1) != 0) continue;
    VF x, y;
    PairLoads<Src>::load2(df, v, d0, x, y);
    for (int h = 0; h < kGroupRows; ++h) {
      VF wv = hn::Set(df, w[h]);
      keep_in_register(wv);
      c0[h] = hn::MulAdd(wv, x, c0[h]);
      c1[h] = hn::MulAdd(wv, y, c1[h]);
    }
  }
}

/// acc (16 rows of v_dim, ld floats apart, in load2's order) += P · V over the n tokens of a block (V row t at
/// v + t * stride, P of token t at pt + t * kInplaceRows), the tokens set in `skip` left out
/// (kChecked). One pass per pair block and row group, its accumulators in registers over the
/// block; the first row group's pass prefetches, a token per step, the same pair block of the
/// next block's rows (tokens next .. next + kInplacePvTokens of the run, through `ahead`) into L2
/// and what the next pass reads into L1: this block's next pair block, after the last one the next
/// block's first. Each pass reads a line of 16 strided rows (V rows of 1 KiB for decode MLA), which
/// the L1 prefetchers do not fetch ahead: D6 and D7 0.95-0.97x the time with it (Emerald Rapids,
/// 2 threads, cold KV, in-process A/B).
template <class Src, bool kChecked>
HWY_INLINE void pv_block(DF df, const Problem& p, const typename Src::T* v, std::int64_t stride, std::int64_t n,
                         const float* pt, std::uint64_t skip, float* acc, std::int64_t ld, const RowsAhead& ahead,
                         std::int64_t next) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), B2 = 2 * L, vd = p.v_dim;
  const std::int64_t es = static_cast<std::int64_t>(sizeof(typename Src::T));
  const char* rows[kInplacePvTokens];
  next_block_rows(ahead, next, v, stride, n, rows);
  for (std::int64_t d0 = 0; d0 < vd; d0 += B2) {
    const char *at[kInplacePvTokens], *soon[kInplacePvTokens];
    for (std::int64_t t = 0; t < n; ++t) {
      at[t] = rows[t] + d0 * es;
      soon[t] = d0 + B2 < vd ? reinterpret_cast<const char*>(v + t * stride + d0 + B2) : rows[t];
    }
    for (std::int64_t g = 0; g < kInplaceRows; g += kGroupRows) {
      float* a = acc + g * ld + d0;
      VF c0[kGroupRows], c1[kGroupRows];
      load_group(df, a, ld, c0, c1);
      if (g == 0) pv_pass<Src, kChecked, true>(df, v, stride, n, pt + g, skip, d0, at, soon, B2 * es, c0, c1);
      else pv_pass<Src, kChecked, false>(df, v, stride, n, pt + g, skip, d0, at, soon, B2 * es, c0, c1);
      store_group(df, a, ld, c0, c1);
    }
  }
}

#ifdef FIA_BF16_DOTS
/// pv_block as bf16 dot products of token pairs (bf16_value_dots; acc in dot_pair_position's
/// order): per pair block and row group, each pair of tokens' V rows interleaved into two vectors
/// and each row's P pair (bf16 bits of tokens 2k and 2k + 1) broadcast as one 32-bit operand. A
/// token of `skip`, or beyond n, reads 0 for its V row and its P. A token with a subnormal P in
/// some row (which the instruction reads as 0) is left out of the pairs and added by fp32
/// multiply-adds in the same lanes after them. The same prefetches as pv_block.
HWY_INLINE void pv_block_pairs(DF df, const Problem& p, const hwy::bfloat16_t* v, std::int64_t stride, std::int64_t n,
                               const float* pt, std::uint64_t skip, float* acc, std::int64_t ld, const RowsAhead& ahead,
                               std::int64_t next) {
  static_assert(kInplaceRows == 16 && kInplacePvTokens <= 16, "one vector of rows; token masks of 16 bits");
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), B2 = 2 * L, vd = p.v_dim, es = 2;
  const auto* vb = reinterpret_cast<const std::uint16_t*>(v);
  // Which tokens go through the dot products and which through fp32, and the P pairs.
  const __m512i exponent = _mm512_set1_epi32(0x7F800000), mantissa = _mm512_set1_epi32(0x007FFFFF);
  std::uint32_t fp32 = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    if ((skip >> t) & 1) continue;
    const __m512i w = _mm512_loadu_si512(pt + t * kInplaceRows);
    if (_mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(w, exponent), w, mantissa) != 0) fp32 |= 1u << t;
  }
  const std::uint32_t dotted = ~fp32 & ~static_cast<std::uint32_t>(skip) & ((1u << n) - 1u);
  alignas(64) std::uint32_t pw[(kInplacePvTokens + 1) / 2][kInplaceRows];
  for (std::int64_t k = 0; 2 * k < n; ++k) {
    const auto m0 = static_cast<__mmask16>((dotted >> (2 * k)) & 1 ? 0xFFFF : 0);
    const auto m1 = static_cast<__mmask16>((dotted >> (2 * k + 1)) & 1 ? 0xFFFF : 0);
    const __m512i w0 = _mm512_maskz_loadu_epi32(m0, pt + 2 * k * kInplaceRows);
    const __m512i w1 = _mm512_maskz_loadu_epi32(m1, pt + std::min(2 * k + 1, n - 1) * kInplaceRows);  // (in the block)
    _mm512_store_si512(pw[k], _mm512_or_si512(_mm512_srli_epi32(w0, 16),
                                              _mm512_and_si512(w1, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)))));
  }
  const char* rows[kInplacePvTokens];
  next_block_rows(ahead, next, vb, stride, n, rows);
  for (std::int64_t d0 = 0; d0 < vd; d0 += B2) {
    for (std::int64_t g = 0; g < kInplaceRows; g += kGroupRows) {
      float* a = acc + g * ld + d0;
      VF lo[kGroupRows], hi[kGroupRows];
      load_group(df, a, ld, lo, hi);
      for (std::int64_t k = 0; 2 * k < n; ++k) {
        const std::int64_t t = 2 * k;
        if (g == 0)
          for (std::int64_t j = t; j < std::min(t + 2, n); ++j) {
            prefetch_row(rows[j] + d0 * es, B2 * es);
            prefetch_row<3>(d0 + B2 < vd ? reinterpret_cast<const char*>(vb + j * stride + d0 + B2) : rows[j], B2 * es);
          }
        const std::uint32_t both = (dotted >> t) & 3u;
        if (both == 0) continue;
        const __m512i x0 = _mm512_maskz_loadu_epi16(both & 1u ? ~__mmask32{0} : 0, vb + t * stride + d0);
        const __m512i x1 = _mm512_maskz_loadu_epi16(both & 2u ? ~__mmask32{0} : 0, vb + std::min(t + 1, n - 1) * stride + d0);
        const __m512i even = _mm512_unpacklo_epi16(x0, x1), odd = _mm512_unpackhi_epi16(x0, x1);
        for (int h = 0; h < kGroupRows; ++h) {
          const __m512i w = _mm512_set1_epi32(static_cast<int>(pw[k][g + h]));
          lo[h] = dot_pairs(lo[h], even, w);
          hi[h] = dot_pairs(hi[h], odd, w);
        }
      }
      for (std::uint32_t rest = fp32; rest != 0; rest &= rest - 1) {
        const int t = __builtin_ctz(rest);  // V row t as floats in the same lanes: above a zero half
        const __m512i x = _mm512_loadu_si512(vb + t * stride + d0);
        const VF e = VF{_mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), x))};
        const VF o = VF{_mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), x))};
        for (int h = 0; h < kGroupRows; ++h) {
          const VF w = hn::Set(df, pt[t * kInplaceRows + g + h]);
          lo[h] = hn::MulAdd(w, e, lo[h]);
          hi[h] = hn::MulAdd(w, o, hi[h]);
        }
      }
      store_group(df, a, ld, lo, hi);
    }
  }
}
#endif

/// acc (rows ld floats apart) += P · V over the tokens of one run of V rows, P of token t at
/// pt + t * kInplaceRows, in blocks of kInplacePvTokens tokens. `checked`: the tile has rows that
/// exclude keys (tokens_left_out).
template <class Src>
void inplace_run_pv(DF df, const Problem& p, const KvRun& run, const float* pt, bool checked, float* acc,
                    std::int64_t ld, const RowsAhead& ahead, bool pairs) {
  using T = typename Src::T;
  const T* v = static_cast<const T*>(run.value);
  for (std::int64_t t0 = 0; t0 < run.count; t0 += kInplacePvTokens) {
    const std::int64_t n = std::min(kInplacePvTokens, run.count - t0);
    const T* vb = v + t0 * run.value_stride;
    const float* pb = pt + t0 * kInplaceRows;
    const std::uint64_t skip = checked ? tokens_left_out<Src>(df, p, vb, run.value_stride, n, pb, acc, ld, pairs) : 0;
#ifdef FIA_BF16_DOTS
    if constexpr (std::is_same_v<Src, BF16Src>)
      if (pairs) {
        pv_block_pairs(df, p, vb, run.value_stride, n, pb, skip, acc, ld, ahead, t0 + n);
        continue;
      }
#endif
    if (checked) {
      pv_block<Src, true>(df, p, vb, run.value_stride, n, pb, skip, acc, ld, ahead, t0 + n);
    } else {
      pv_block<Src, false>(df, p, vb, run.value_stride, n, pb, 0, acc, ld, ahead, t0 + n);
    }
  }
}

/// True when phase B of in-place items reads the V rows in place too (inplace_accumulate), false
/// when it takes the tiled kernel (wide_accumulate, over the same column-major scores). With 16
/// registers (AVX2: blocks of 4 rows, each V pair block widened once per block of rows) the
/// in-place P·V paid for head dim 128 and not for decode MLA's 512: D7 0.86x, D6 1.12x the time of
/// the tiled P·V (Zen 4 VM capped at AVX2, 2 threads, cold KV, alternating runs).
HWY_INLINE bool inplace_pv(const Problem& p) { return kVectorRegisters >= 32 || p.v_dim <= 128; }

/// Phase A of an in-place wide item: the tiled kernels' scores (column-major, kInplaceRows rows)
/// with both products of each tile reading the K rows where they are stored.
template <class QSrc, class Src>
void inplace_scores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                    float* m) {
  const DF df;
  const std::int64_t kw = p.qk_dim + p.rope_dim;
  widen_query_rows<QSrc>(p, it, s.k);  // kInplaceRows rows of kw floats: within the K tile buffer
  transpose_into(df, s.k, kw, kInplaceRows, kw, s.q, kInplaceRows);  // then s.k holds widened K
  // bf16 dot products (cpu/bf16_dots-inl.h): the query pairs lie in the K tile buffer (128 x kw
  // floats) after the widened K block (kScoreTokens x 2L floats), kw x 8 floats.
  const std::uint32_t* qp = nullptr;
#ifdef FIA_BF16_DOTS
  if constexpr (std::is_same_v<Src, BF16Src>) {
    auto* pairs = reinterpret_cast<std::uint32_t*>(s.k + kScoreTokens * 2 * hn::Lanes(df));
    if (bf16_key_dots(p) && query_pairs(s.q, kInplaceRows, kw, pairs, kInplaceRows)) qp = pairs;
  }
#endif
  std::fill(m, m + kInplaceRows, kNegInf);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    for_each_run(p, it.b, it.h, c0, nc, KvParts::kKeys, [&](std::int64_t c, const KvRun& run) {
      inplace_run_scores<Src>(df, p, s.q, qp, run, st + c * sv.col_stride, rows_ahead(p, it, run, c0 + c, true), s.k);
    });
    finish_score_tile(df, p, it, sv, c0, nc, m);
  }
}

/// Phase B of an in-place wide item: as wide_accumulate, P·V reading the V rows where they are.
/// The accumulators live in the V tile buffer (unused here) with rows v_tile_stride apart: rows of
/// 512 floats 2 KiB apart fall into 2 of the 64 L1 sets, and every pass reloads 16 of them (the
/// padding: D6 0.97x the time, in-process A/B).
template <class Src>
void inplace_accumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                        const RowStats& rs, float* l, float* acc) {
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), vd = p.v_dim, ld = v_tile_stride(vd);
  float* a = s.v;
  std::fill(a, a + kInplaceRows * ld, 0.0f);
  const bool formed = form_p_columns(df, p, it, sv, rs, l);  // 25.3 paths other than round(E)
  if (!formed) std::fill(l, l + kInplaceRows, 0.0f);
  bool pairs = false;  // P·V as bf16 dot products of token pairs (cpu/bf16_dots-inl.h)
#ifdef FIA_BF16_DOTS
  if constexpr (std::is_same_v<Src, BF16Src>) pairs = bf16_value_dots(p);  // (then formed is false)
#endif
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    if (!formed) exp_tile(df, p, st, sv.col_stride, nc, kInplaceRows, rs.max, l);
    const bool checked = !tile_fully_visible(p, it, c0, nc) || p.has_pse;  // else no row excludes a key
    for_each_run(p, it.b, it.h, c0, nc, KvParts::kValues, [&](std::int64_t c, const KvRun& run) {
      inplace_run_pv<Src>(df, p, run, st + c * sv.col_stride, checked, a, ld, rows_ahead(p, it, run, c0 + c, false), pairs);
    });
  }
  for (std::int64_t r = 0; r < kInplaceRows; ++r) {
    if (rs.max[r] == kNegInf) l[r] = 0.0f;
    for (std::int64_t d = 0; d < vd; ++d) acc[r * vd + d] = a[r * ld + accumulator_position<Src>(d, L, pairs)];  // natural order
  }
}

#endif  // FIA_INPLACE_WIDE

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_WIDE_INPLACE_PV_INL_H_
