// Wide items (prefill): K and V tiles widened (or dequantized) to f32 once per tile, products register-blocked over rows.
// Included per Highway target by cpu/attention_item.cpp (the toggle guard below lets foreach_target
// re-include it once per target).
#if defined(FIA_CPU_PREFILL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_PREFILL_INL_H_
#undef FIA_CPU_PREFILL_INL_H_
#else
#define FIA_CPU_PREFILL_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- wide items (prefill): f32 tiles, products register-blocked over rows ------------------

/// widen_row of `count` stored rows (`stride` elements apart) into rows of dst (`ld` floats
/// apart), tiled as in the NZ cache (FIA-SPEC 9.1): piece by piece, each piece across the tokens,
/// since a piece of consecutive tokens is contiguous in the cache.
template <class Src>
HWY_INLINE void widen_tiled_rows(const typename Src::T* rows, std::int64_t stride, RowTiling tiling, std::int64_t count,
                                 std::int64_t n, float* dst, std::int64_t ld) {
  for (std::int64_t d = 0; d < n; d += tiling.width) {
    const typename Src::T* piece = rows + (d / tiling.width) * tiling.stride;
    const bool more = d + tiling.width < n;  // prefetch the next piece (its own page in a 4 KB block)
    for (std::int64_t t = 0; t < count; ++t) {
      if (more) __builtin_prefetch(piece + tiling.stride + t * stride, 0, 2);
      widen_row<Src>(piece + t * stride, std::min(tiling.width, n - d), dst + t * ld + d);
    }
  }
}

/// Widens tokens [j0, j0 + count) of key (with rope) or value rows into a c-major f32 tile,
/// dequantizing int8/int4 rows exactly (x + offset) * scale once per tile (FIA-SPEC 12.1). NZ
/// rows are widened piece by piece where they are stored.
template <class Src>
void widen_tile(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, bool keys, float* dst) {
  using T = typename Src::T;
  const std::int64_t kw = p.qk_dim + p.rope_dim, width = keys ? kw : v_tile_stride(p.v_dim);
  const bool antiquant = p.kv_format != KvFormat::kFloat;
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(p.kv_dtype));
  const std::int64_t row_bytes = kv_row_bytes(p, keys ? p.qk_dim : p.v_dim);
  const KvParts parts = keys ? KvParts::kKeys : KvParts::kValues;
  for_each_run<false>(p, it.b, it.h, j0, count, parts, [&](std::int64_t c, const KvRun& run) {
    if (run.tiled()) {  // NZ (key_rope and V tiled with K): piece by piece across the run's tokens
      float* rows = dst + c * width;
      if (keys) {
        widen_tiled_rows<Src>(static_cast<const T*>(run.key), run.key_stride, run.key_tiling, run.count, p.qk_dim, rows,
                              width);
        if (p.rope_dim > 0)
          widen_tiled_rows<Src>(static_cast<const T*>(run.key_rope), run.rope_stride, run.rope_tiling, run.count,
                                p.rope_dim, rows + p.qk_dim, width);
      } else {
        widen_tiled_rows<Src>(static_cast<const T*>(run.value), run.value_stride, run.value_tiling, run.count, p.v_dim,
                              rows, width);
      }
    } else {
      // Cold caches (speculative decode reads every KV row once): the rows kPrefetchTokens ahead.
      const auto* ahead = static_cast<const char*>(keys ? run.key : run.value);
      const std::int64_t stride = (keys ? run.key_stride : run.value_stride) * es;
      for (std::int64_t t = 0; t < run.count; ++t) {
        if (t + kPrefetchTokens < run.count) prefetch_row(ahead + (t + kPrefetchTokens) * stride, row_bytes);
        float* row = dst + (c + t) * width;
        if (keys) {
          widen_row<Src>(static_cast<const T*>(run.key) + t * run.key_stride, p.qk_dim, row);
          if (p.rope_dim > 0)
            widen_row<Src>(static_cast<const T*>(run.key_rope) + t * run.rope_stride, p.rope_dim, row + p.qk_dim);
        } else {
          widen_row<Src>(static_cast<const T*>(run.value) + t * run.value_stride, p.v_dim, row);
        }
      }
    }
    if (!antiquant) return;
    const std::int64_t dim = keys ? p.qk_dim : p.v_dim;
    const RunFactors f(p, keys ? p.key_antiquant : p.value_antiquant, dim, it.b, it.h, j0 + c);
    for (std::int64_t t = 0; t < run.count; ++t) dequant_row(dst + (c + t) * width, dim, f.cs, f.co, f.scale(t), f.offset(t));
  });
}

/// Makes the worker's WidenedKv hold as many of the item's columns as fit, from the first on: it
/// keeps what it holds when the item's columns continue it (the next row block of a head, or
/// causal rows that see more keys) and starts over at the item's first column otherwise. V always;
/// K too when the item that started it asked for `keys` (false: Q·Kᵀ reads K in place,
/// wide_pair_scores; an item that asks for K from a store without it widens its K tiles itself).
template <class Src>
void hold_columns(const Problem& p, const WorkItem& it, WidenedKv* kv, bool keys) {
  if (kv == nullptr) return;
  if (!(kv->b == it.b && kv->h == it.h && kv->begin <= it.col_begin && it.col_begin <= kv->end)) {
    kv->b = it.b;
    kv->h = it.h;
    kv->keys = keys;
    kv->begin = kv->end = it.col_begin;
  }
  const std::int64_t end = std::min(it.col_end, kv->begin + kv->capacity);
  if (end <= kv->end) return;
  const std::int64_t held = kv->end - kv->begin;
  if (kv->keys) widen_tile<Src>(p, it, kv->end, end - kv->end, true, kv->k + held * (p.qk_dim + p.rope_dim));
  widen_tile<Src>(p, it, kv->end, end - kv->end, false, kv->v + held * v_tile_stride(p.v_dim));
  kv->end = end;
}

/// The f32 K (keys) or V tile of columns [c0, c0 + nc) of item it: in the worker's WidenedKv when
/// it holds them, else widened into `tile`.
template <class Src>
HWY_INLINE float* kv_tile(const Problem& p, const WorkItem& it, const WidenedKv* kv, std::int64_t c0, std::int64_t nc,
                          bool keys, float* tile) {
  if (kv != nullptr && kv->holds(it.b, it.h, c0, c0 + nc) && (kv->keys || !keys)) {
    const std::int64_t width = keys ? p.qk_dim + p.rope_dim : v_tile_stride(p.v_dim);
    return (keys ? kv->k : kv->v) + (c0 - kv->begin) * width;
  }
  widen_tile<Src>(p, it, c0, nc, keys, tile);
  return tile;
}

/// out[c][r-block] = scale * sum_x a[x][r-block] * b(c, x) for NV row vectors and NC columns,
/// b(c, x) = b[c * bc + x * bx]; `a` rows have stride lda, `out` rows stride ldo. With
/// `accumulate` the sum is added to out instead (scale unused). Scaled results saturate (see
/// saturate()); with row_max (not accumulating) row_max[r] becomes the max of itself and the
/// block's results of row r. NC <= 6, or <= 12 for one row vector: an FMA's latency (4 cycles, 2
/// per cycle) needs 8 independent accumulators to keep both FMA ports busy.
template <int NV, int NC>
HWY_INLINE void block_product(DF df, const float* a, std::int64_t lda, const float* b, std::int64_t bc, std::int64_t bx,
                              std::int64_t depth, float* out, std::int64_t ldo, float scale, bool accumulate,
                              float* row_max) {
  static_assert(NC <= 6 || (NV == 1 && NC <= 12), "accumulators beyond the register file");
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
#define FIA_ZERO6(v, k0, k1, k2, k3, k4, k5)                                                                    \
  VF c##v##k0 = hn::Zero(df), c##v##k1 = hn::Zero(df), c##v##k2 = hn::Zero(df), c##v##k3 = hn::Zero(df), \
     c##v##k4 = hn::Zero(df), c##v##k5 = hn::Zero(df);
#define FIA_ZERO12(v) FIA_ZERO6(v, 0, 1, 2, 3, 4, 5) FIA_ZERO6(v, 6, 7, 8, 9, 10, 11)
  FIA_ZERO12(0) FIA_ZERO12(1) FIA_ZERO12(2) FIA_ZERO12(3)
#undef FIA_ZERO12
#undef FIA_ZERO6
  // Column n at bn[(n % 3) * bc], bn the pointer to column 0, 3, 6 or 9: four pointers and bc
  // stay in general registers whatever bc is, where twelve column offsets would spill.
  const float* b0 = b;
  const float* b3 = b + 3 * bc;
  const float* b6 = b + 6 * bc;
  const float* b9 = b + 9 * bc;
  for (std::int64_t x = 0; x < depth; ++x) {
    const float* ax = a + x * lda;
    const VF a0 = hn::Load(df, ax);
    const VF a1 = NV > 1 ? hn::Load(df, ax + L) : a0;
    const VF a2 = NV > 2 ? hn::Load(df, ax + 2 * L) : a0;
    const VF a3 = NV > 3 ? hn::Load(df, ax + 3 * L) : a0;
    const std::int64_t o = x * bx;
#define FIA_COLUMN(n)                                                   \
  if constexpr (NC > n) {                                               \
    const float* bn = n < 3 ? b0 : n < 6 ? b3 : n < 9 ? b6 : b9;        \
    const VF bv = hn::Set(df, bn[o + (n % 3) * bc]);                    \
    c0##n = hn::MulAdd(a0, bv, c0##n);                                  \
    if constexpr (NV > 1) c1##n = hn::MulAdd(a1, bv, c1##n);            \
    if constexpr (NV > 2) c2##n = hn::MulAdd(a2, bv, c2##n);            \
    if constexpr (NV > 3) c3##n = hn::MulAdd(a3, bv, c3##n);            \
  }
    FIA_COLUMN(0) FIA_COLUMN(1) FIA_COLUMN(2) FIA_COLUMN(3) FIA_COLUMN(4) FIA_COLUMN(5)
    FIA_COLUMN(6) FIA_COLUMN(7) FIA_COLUMN(8) FIA_COLUMN(9) FIA_COLUMN(10) FIA_COLUMN(11)
#undef FIA_COLUMN
  }
  const VF vs = hn::Set(df, scale);
  const bool fold_max = row_max != nullptr && !accumulate;
  VF m0 = fold_max ? hn::Load(df, row_max) : hn::Zero(df);
  VF m1 = NV > 1 && fold_max ? hn::Load(df, row_max + L) : m0;
  VF m2 = NV > 2 && fold_max ? hn::Load(df, row_max + 2 * L) : m0;
  VF m3 = NV > 3 && fold_max ? hn::Load(df, row_max + 3 * L) : m0;
  auto put = [&](VF v, float* o, VF& m) {
    if (accumulate) return hn::Store(hn::Add(hn::Load(df, o), v), df, o);
    const VF x = saturate_scores(df, hn::Mul(v, vs));
    hn::Store(x, df, o);
    if (fold_max) m = hn::Max(m, x);
  };
#define FIA_STORE(n)                                  \
  if constexpr (NC > n) {                             \
    float* o = out + n * ldo;                         \
    put(c0##n, o, m0);                                \
    if constexpr (NV > 1) put(c1##n, o + L, m1);      \
    if constexpr (NV > 2) put(c2##n, o + 2 * L, m2);  \
    if constexpr (NV > 3) put(c3##n, o + 3 * L, m3);  \
  }
  FIA_STORE(0) FIA_STORE(1) FIA_STORE(2) FIA_STORE(3) FIA_STORE(4) FIA_STORE(5)
  FIA_STORE(6) FIA_STORE(7) FIA_STORE(8) FIA_STORE(9) FIA_STORE(10) FIA_STORE(11)
#undef FIA_STORE
  if (!fold_max) return;
  hn::Store(m0, df, row_max);
  if constexpr (NV > 1) hn::Store(m1, df, row_max + L);
  if constexpr (NV > 2) hn::Store(m2, df, row_max + 2 * L);
  if constexpr (NV > 3) hn::Store(m3, df, row_max + 3 * L);
}

/// All columns of one row block of NV vectors: blocks of 6 columns (12, then 8, for a single row
/// vector), then at most one block each of 4, 2 and 1, so that a tile of 128 columns or a head dim
/// of 64, 128 or 512 never ends in single columns, whose one accumulator per row vector leaves the
/// FMAs waiting on their latency.
template <int NV>
HWY_INLINE void row_block_product(DF df, const float* a, std::int64_t lda, const float* b, std::int64_t bc, std::int64_t bx,
                                  std::int64_t ncols, std::int64_t depth, float* out, std::int64_t ldo, float scale,
                                  bool accumulate, float* row_max) {
  std::int64_t c = 0;
  auto block = [&](auto nc) {
    block_product<NV, decltype(nc)::value>(df, a, lda, b + c * bc, bc, bx, depth, out + c * ldo, ldo, scale, accumulate,
                                           row_max);
    c += decltype(nc)::value;
  };
  if constexpr (NV == 1) {
    while (c + 12 <= ncols) block(std::integral_constant<int, 12>());
    if (c + 8 <= ncols) block(std::integral_constant<int, 8>());
  }
  while (c + 6 <= ncols) block(std::integral_constant<int, 6>());
  if (c + 4 <= ncols) block(std::integral_constant<int, 4>());
  if (c + 2 <= ncols) block(std::integral_constant<int, 2>());
  if (c < ncols) block(std::integral_constant<int, 1>());
}

/// out[c][0:Rp) (stride ldo) = scale * sum_x a[x][0:Rp) * b(c, x) for c < ncols, or += when
/// accumulating; b(c, x) = b[c * bc + x * bx]. Rp is a multiple of the lane count. With row_max
/// (scores, not accumulating) row_max[r] becomes the max of itself and row r's results, folded in
/// as they are stored. Row blocks of 4 vectors where the target has 32 vector registers (AVX-512,
/// NEON, SVE: 24 accumulators, 4 row vectors and a column), else 2 (AVX2: 12 + 2 + 1 of 16).
HWY_INLINE void panel_product(DF df, const float* a, std::int64_t lda, std::int64_t Rp, const float* b, std::int64_t bc,
                              std::int64_t bx, std::int64_t ncols, std::int64_t depth, float* out, std::int64_t ldo,
                              float scale, bool accumulate, float* row_max = nullptr) {
  constexpr int kRowVectors = kVectorRegisters >= 32 ? 4 : 2;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  auto rows_at = [&](std::int64_t r) { return row_max != nullptr ? row_max + r : nullptr; };
  std::int64_t r = 0;
  for (; r + kRowVectors * L <= Rp; r += kRowVectors * L)
    row_block_product<kRowVectors>(df, a + r, lda, b, bc, bx, ncols, depth, out + r, ldo, scale, accumulate,
                                   rows_at(r));
  for (; r + 2 * L <= Rp; r += 2 * L)
    row_block_product<2>(df, a + r, lda, b, bc, bx, ncols, depth, out + r, ldo, scale, accumulate, rows_at(r));
  for (; r < Rp; r += L)
    row_block_product<1>(df, a + r, lda, b, bc, bx, ncols, depth, out + r, ldo, scale, accumulate, rows_at(r));
}

/// True when band_wide's float arithmetic is exact for batch it.b: indices below 2^23, band
/// offsets either that small or so large (>= 2^40) that they never bind.
HWY_INLINE bool band_fits_float(const Problem& p, const WorkItem& it, std::int64_t col_end) {
  constexpr std::int64_t kSmall = std::int64_t{1} << 23, kHuge = std::int64_t{1} << 40;
  auto ok = [&](std::int64_t off) { return (off > -kSmall && off < kSmall) || off <= -kHuge || off >= kHuge; };
  return col_end < kSmall && it.row_end < kSmall && ok(p.band_lo[it.b]) && ok(p.band_hi[it.b]);
}

/// The band of a wide tile without mask or pse (the causal diagonal, sparse modes 2-4, pre/next
/// tokens), 16 rows at a time: S = -inf where column j is outside [i + lo, i + hi] of row i.
/// Row indices and columns are exact in float below 2^24; the band offsets may be far larger.
HWY_INLINE void band_wide(DF df, const Problem& p, const WorkItem& it, std::int64_t c0, std::int64_t nc, float* st,
                          std::int64_t ld, std::int64_t Rp) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), R = packed_rows(it);
  const VF neg_inf = hn::Set(df, kNegInf);
  auto as_float = [](std::int64_t off) {  // offsets beyond 2^40 act as infinite (band_fits_float)
    return static_cast<float>(std::clamp<std::int64_t>(off, -(std::int64_t{1} << 40), std::int64_t{1} << 40));
  };
  const float lo_off = as_float(p.band_lo[it.b]), hi_off = as_float(p.band_hi[it.b]);
  HWY_ALIGN float rows[HWY_MAX_BYTES / sizeof(float)];
  for (std::int64_t r0 = 0; r0 < Rp && r0 < R; r0 += L) {
    for (std::int64_t k = 0; k < L; ++k) rows[k] = static_cast<float>(it.query_row(std::min(r0 + k, R - 1)));
    const VF i = hn::Load(df, rows);
    const VF lo = hn::Add(i, hn::Set(df, lo_off)), hi = hn::Add(i, hn::Set(df, hi_off));
    for (std::int64_t c = 0; c < nc; ++c) {
      const VF j = hn::Set(df, static_cast<float>(c0 + c));
      float* x = st + c * ld + r0;
      const auto outside = hn::Or(hn::Lt(j, lo), hn::Gt(j, hi));
      hn::Store(hn::IfThenElse(outside, neg_inf, hn::Load(df, x)), df, x);
    }
  }
}

/// True when finish_score_tile would change none of the scores of columns [c0, c0 + nc) (every key
/// visible to every row, no pse): the fp32 products then fold each row's max in as they store the
/// scores (panel_product's row_max), and the tile takes no pass of its own. In-process A/B
/// (Emerald Rapids, 2 threads, 10 alternating pairs): P2 0.973x the time on AVX3 (faster in 10 of
/// 10) and 0.986x on AVX2 (10 of 10), P1 0.961x (9 of 10) and 0.993x (7 of 10). The same fold in
/// tile_run_scores's scaling pass (AMX) moved P3 and D6 by less than 1 %, and was left out.
HWY_INLINE bool scores_final_as_stored(const Problem& p, const WorkItem& it, std::int64_t c0, std::int64_t nc) {
  return !p.has_pse && tile_fully_visible(p, it, c0, nc);
}

/// After the products of a wide tile (columns [c0, c0 + nc), column-major scores): -inf where a
/// key is not visible (the band 16 rows at a time, or per element with masks and pse), and the
/// running row max m over the tile.
HWY_INLINE void finish_score_tile(DF df, const Problem& p, const WorkItem& it, ScoreView sv, std::int64_t c0,
                                  std::int64_t nc, float* m) {
  const std::int64_t Rp = padded_rows(it), L = static_cast<std::int64_t>(hn::Lanes(df));
  float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
  if (!p.has_mask && !p.has_pse && band_fits_float(p, it, c0 + nc)) {
    if (!tile_fully_visible(p, it, c0, nc)) band_wide(df, p, it, c0, nc, st, sv.col_stride, Rp);
  } else {
    apply_visibility(p, it, sv, c0, nc);
  }
  const std::int64_t cs = sv.col_stride;
  for (std::int64_t r = 0; r < Rp; r += L) {
    VF m0 = hn::Load(df, m + r), m1 = m0, m2 = m0, m3 = m0;  // four chains: Max waits on its latency
    std::int64_t c = 0;
    for (; c + 4 <= nc; c += 4) {
      m0 = hn::Max(m0, hn::Load(df, st + c * cs + r));
      m1 = hn::Max(m1, hn::Load(df, st + (c + 1) * cs + r));
      m2 = hn::Max(m2, hn::Load(df, st + (c + 2) * cs + r));
      m3 = hn::Max(m3, hn::Load(df, st + (c + 3) * cs + r));
    }
    for (; c < nc; ++c) m0 = hn::Max(m0, hn::Load(df, st + c * cs + r));
    hn::Store(hn::Max(hn::Max(m0, m1), hn::Max(m2, m3)), df, m + r);
  }
}

/// The P cast of a wide tile of nc columns (column-major at st, stride cs, Rp rows) in place:
/// E = exp(S - m), l += E (column by column), P = round(E). Rows with m = -inf give 0 (NaN
/// filtered by softmax_exp).
HWY_INLINE void exp_tile(DF df, const Problem& p, float* st, std::int64_t cs, std::int64_t nc, std::int64_t Rp,
                         const float* m, float* l) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const DType t = p.p_rule.round_to;
  for (std::int64_t r = 0; r < Rp; r += L) {
    const VF vm = hn::Load(df, m + r);
    VF vl = hn::Load(df, l + r);
    std::int64_t c = 0;
#if !HWY_HAVE_SCALABLE
    for (; c + kExpVectors <= nc; c += kExpVectors) vl = p_cast_vectors(df, st + c * cs + r, cs, vm, vl, t);
#endif
    for (; c < nc; ++c) vl = p_cast_vector(df, st + c * cs + r, vm, vl, t);
    hn::Store(vl, df, l + r);
  }
}

/// The item's query rows transposed into s.q: q[x * Rp + r], the padding rows 0. Rows are widened
/// with SIMD into the K tile buffer first when they fit there. Both ways write every row below R,
/// so only the padding rows are zeroed (zeroing the whole block first, which is out of cache by
/// then, took ~3.6 % of P2's kernel samples on AVX2).
template <class QSrc>
HWY_INLINE void transposed_query(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s) {
  const std::int64_t R = packed_rows(it), Rp = padded_rows(it), kw = p.qk_dim + p.rope_dim;
  if (R < Rp)
    for (std::int64_t x = 0; x < kw; ++x) std::fill(s.q + x * Rp + R, s.q + (x + 1) * Rp, 0.0f);
  if (R <= tile.cols) {
    widen_query_rows<QSrc>(p, it, s.k);
    transpose_into(DF(), s.k, kw, R, kw, s.q, Rp);
  } else {
    for (std::int64_t r = 0; r < R; ++r) load_query_row(p, it, r, s.q + r, Rp);
  }
}

template <class QSrc, class Src>
void wide_scores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                 float* m) {
  const DF df;
  const std::int64_t Rp = padded_rows(it), kw = p.qk_dim + p.rope_dim;
  transposed_query<QSrc>(p, tile, it, s);
  std::fill(m, m + Rp, kNegInf);
  hold_columns<Src>(p, it, s.kv, true);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    const float* kt = kv_tile<Src>(p, it, s.kv, c0, nc, true, s.k);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    const bool as_stored = scores_final_as_stored(p, it, c0, nc);
    panel_product(df, s.q, Rp, Rp, kt, kw, 1, nc, kw, st, sv.col_stride, p.scale, false, as_stored ? m : nullptr);
    if (!as_stored) finish_score_tile(df, p, it, sv, c0, nc, m);
  }
}

/// P·V of one tile of a wide item in fp32: acc_t[d][r] += sum_c P[c][r] * V[c][d] over the nc
/// columns from c0 (P column-major at st, stride cs), V widened (or held) as f32.
template <class Src>
HWY_INLINE void pv_tile(DF df, const Problem& p, const WorkItem& it, const ItemScratch& s, const float* st,
                        std::int64_t cs, std::int64_t c0, std::int64_t nc) {
  const std::int64_t Rp = padded_rows(it), vd = p.v_dim, ldv = v_tile_stride(vd);
  float* vt = kv_tile<Src>(p, it, s.kv, c0, nc, false, s.v);
  bool isolated = false;
  if (!tile_fully_visible(p, it, c0, nc) || p.has_pse)  // else no row excludes a key of the tile
    isolated = isolate_non_finite_values(df, st, cs, Rp, vt, ldv, nc, vd, s.acc_t);
  panel_product(df, st, cs, Rp, vt, 1, ldv, vd, nc, s.acc_t, Rp, 1.0f, true);
  if (isolated && vt != s.v) widen_tile<Src>(p, it, c0, nc, false, vt);  // the held values back for the next items
}

/// The end of a wide item's phase B: l = 0 for rows that see no key, and the accumulators
/// transposed back into acc (R rows of v_dim).
HWY_INLINE void finish_accumulators(DF df, const Problem& p, const WorkItem& it, const ItemScratch& s, const float* m,
                                    float* l, float* acc) {
  const std::int64_t R = packed_rows(it), Rp = padded_rows(it);
  for (std::int64_t r = 0; r < R; ++r)
    if (m[r] == kNegInf) l[r] = 0.0f;
  transpose_into(df, s.acc_t, Rp, p.v_dim, R, acc, p.v_dim);
}

template <class Src>
void wide_accumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                     const RowStats& rs, float* l, float* acc) {
  const DF df;
  const std::int64_t Rp = padded_rows(it);
  std::fill(s.acc_t, s.acc_t + p.v_dim * Rp, 0.0f);
  const bool formed = form_p_columns(df, p, it, sv, rs, l);  // 25.3 paths other than round(E)
  if (!formed) std::fill(l, l + Rp, 0.0f);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    if (!formed) exp_tile(df, p, st, sv.col_stride, nc, Rp, rs.max, l);
    pv_tile<Src>(df, p, it, s, st, sv.col_stride, c0, nc);
  }
  finish_accumulators(df, p, it, s, rs.max, l, acc);
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_PREFILL_INL_H_
