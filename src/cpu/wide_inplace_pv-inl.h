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
                                         std::int64_t n, const float* pt, float* acc, std::int64_t ld) {
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
      for (std::int64_t d = 0; d < vd; ++d) acc[r * ld + pair_position<Src>(d, L)] += w[r] * Src::one(row, d);
    }
  }
  return out;
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
  const char* rows[kInplacePvTokens];  // the next block's rows; past the item's end, this block's
  for (std::int64_t t = 0; t < n; ++t) {
    const char* r = ahead.row(next + t, 0);
    rows[t] = r ? r : reinterpret_cast<const char*>(v + t * stride);
  }
  for (std::int64_t d0 = 0; d0 < vd; d0 += B2) {
    const char *at[kInplacePvTokens], *soon[kInplacePvTokens];
    for (std::int64_t t = 0; t < n; ++t) {
      at[t] = rows[t] + d0 * es;
      soon[t] = d0 + B2 < vd ? reinterpret_cast<const char*>(v + t * stride + d0 + B2) : rows[t];
    }
    for (std::int64_t g = 0; g < kInplaceRows; g += kGroupRows) {
      float* a = acc + g * ld + d0;
      VF c0[kGroupRows], c1[kGroupRows];
      for (int h = 0; h < kGroupRows; ++h) {
        c0[h] = hn::Load(df, a + h * ld);
        c1[h] = hn::Load(df, a + h * ld + L);
      }
      if (g == 0) pv_pass<Src, kChecked, true>(df, v, stride, n, pt + g, skip, d0, at, soon, B2 * es, c0, c1);
      else pv_pass<Src, kChecked, false>(df, v, stride, n, pt + g, skip, d0, at, soon, B2 * es, c0, c1);
      for (int h = 0; h < kGroupRows; ++h) {
        hn::Store(c0[h], df, a + h * ld);
        hn::Store(c1[h], df, a + h * ld + L);
      }
    }
  }
}

/// acc (rows ld floats apart) += P · V over the tokens of one run of V rows, P of token t at
/// pt + t * kInplaceRows, in blocks of kInplacePvTokens tokens. `checked`: the tile has rows that
/// exclude keys (tokens_left_out).
template <class Src>
void inplace_run_pv(DF df, const Problem& p, const KvRun& run, const float* pt, bool checked, float* acc,
                    std::int64_t ld, const RowsAhead& ahead) {
  using T = typename Src::T;
  const T* v = static_cast<const T*>(run.value);
  for (std::int64_t t0 = 0; t0 < run.count; t0 += kInplacePvTokens) {
    const std::int64_t n = std::min(kInplacePvTokens, run.count - t0);
    const T* vb = v + t0 * run.value_stride;
    const float* pb = pt + t0 * kInplaceRows;
    if (checked) {
      const std::uint64_t skip = tokens_left_out<Src>(df, p, vb, run.value_stride, n, pb, acc, ld);
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
    if (bf16_key_dots(p) && query_pairs(s.q, kw, pairs)) qp = pairs;
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
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    if (!formed) exp_tile(df, p, st, sv.col_stride, nc, kInplaceRows, rs.max, l);
    const bool checked = !tile_fully_visible(p, it, c0, nc) || p.has_pse;  // else no row excludes a key
    for_each_run(p, it.b, it.h, c0, nc, KvParts::kValues, [&](std::int64_t c, const KvRun& run) {
      inplace_run_pv<Src>(df, p, run, st + c * sv.col_stride, checked, a, ld, rows_ahead(p, it, run, c0 + c, false));
    });
  }
  for (std::int64_t r = 0; r < kInplaceRows; ++r) {
    if (rs.max[r] == kNegInf) l[r] = 0.0f;
    for (std::int64_t d = 0; d < vd; ++d) acc[r * vd + d] = a[r * ld + pair_position<Src>(d, L)];  // natural order
  }
}

#endif  // FIA_INPLACE_WIDE

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_WIDE_INPLACE_PV_INL_H_
