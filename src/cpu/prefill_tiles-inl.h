// P·V of wide items (prefill, and decode of 16 rows) over bf16 V rows on AMX tiles
// (amx_wide_values, cpu/amx.hpp) where P is E rounded to bf16 (FIA-SPEC 25.3, non-TND layouts: one
// piece, exact in bf16) or kept in f32 (TND high precision: three pieces, P = p1 + p2 + p3
// exactly, each bf16, so that every product is still exact and only the order of the fp32 sums
// changes). Per tile: the V rows interleaved into token pairs (interleave_values), which is the
// tiles' B layout as it is; P transposed 32 tokens at a time, split into its pieces and packed in
// pairs of tokens (the A operands, one row per query row); products the tiles must not take go
// through fp32 first (products_in_fp32). The accumulators keep the output's row order. An
// element's share of a tile is one chain of tile products, whatever its block, so storage forms
// and thread counts keep its bits.
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

/// Word indices of vpermt2w that gather the high halves of 32 floats (16 in a, 16 in b), in
/// order: the truncated bf16 of float i lands in half i.
struct HighHalfIndices {
  alignas(64) std::uint16_t at[32];
};

constexpr HighHalfIndices high_half_indices() {
  HighHalfIndices w{};
  for (int j = 0; j < 32; ++j) w.at[j] = static_cast<std::uint16_t>(2 * j + 1);
  return w;
}

inline constexpr HighHalfIndices kHighHalfIndices = high_half_indices();

/// The pieces of a tile's P (nc columns at st, stride cs, Rp rows) as amx_output_sums's A tiles:
/// piece i's pair j of chunk kk for row r (columns 32 kk + 2j and 32 kk + 2j + 1; 0 past nc) at
/// pa[i * piece_words + (kk * Rp + r) * 16 + j]. Each chunk's 32 columns are transposed once into
/// `rows` (Rp x 32 floats) and each row's pieces then packed from there. P below `floor` counts
/// as 0 (products_in_fp32 takes it). Each piece is the bf16 truncation of what the ones before
/// left, an exact f32 subtraction. Returns true when some P lies in (0, floor) (some_p_below's
/// answer, from the values in registers).
HWY_INLINE bool tile_pieces(DF df, const float* st, std::int64_t cs, std::int64_t nc, std::int64_t Rp,
                            std::int64_t pieces, float floor, float* rows, std::uint32_t* pa,
                            std::int64_t piece_words) {
  const __m512 f = _mm512_set1_ps(floor);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m512i halves = _mm512_load_si512(kHighHalfIndices.at);
  const __m512 zero = _mm512_setzero_ps();
  __mmask16 below = 0;
  for (std::int64_t kk = 0; 32 * kk < nc; ++kk) {
    const std::int64_t n = std::min<std::int64_t>(32, nc - 32 * kk);
    const auto first = static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1);
    const auto second = static_cast<__mmask16>(n >= 32 ? 0xFFFF : n > 16 ? (1u << (n - 16)) - 1 : 0);
    transpose_into(df, st + 32 * kk * cs, cs, n, Rp, rows, 32);
    for (std::int64_t r = 0; r < Rp; ++r) {
      __m512 x0 = _mm512_maskz_loadu_ps(first, rows + r * 32), x1 = _mm512_maskz_loadu_ps(second, rows + r * 32 + 16);
      const __mmask16 keep0 = _mm512_cmp_ps_mask(x0, f, _CMP_GE_OQ), keep1 = _mm512_cmp_ps_mask(x1, f, _CMP_GE_OQ);
      below |= _mm512_mask_cmp_ps_mask(static_cast<__mmask16>(~keep0), x0, zero, _CMP_GT_OQ) |
               _mm512_mask_cmp_ps_mask(static_cast<__mmask16>(~keep1), x1, zero, _CMP_GT_OQ);
      x0 = _mm512_maskz_mov_ps(keep0, x0);
      x1 = _mm512_maskz_mov_ps(keep1, x1);
      for (std::int64_t i = 0; i < pieces; ++i) {
        const __m512i h0 = _mm512_and_si512(_mm512_castps_si512(x0), high);
        const __m512i h1 = _mm512_and_si512(_mm512_castps_si512(x1), high);
        _mm512_storeu_si512(pa + i * piece_words + (kk * Rp + r) * 16, _mm512_permutex2var_epi16(h0, halves, h1));
        x0 = _mm512_sub_ps(x0, _mm512_castsi512_ps(h0));
        x1 = _mm512_sub_ps(x1, _mm512_castsi512_ps(h1));
      }
    }
  }
  return below != 0;
}

/// Phase B of a wide item over bf16 V rows on AMX tiles (amx_wide_values): per tile, E (rounded as
/// the P rule asks) and l as exp_tile makes them; the V rows interleaved into pairs (the tiles'
/// B operands as they are), P split into pieces and transposed into the A operands, the products
/// the tiles must not take added in fp32 (looked for only where those two passes found a V value
/// that is not finite or a P below the floor), and amx_output_sums adding the tile's share to the
/// accumulators, kept in the output's row order (Rp x vd, in the item's acc_t). Buffers per
/// thread.
inline void wide_tile_accumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s,
                                 ScoreView sv, const RowStats& rs, float* l, float* acc) {
  const DF df;
  const std::int64_t R = packed_rows(it), Rp = padded_rows(it), vd = p.v_dim, pieces = tile_p_pieces(p);
  const float floor = tile_p_floor(pieces);
  const std::int64_t max_pairs = (tile.cols + 31) / 32 * 16;
  thread_local std::vector<std::uint32_t> vi, pa;
  thread_local std::vector<std::uint16_t> pending;
  thread_local std::vector<float> rows;
  vi.resize(static_cast<std::size_t>(max_pairs * vd));
  pa.resize(static_cast<std::size_t>(pieces * max_pairs * Rp));
  pending.resize(static_cast<std::size_t>(vd));
  rows.resize(static_cast<std::size_t>(Rp * 32));
  float* out = s.acc_t;  // Rp x vd, in row order here
  std::fill(out, out + Rp * vd, 0.0f);
  std::fill(l, l + Rp, 0.0f);
  const AmxTileSession tiles;
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0), cs = sv.col_stride;
    const std::int64_t chunks = (nc + 31) / 32, pairs = chunks * 16;
    float* st = sv.base + (c0 - it.col_begin) * cs;
    exp_tile(df, p, st, cs, nc, Rp, rs.max, l);
    TileExceptions found;
    found.values_not_finite = interleave_values(p, it, c0, nc, vi.data(), pending.data(), true);
    std::fill(vi.data() + (nc + 1) / 2 * vd, vi.data() + pairs * vd, 0u);
    found.p_below_floor = tile_pieces(df, st, cs, nc, Rp, pieces, floor, rows.data(), pa.data(), pairs * Rp);
    const bool checked = !tile_fully_visible(p, it, c0, nc) || p.has_pse;
    products_in_fp32(st, cs, nc, Rp, checked, true, floor, found, vi.data(), vd, Accumulators{out, vd, 1});
    amx_output_sums(pa.data(), pieces, pairs * Rp, vi.data(), vd, chunks, Rp, out, vd);
  }
  for (std::int64_t r = 0; r < R; ++r) {
    if (rs.max[r] == kNegInf) l[r] = 0.0f;
    std::copy(out + r * vd, out + (r + 1) * vd, acc + r * vd);
  }
}

#endif  // FIA_BF16_DOTS

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_PREFILL_TILES_INL_H_
