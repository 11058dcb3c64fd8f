// Wide items (prefill) over bf16 rows as bf16 dot products (cpu/bf16_dots-inl.h) on AVX-512 CPUs
// where they are taken (bf16_dots_enabled(), cpu/isa.hpp), or with Q·Kᵀ on AMX tiles where those
// are (amx_enabled(), cpu/amx.hpp). Q·Kᵀ (bf16_wide_key_dots): the query is
// packed once per item into pairs of dims, 16 rows per vector, and each token's pair of K elements
// is read from its stored row as one broadcast 32-bit operand, so K is never widened. P·V where P
// is E rounded to bf16 (bf16_value_dots): per tile, P packed into pairs of tokens and the V rows
// interleaved into token pairs. Register blocks of 4 row vectors x 6 columns (24 accumulators), as
// the fp32 kernel's (prefill-inl.h). A score, or a tile's share of an output element, is one chain
// of dot products in order, whichever block it falls in, so paged, contiguous and NZ caches and any
// thread count give the same bits. Where the CPU has AMX tiles (amx_wide_keys, cpu/amx.hpp), Q·Kᵀ
// takes tdpbf16ps instead, from the same packed query and the same K rows, tile by tile, and P·V
// takes them too (amx_wide_values, cpu/prefill_tiles-inl.h).
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

/// One operand of pair_block_product, the one whose pairs are broadcast: pair k of column n at
/// base + n * stride + k * pair_stride bytes (one 32-bit word), `pairs` pairs, whose row pairs
/// start at pair `first` of the item's. Q·Kᵀ: a part (K or rope) of a run's rows, a column per
/// token; P·V: the interleaved V tile (interleave_values), a column per V dim.
struct PairColumns {
  const char* base = nullptr;
  std::int64_t stride = 0, pair_stride = 4, pairs = 0, first = 0;
};

/// acc[v][n] += the dot products of row vector v's pairs with column n's over one operand, for
/// NV row vectors and the NC columns from n0: qp holds pair k of row r at qp[k * ldq + r] (the
/// block's first row at qp).
template <int NV, int NC>
HWY_INLINE void pair_part_dots(const std::uint32_t* qp, std::int64_t ldq, const PairColumns& b, std::int64_t n0,
                               VF (&acc)[NV][NC]) {
  // Column n at bn + (n % 3) * stride, bn that of column 0 or 3: two pointers and the strides
  // stay in general registers, as in block_product.
  const char* b0 = b.base + n0 * b.stride;
  const char* b3 = b0 + 3 * b.stride;
  const std::uint32_t* q = qp + b.first * ldq;
  for (std::int64_t k = 0; k < b.pairs; ++k) {
    __m512i qv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) qv[v] = _mm512_loadu_si512(q + k * ldq + 16 * v);
    const std::int64_t o = k * b.pair_stride;
#pragma GCC unroll 6
    for (int n = 0; n < NC; ++n) {
      const char* bn = (n < 3 ? b0 : b3) + (n % 3) * b.stride;
      std::uint32_t pair = 0;
      std::memcpy(&pair, bn + o, sizeof(pair));
      const __m512i kv = _mm512_set1_epi32(static_cast<int>(pair));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[v][n] = dot_pairs(acc[v][n], qv[v], kv);
    }
  }
}

/// NV row vectors (16 rows each, from qp's first) against the NC columns from n0 over both
/// operands in order: out[n * ldo + 16 v + i] = the saturated scale * sum, as block_product stores
/// scores, or += the sum with `accumulate`.
template <int NV, int NC>
HWY_INLINE void pair_block_product(DF df, const std::uint32_t* qp, std::int64_t ldq, const PairColumns (&parts)[2],
                                   std::int64_t n0, float* out, std::int64_t ldo, float scale, bool accumulate) {
  VF acc[NV][NC];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v)
#pragma GCC unroll 6
    for (int n = 0; n < NC; ++n) acc[v][n] = hn::Zero(df);
  for (const PairColumns& b : parts)
    if (b.pairs > 0) pair_part_dots<NV, NC>(qp, ldq, b, n0, acc);
  const VF vs = hn::Set(df, scale);
#pragma GCC unroll 6
  for (int n = 0; n < NC; ++n)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* o = out + n * ldo + 16 * v;
      hn::Store(accumulate ? hn::Add(hn::Load(df, o), acc[v][n]) : saturate_scores(df, hn::Mul(acc[v][n], vs)), df, o);
    }
}

/// pair_block_product over every row and column: the Rp rows (a multiple of 16) in blocks of 4
/// row vectors (then 2, then 1), the ncols columns in blocks of 6 (then 4, 2, 1); column n's
/// results at out + n * ldo.
HWY_INLINE void pair_panel(DF df, const std::uint32_t* qp, std::int64_t ldq, std::int64_t Rp,
                           const PairColumns (&parts)[2], std::int64_t ncols, float* out, std::int64_t ldo, float scale,
                           bool accumulate) {
  auto rows = [&](auto nv) {
    constexpr int NV = decltype(nv)::value;
    return [&](std::int64_t r) {
      std::int64_t n = 0;
      auto block = [&](auto nc) {
        constexpr int NC = decltype(nc)::value;
        pair_block_product<NV, NC>(df, qp + r, ldq, parts, n, out + n * ldo + r, ldo, scale, accumulate);
        n += NC;
      };
      while (n + 6 <= ncols) block(std::integral_constant<int, 6>());
      if (n + 4 <= ncols) block(std::integral_constant<int, 4>());
      if (n + 2 <= ncols) block(std::integral_constant<int, 2>());
      if (n < ncols) block(std::integral_constant<int, 1>());
    };
  };
  std::int64_t r = 0;
  for (; r + 64 <= Rp; r += 64) rows(std::integral_constant<int, 4>())(r);
  for (; r + 32 <= Rp; r += 32) rows(std::integral_constant<int, 2>())(r);
  for (; r < Rp; r += 16) rows(std::integral_constant<int, 1>())(r);
}

/// The scores of the item's Rp rows against one run of keys: token t's at st + t * ldo (rows in
/// order), key pairs then rope pairs.
HWY_INLINE void pair_run_scores(DF df, const Problem& p, const std::uint32_t* qp, std::int64_t Rp, const KvRun& run,
                                float* st, std::int64_t ldo) {
  const PairColumns parts[2] = {
      {static_cast<const char*>(run.key), run.key_stride * 2, 4, p.qk_dim / 2, 0},
      {static_cast<const char*>(run.key_rope), run.rope_stride * 2, 4, p.rope_dim / 2, p.qk_dim / 2}};
  pair_panel(df, qp, Rp, Rp, parts, run.count, st, ldo, p.scale, false);
}

/// The most bytes of K rows (key and rope parts) a block of 32 tokens may hold for amx_key_sums
/// to prefetch the next block while it sums one. In-process A/B (Emerald Rapids, AVX3, 2 threads,
/// 10 alternating pairs, twice): P3's blocks of 8 KiB took 0.94x the time with the prefetches
/// (faster in 10 of 10 both times); decode MLA's blocks of 36 KiB, D6, 1.08x (slower in 6 and 9
/// of 10): that many prefetches wait for line fill buffers.
inline constexpr std::int64_t kTilePrefetchBytes = 16384;

/// pair_run_scores on AMX tiles (amx_wide_keys, cpu/amx.hpp): the sums of the run's tokens taken
/// as whole tiles of 16 tokens x 16 rows, then scaled and saturated in place; the next block's
/// rows prefetched meanwhile where a block holds at most kTilePrefetchBytes (into the next run:
/// `ahead`).
HWY_INLINE void tile_run_scores(DF df, const Problem& p, const std::uint32_t* qp, std::int64_t Rp, const KvRun& run,
                                const RowsAhead& ahead, float* st, std::int64_t ldo) {
  const AmxKeyPart parts[2] = {
      {run.key, run.key_stride * 2, p.qk_dim / 2, 0, ahead.next[0].base, ahead.next[0].stride, ahead.next_count},
      {run.key_rope, run.rope_stride * 2, p.rope_dim / 2, p.qk_dim / 2, ahead.next[1].base, ahead.next[1].stride,
       ahead.next_count}};
  amx_key_sums(qp, Rp, Rp, parts, run.count, 32 * 2 * (p.qk_dim + p.rope_dim) <= kTilePrefetchBytes, st, ldo);
  const VF vs = hn::Set(df, p.scale);
  for (std::int64_t t = 0; t < run.count; ++t)
    for (std::int64_t r = 0; r < Rp; r += 16) {
      float* o = st + t * ldo + r;
      hn::Store(saturate_scores(df, hn::Mul(hn::Load(df, o), vs)), df, o);
    }
}

/// The item's bf16 query rows (rope parts after) as the dot products' pairs straight from their
/// stored words: qp[k * Rp + r] holds row r's pair of dims (2k, 2k + 1), the lower in the low half
/// (rope pairs from qk_dim / 2 on), rows R..Rp 0; the words gathered into `rows` (R x kw / 2)
/// first and transposed from there. False, as query_pairs, when a value would not give the fp32
/// results. Widening the rows to f32, transposing those and packing them again (transposed_query,
/// query_pairs) took 7 % of P3's time on AMX tiles (Emerald Rapids).
HWY_INLINE bool bf16_query_pairs(const Problem& p, const WorkItem& it, std::uint32_t* rows, std::uint32_t* qp,
                                 std::int64_t Rp) {
  const std::int64_t R = packed_rows(it), words = (p.qk_dim + p.rope_dim) / 2;
  __mmask32 bad = 0;
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t n = it.query_head(p.group, r), i = it.query_row(r);
    std::uint32_t* row = rows + r * words;
    auto stored = [&](const RowIndex& q) {
      return reinterpret_cast<const std::uint16_t*>(element_at(q.base, q.offset(it.b, n, i), 2));
    };
    bad |= copy_query_words(stored(p.query), p.qk_dim, row);
    if (p.rope_dim > 0) bad |= copy_query_words(stored(p.query_rope), p.rope_dim, row + p.qk_dim / 2);
  }
  if (bad != 0) return false;
  // Words moved as floats keep their bits: transpose_into only shuffles and copies them, and no
  // word here is a NaN as a float (a refused value, infinite or NaN, would be its high half).
  transpose_into(DF(), reinterpret_cast<const float*>(rows), words, R, words, reinterpret_cast<float*>(qp), Rp);
  if (R < Rp)
    for (std::int64_t k = 0; k < words; ++k) std::fill(qp + k * Rp + R, qp + (k + 1) * Rp, 0u);
  return true;
}

/// Phase A of a wide item over bf16 rows: wide_scores with Q·Kᵀ as bf16 dot products, or on AMX
/// tiles where the plan takes them (amx_wide_keys), reading the K rows where they are stored. The
/// query pairs (bf16_query_pairs) lie in the K tile buffer (tile.cols x kw floats; Rp x kw / 2
/// words). A query that the dot products would not give the fp32 results for (subnormal,
/// infinite, NaN, 2^64 or more) takes wide_scores.
template <class QSrc, class Src>
void wide_pair_scores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                      float* m) {
  const DF df;
  const std::int64_t Rp = padded_rows(it);
  auto* qp = reinterpret_cast<std::uint32_t*>(s.k);
  static_assert(std::is_same_v<QSrc, BF16Src>, "the dot products' query pairs are the stored bf16 words");
  if (Rp > 2 * tile.cols || !bf16_query_pairs(p, it, reinterpret_cast<std::uint32_t*>(s.q), qp, Rp))
    return wide_scores<QSrc, Src>(p, tile, it, s, sv, m);
  std::optional<AmxTileSession> tiles;  // configured once for the item's runs
  if (amx_wide_keys(p)) tiles.emplace();
  std::fill(m, m + Rp, kNegInf);
  hold_columns<Src>(p, it, s.kv, false);  // V for fp32 P·V (no store where P·V takes dot products or tiles)
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    for_each_run(p, it.b, it.h, c0, nc, KvParts::kKeys, [&](std::int64_t c, const KvRun& run) {
      if (amx_wide_keys(p)) {
        const RowsAhead ahead = rows_ahead(p, it, run, c0 + c, true);
        tile_run_scores(df, p, qp, Rp, run, ahead, st + c * sv.col_stride, sv.col_stride);
      } else {
        pair_run_scores(df, p, qp, Rp, run, st + c * sv.col_stride, sv.col_stride);
      }
    });
    finish_score_tile(df, p, it, sv, c0, nc, m);
  }
}

/// The word indices of vpermt2w that interleave two rows: index j < 32 reads a[j], j >= 32 reads
/// b[j - 32]; word 2i of the result is a[i] (the low half of pair i), word 2i + 1 is b[i]; `lo`
/// makes the pairs of elements 0-15, `hi` those of 16-31.
struct PairWordIndices {
  alignas(64) std::uint16_t lo[32];
  alignas(64) std::uint16_t hi[32];
};

constexpr PairWordIndices pair_word_indices() {
  PairWordIndices w{};
  for (int j = 0; j < 32; ++j) {
    w.lo[j] = static_cast<std::uint16_t>((j % 2) * 32 + j / 2);
    w.hi[j] = static_cast<std::uint16_t>((j % 2) * 32 + 16 + j / 2);
  }
  return w;
}

inline constexpr PairWordIndices kPairWordIndices = pair_word_indices();

/// out[d] = a[d] | b[d] << 16 for d < vd: the bf16 pairs of rows a and b (b null: 0 in the high
/// halves), in the order of d. The same 32 elements of rows pa and pb (null: none) are
/// prefetched into L2 with each 32 read, so that prefetches spread over the work. Returns true
/// when some value of a or b is not finite (all exponent bits set), found from the words in
/// registers: products_in_fp32 looks for those rows only where one is.
HWY_INLINE bool interleave_rows(const std::uint16_t* a, const std::uint16_t* b, std::int64_t vd, std::uint32_t* out,
                                const char* pa = nullptr, const char* pb = nullptr) {
  const __m512i lo = _mm512_load_si512(kPairWordIndices.lo), hi = _mm512_load_si512(kPairWordIndices.hi);
  const __m512i exponent = _mm512_set1_epi16(0x7F80);
  __mmask32 not_finite = 0;
  for (std::int64_t d = 0; d < vd; d += 32) {
    const std::int64_t n = std::min<std::int64_t>(32, vd - d);
    if (pa != nullptr) prefetch_row(pa + 2 * d, 2 * n);
    if (pb != nullptr) prefetch_row(pb + 2 * d, 2 * n);
    const __mmask32 words = n == 32 ? ~__mmask32{0} : (__mmask32{1} << n) - 1;
    const __m512i va = _mm512_maskz_loadu_epi16(words, a + d);
    const __m512i vb = b != nullptr ? _mm512_maskz_loadu_epi16(words, b + d) : _mm512_setzero_si512();
    not_finite |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(va, exponent), exponent) |
                  _mm512_cmpeq_epi16_mask(_mm512_and_si512(vb, exponent), exponent);
    const __mmask16 first = n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1);
    const __mmask16 second = n >= 32 ? 0xFFFF : n > 16 ? static_cast<__mmask16>((1u << (n - 16)) - 1) : 0;
    _mm512_mask_storeu_epi32(out + d, first, _mm512_permutex2var_epi16(va, lo, vb));
    if (second != 0) _mm512_mask_storeu_epi32(out + d + 16, second, _mm512_permutex2var_epi16(va, hi, vb));
  }
  return not_finite != 0;
}

/// Bytes of V rows ahead of interleave_values's reads that it prefetches (whole tokens, at least
/// two): without them D6 on AMX tiles took 1.15-1.17x the time (Emerald Rapids, 2 threads,
/// in-process A/B, 8 alternating pairs, twice).
inline constexpr std::int64_t kInterleaveAheadBytes = 8192;

/// The V rows of tile columns [c0, c0 + nc) as bf16 pairs of tokens: vi[k * v_dim + d] holds
/// column 2k's element d in its low half and column 2k + 1's in its high half (0 past nc).
/// `pending` (v_dim halves) keeps a pair's first row when its second lies in the next run. With
/// `prefetch` the rows kInterleaveAheadBytes on (into the item's next run) are prefetched meanwhile.
/// Returns true when some value of the tile's V rows is not finite (interleave_rows).
HWY_INLINE bool interleave_values(const Problem& p, const WorkItem& it, std::int64_t c0, std::int64_t nc,
                                  std::uint32_t* vi, std::uint16_t* pending, bool prefetch) {
  const std::int64_t vd = p.v_dim, ahead = std::max<std::int64_t>(2, kInterleaveAheadBytes / (2 * vd));
  bool not_finite = false;
  for_each_run(p, it.b, it.h, c0, nc, KvParts::kValues, [&](std::int64_t c, const KvRun& run) {
    auto row = [&](std::int64_t t) { return static_cast<const std::uint16_t*>(run.value) + t * run.value_stride; };
    const RowsAhead rows = prefetch ? rows_ahead(p, it, run, c0 + c, false) : RowsAhead{};
    std::int64_t t = 0;
    if (c % 2 == 1) not_finite |= interleave_rows(pending, row(t++), vd, vi + (c - 1) / 2 * vd);
    for (; t + 1 < run.count; t += 2)
      not_finite |= interleave_rows(row(t), row(t + 1), vd, vi + (c + t) / 2 * vd, rows.row(t + ahead, 0),
                                    rows.row(t + ahead + 1, 0));
    if (t == run.count) return;
    if (c + t + 1 == nc) {
      not_finite |= interleave_rows(row(t), nullptr, vd, vi + (c + t) / 2 * vd);
    } else {
      std::memcpy(pending, row(t), static_cast<std::size_t>(vd) * sizeof(std::uint16_t));
    }
  });
  return not_finite;
}

/// True when some P of a tile (nc columns at st, stride cs, Rp rows; P >= 0) lies in (0, floor):
/// with floor 2^-126, a subnormal P, which the dot products and the tiles read as 0.
HWY_INLINE bool some_p_below(const float* st, std::int64_t cs, std::int64_t nc, std::int64_t Rp, float floor) {
  const __m512 zero = _mm512_setzero_ps(), f = _mm512_set1_ps(floor);
  __mmask16 low = 0;
  for (std::int64_t c = 0; c < nc; ++c)
    for (std::int64_t r = 0; r < Rp; r += 16) {
      const __m512 x = _mm512_loadu_ps(st + c * cs + r);
      low |= _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ), x, f, _CMP_LT_OQ);
    }
  return low != 0;
}

/// Which bf16 halves of the words vp[0:vd) (an interleaved pair of V rows) hold a value that is
/// not finite somewhere: bit 0 the low halves, bit 1 the high ones.
HWY_INLINE unsigned non_finite_halves(const std::uint32_t* vp, std::int64_t vd) {
  const __m512i lo = _mm512_set1_epi32(0x7F80), hi = _mm512_set1_epi32(static_cast<int>(0x7F800000u));
  __mmask16 bad_lo = 0, bad_hi = 0;
  for (std::int64_t d = 0; d < vd; d += 16) {
    const auto words = static_cast<__mmask16>(vd - d >= 16 ? 0xFFFF : (1u << (vd - d)) - 1);
    const __m512i x = _mm512_maskz_loadu_epi32(words, vp + d);
    bad_lo |= _mm512_mask_cmpeq_epi32_mask(words, _mm512_and_si512(x, lo), lo);
    bad_hi |= _mm512_mask_cmpeq_epi32_mask(words, _mm512_and_si512(x, hi), hi);
  }
  return (bad_lo != 0 ? 1u : 0u) | (bad_hi != 0 ? 2u : 0u);
}

/// The accumulators of a wide item's P·V: row r's element d at at[r * row_step + d * dim_step]
/// (the item's acc_t, dims by rows: row_step 1, dim_step Rp; rows in order: row_step vd, dim_step 1).
struct Accumulators {
  float* at = nullptr;
  std::int64_t row_step = 0, dim_step = 0;
};

/// acc (r, d) += w[r] * V[d] in fp32 for the rows r whose weight w[r] passes `take`, V the bf16
/// half (`high` or low) of the words vp[0:vd) (an interleaved pair of V rows).
template <class Take>
HWY_INLINE void add_half_in_fp32(const float* w, std::int64_t Rp, const std::uint32_t* vp, bool high, std::int64_t vd,
                                 const Accumulators& acc, Take take) {
  for (std::int64_t r = 0; r < Rp; ++r) {
    if (!take(w[r])) continue;
    float* row = acc.at + r * acc.row_step;
    for (std::int64_t d = 0; d < vd; ++d) {
      const std::uint32_t bits = high ? vp[d] & 0xFFFF0000u : vp[d] << 16;
      float v;
      std::memcpy(&v, &bits, sizeof v);
      row[d * acc.dim_step] += w[r] * v;
    }
  }
}

/// What products_in_fp32 looks for in a tile, found by the passes that read its data anyway: a
/// V value that is not finite (interleave_values) and a P in (0, floor) (some_p_below, or
/// tile_pieces while it splits P).
struct TileExceptions {
  bool values_not_finite = false;
  bool p_below_floor = false;
};

/// The products a tile's dot products (or AMX tiles) must not take, in fp32 instead (P
/// column-major at st, stride cs; vi the interleaved V pairs; acc the item's accumulators):
///   - in a `checked` tile (a row may exclude a key of the tile: a band's edge, masks, pse), and in
///     every tile with `every_tile` (P in pieces, a piece of 0 times a V row that is not finite
///     giving NaN where P times it gives infinity): a V row that is not finite is added to the
///     rows that weight it (P != 0; every row in a tile that is not checked, as fp32 P·V does)
///     and zeroed in vi, so that the rows that exclude it never form 0 * inf or 0 * NaN, and
///     their bits do not depend on its values (25.1 #24);
///   - a P in (0, floor), which the instruction would read as 0 (floor 2^-126: a subnormal P)
///     or whose last piece could be subnormal: its product, for its row alone.
/// Each only where `found` says the tile has one. A row's products go one way or the other by its
/// own weights and the values of the keys it weights alone (as in pv_tile, whether a tile is
/// checked follows from the item's rows and columns, not from any data).
HWY_INLINE void products_in_fp32(const float* st, std::int64_t cs, std::int64_t nc, std::int64_t Rp, bool checked,
                                 bool every_tile, float floor, const TileExceptions& found, std::uint32_t* vi,
                                 std::int64_t vd, const Accumulators& acc) {
  if ((checked || every_tile) && found.values_not_finite)
    for (std::int64_t k = 0; 2 * k < nc; ++k) {
      std::uint32_t* vp = vi + k * vd;
      const unsigned bad = non_finite_halves(vp, vd);
      for (const bool high : {false, true}) {
        if ((bad & (high ? 2u : 1u)) == 0) continue;
        add_half_in_fp32(st + (2 * k + high) * cs, Rp, vp, high, vd, acc,
                         [checked](float w) { return !checked || w != 0.0f; });
        for (std::int64_t d = 0; d < vd; ++d) vp[d] &= high ? 0x0000FFFFu : 0xFFFF0000u;
      }
    }
  if (!found.p_below_floor) return;
  for (std::int64_t c = 0; c < nc; ++c)
    add_half_in_fp32(st + c * cs, Rp, vi + c / 2 * vd, c % 2 == 1, vd, acc,
                     [floor](float w) { return w != 0.0f && w < floor; });
}

/// Packs a P tile (bf16 values held as f32) into pairs of columns in place: column k becomes the
/// bf16 pairs (column 2k, column 2k + 1) of its rows, column 2k in the low half (0 past nc).
HWY_INLINE void pack_p_pairs(float* st, std::int64_t cs, std::int64_t nc, std::int64_t Rp) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (std::int64_t k = 0; 2 * k < nc; ++k)
    for (std::int64_t r = 0; r < Rp; r += 16) {
      const __m512i lo = _mm512_loadu_si512(st + 2 * k * cs + r);
      const __m512i hi = 2 * k + 1 < nc ? _mm512_loadu_si512(st + (2 * k + 1) * cs + r) : _mm512_setzero_si512();
      _mm512_storeu_si512(st + k * cs + r, _mm512_or_si512(_mm512_srli_epi32(lo, 16), _mm512_and_si512(hi, high)));
    }
}

/// Phase B of a wide item over bf16 V rows where P is E rounded to bf16 (bf16_value_dots): P·V as
/// bf16 dot products of token pairs, the P tile packed into pairs of columns in place and the V
/// rows interleaved into pairs (in the V tile buffer), tile by tile; the products the dot products
/// must not take (non-finite V rows in tiles where a row may exclude a key, subnormal P) are added
/// in fp32 first (products_in_fp32).
inline void wide_pair_accumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s,
                                 ScoreView sv, const RowStats& rs, float* l, float* acc) {
  const DF df;
  const std::int64_t Rp = padded_rows(it), vd = p.v_dim;
  auto* vi = reinterpret_cast<std::uint32_t*>(s.v);  // tile.cols / 2 pairs of vd, then one pending row
  auto* pending = reinterpret_cast<std::uint16_t*>(vi + (tile.cols + 1) / 2 * vd);
  std::fill(s.acc_t, s.acc_t + vd * Rp, 0.0f);
  std::fill(l, l + Rp, 0.0f);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0), cs = sv.col_stride;
    float* st = sv.base + (c0 - it.col_begin) * cs;
    exp_tile(df, p, st, cs, nc, Rp, rs.max, l);
    const TileExceptions found{interleave_values(p, it, c0, nc, vi, pending, false),
                               some_p_below(st, cs, nc, Rp, 0x1p-126f)};
    const bool checked = !tile_fully_visible(p, it, c0, nc) || p.has_pse;
    products_in_fp32(st, cs, nc, Rp, checked, false, 0x1p-126f, found, vi, vd, Accumulators{s.acc_t, 1, Rp});
    pack_p_pairs(st, cs, nc, Rp);
    const PairColumns parts[2] = {{reinterpret_cast<const char*>(vi), 4, 4 * vd, (nc + 1) / 2, 0}, {}};
    pair_panel(df, reinterpret_cast<const std::uint32_t*>(st), cs, Rp, parts, vd, s.acc_t, Rp, 1.0f, true);
  }
  finish_accumulators(df, p, it, s, rs.max, l, acc);
}

#endif  // FIA_BF16_DOTS

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_PREFILL_DOTS_INL_H_
