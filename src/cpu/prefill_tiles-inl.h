// P·V of wide items (prefill) over bf16 V rows on AMX tiles (amx_wide_values, cpu/amx.hpp) where
// P is E rounded to bf16 (FIA-SPEC 25.3, non-TND layouts: one piece, exact in bf16) or kept in
// f32 (TND high precision: three pieces, P = p1 + p2 + p3 exactly, each bf16, so that every
// product is still exact and only the order of the fp32 sums changes). Per tile: the V rows
// interleaved into token pairs (interleave_values) and transposed, 16 pairs x 16 dims at a time,
// into the tiles' layout (dims in rows); P split into its pieces, packed in pairs of tokens;
// products the tiles must not take go through fp32 first (products_in_fp32). An element's
// share of a tile is one chain of tile products, whatever its block, so storage forms and thread
// counts keep its bits.
// Included per Highway target by cpu/attention_item.cpp (the toggle guard below lets
// foreach_target re-include it once per target).
#if defined(FIA_CPU_PREFILL_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_PREFILL_TILES_INL_H_
#undef FIA_CPU_PREFILL_TILES_INL_H_
#else
#define FIA_CPU_PREFILL_TILES_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#ifdef FIA_BF16_DOTS

/// The pieces of P (f32, 0 <= P <= 1) the tiles take: one when P is exact in bf16, else three.
/// P below the threshold (tile_p_floor) goes through fp32 instead: its last piece could be
/// subnormal, which the tiles read as 0.
inline std::int64_t tile_p_pieces(const Problem& p) { return p.p_rule.round_to == DType::BF16 ? 1 : 3; }

/// 2^-126 for one piece (a subnormal P); 2^-103 for three (the third piece of P >= 2^-103 is 0 or
/// at least 2^-126).
inline float tile_p_floor(std::int64_t pieces) { return pieces == 1 ? 0x1p-126f : 0x1p-103f; }

/// The pieces of a tile's P (nc columns at st, stride cs, Rp rows) in pairs of tokens for
/// amx_value_sums: piece i's pair k (columns 2k, 2k + 1; 0 past nc, up to `pairs`) of row r at
/// pp[i * piece_words + k * Rp + r]. P below `floor` counts as 0 (products_in_fp32 took it).
/// Each piece is the bf16 truncation of what the ones before left, an exact f32 subtraction.
HWY_INLINE void tile_pieces(const float* st, std::int64_t cs, std::int64_t nc, std::int64_t Rp, std::int64_t pairs,
                            std::int64_t pieces, float floor, std::uint32_t* pp, std::int64_t piece_words) {
  const __m512 f = _mm512_set1_ps(floor);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  auto column = [&](std::int64_t c, std::int64_t r) {
    if (c >= nc) return _mm512_setzero_ps();
    const __m512 x = _mm512_loadu_ps(st + c * cs + r);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, f, _CMP_GE_OQ), x);
  };
  for (std::int64_t k = 0; k < pairs; ++k)
    for (std::int64_t r = 0; r < Rp; r += 16) {
      __m512 lo = column(2 * k, r), hi = column(2 * k + 1, r);
      for (std::int64_t i = 0; i < pieces; ++i) {
        const __m512i l = _mm512_and_si512(_mm512_castps_si512(lo), high);
        const __m512i h = _mm512_and_si512(_mm512_castps_si512(hi), high);
        _mm512_storeu_si512(pp + i * piece_words + k * Rp + r, _mm512_or_si512(_mm512_srli_epi32(l, 16), h));
        lo = _mm512_sub_ps(lo, _mm512_castsi512_ps(l));
        hi = _mm512_sub_ps(hi, _mm512_castsi512_ps(h));
      }
    }
}

/// Phase B of a wide item over bf16 V rows on AMX tiles (amx_wide_values): per tile, E (rounded as
/// the P rule asks) and l as exp_tile makes them; the V rows interleaved into pairs, the products
/// the tiles must not take added in fp32, the pairs transposed into the tiles' layout, P split
/// into pieces, and amx_value_sums adding the tile's share to acc_t. Buffers per thread.
inline void wide_tile_accumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s,
                                 ScoreView sv, const RowStats& rs, float* l, float* acc) {
  const DF df;
  const std::int64_t Rp = padded_rows(it), vd = p.v_dim, pieces = tile_p_pieces(p);
  const float floor = tile_p_floor(pieces);
  const std::int64_t max_pairs = (tile.cols + 31) / 32 * 16;
  thread_local std::vector<std::uint32_t> vi, vt, pp;
  thread_local std::vector<std::uint16_t> pending;
  vi.resize(static_cast<std::size_t>(max_pairs * vd));
  vt.resize(static_cast<std::size_t>(max_pairs * vd));
  pp.resize(static_cast<std::size_t>(pieces * max_pairs * Rp));
  pending.resize(static_cast<std::size_t>(vd));
  std::fill(s.acc_t, s.acc_t + vd * Rp, 0.0f);
  std::fill(l, l + Rp, 0.0f);
  const AmxTileSession tiles;
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0), cs = sv.col_stride;
    const std::int64_t chunks = (nc + 31) / 32, pairs = chunks * 16;
    float* st = sv.base + (c0 - it.col_begin) * cs;
    exp_tile(df, p, st, cs, nc, Rp, rs.max, l);
    interleave_values(p, it, c0, nc, vi.data(), pending.data());
    std::fill(vi.data() + (nc + 1) / 2 * vd, vi.data() + pairs * vd, 0u);
    const bool checked = !tile_fully_visible(p, it, c0, nc) || p.has_pse;
    products_in_fp32(st, cs, nc, Rp, checked, true, floor, vi.data(), vd, s.acc_t);
    for (std::int64_t kk = 0; kk < chunks; ++kk)  // 16 pairs x vd words -> vd x 16, bits as they are
      transpose_into(df, reinterpret_cast<const float*>(vi.data() + kk * 16 * vd), vd, 16, vd,
                     reinterpret_cast<float*>(vt.data() + kk * vd * 16), 16);
    tile_pieces(st, cs, nc, Rp, pairs, pieces, floor, pp.data(), pairs * Rp);
    amx_value_sums(vt.data(), vd, pp.data(), pieces, pairs * Rp, chunks, Rp, s.acc_t);
  }
  finish_accumulators(df, p, it, s, rs.max, l, acc);
}

#endif  // FIA_BF16_DOTS

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_PREFILL_TILES_INL_H_
