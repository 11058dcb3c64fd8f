// Narrow items (decode): phase A (Q·Kᵀ by cpu/decode_dots-inl.h's run_dots, the scale, mask and
// row max) and phase B (P and P·V) over K and V rows widened (or dequantized) in registers, as
// cpu/decode_rows-inl.h walks them. Included per Highway target by cpu/attention_item.cpp (the
// toggle guard below lets foreach_target re-include it once per target).
#if defined(FIA_CPU_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_DECODE_INL_H_
#undef FIA_CPU_DECODE_INL_H_
#else
#define FIA_CPU_DECODE_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- narrow items (decode): K and V read in place, widened in registers ---------------------

/// Multiplies the item's rows over tokens [j0, j0 + count) (element (r, c) at x[r * row_stride + c])
/// by the token scales of `q` (cpu/antiquant.hpp): the key scales into the scores, the value scales
/// into P. With kKeepZeros a zero stays zero whatever the scale slot holds (a masked key's slot may
/// hold NaN, 25.1 #24). Contiguous scales a vector at a time. No-op without token scales.
template <bool kKeepZeros>
HWY_INLINE void token_scale_rows(DF df, const Problem& p, const Antiquant& q, const WorkItem& it, std::int64_t j0,
                                 std::int64_t count, float* x, std::int64_t row_stride) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  for (std::int64_t r = 0; r < packed_rows(it); ++r) {
    const float* ts = nullptr;
    std::int64_t st = 0;
    if (!row_token_scales(p, q, it, r, j0, &ts, &st)) return;
    float* row = x + r * row_stride;
    std::int64_t c = 0;
    if (st == 1)
      for (; c + L <= count; c += L) {
        const VF v = hn::LoadU(df, row + c), y = hn::Mul(v, hn::LoadU(df, ts + c));
        hn::StoreU(kKeepZeros ? hn::IfThenZeroElse(hn::Eq(v, hn::Zero(df)), y) : y, df, row + c);
      }
    for (; c < count; ++c) row[c] = kKeepZeros && row[c] == 0.0f ? 0.0f : row[c] * ts[c * st];
  }
}

/// x[0:n) = saturate(x * scale) in place; returns the max.
HWY_INLINE float scale_row(DF df, float* x, std::int64_t n, float scale) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF vs = hn::Set(df, scale);
  VF vm = hn::Set(df, kNegInf);
  std::int64_t c = 0;
  for (; c + L <= n; c += L) {
    const VF v = saturate_scores(df, hn::Mul(hn::LoadU(df, x + c), vs));
    vm = hn::Max(vm, v);
    hn::StoreU(v, df, x + c);
  }
  float m = hn::GetLane(hn::MaxOfLanes(df, vm));
  for (; c < n; ++c) {
    x[c] = saturate(x[c] * scale);
    m = std::max(m, x[c]);
  }
  return m;
}

/// The query rows (with their rope parts) of the item's packed rows as floats, packed row r at
/// dst + r * (qk_dim + rope_dim), widened a vector at a time from the query dtype (QSrc).
template <class QSrc>
HWY_INLINE void widen_query_rows(const Problem& p, const WorkItem& it, float* dst) {
  using T = typename QSrc::T;
  const std::size_t es = sizeof(T);
  const std::int64_t kw = p.qk_dim + p.rope_dim;
  it.for_each_row(p.group, [&](std::int64_t r, std::int64_t n, std::int64_t i) {
    widen_row<QSrc>(reinterpret_cast<const T*>(element_at(p.query.base, p.query.offset(it.b, n, i), es)), p.qk_dim, dst + r * kw);
    if (p.rope_dim > 0)
      widen_row<QSrc>(reinterpret_cast<const T*>(element_at(p.query_rope.base, p.query_rope.offset(it.b, n, i), es)),
                      p.rope_dim, dst + r * kw + p.qk_dim);
  });
}

/// KV columns per tile of a narrow item: as many as keep the tile's P rows (all packed rows) within
/// 16 KiB, from 128 (the plan's tile) to 512. Each tile costs a fixed walk besides its products
/// (the runs located and started, the scale and max pass, the exponentials, the products' tails),
/// which a tile of few rows spreads over little work: 512 columns against 128 took D1-like
/// calls (4 rows, fp16, Zen 4) 0.93-0.95x the time with K and V in L3 on one thread on both
/// ISAs (faster in 3 of 3 alternating runs, in each of two sets; Problem::locate fell from 2.1
/// to 0.5 % of the samples), and cold on two threads AVX2 0.925x and 0.97x, AVX3 0.97x and
/// 0.97x (two sets, faster in 4 of 4 and 3 of 4 pairs). Items of 32 rows (BSH D1-like calls, 8
/// KV heads) keep 128: 512 was no faster there.
HWY_INLINE std::int64_t narrow_tile_columns(const TileShape& tile, const WorkItem& it) {
  constexpr std::int64_t kTilePBytes = 16384, kMostColumns = 512;
  const std::int64_t fit = kTilePBytes / (static_cast<std::int64_t>(sizeof(float)) * packed_rows(it));
  return std::clamp<std::int64_t>(fit / tile.cols * tile.cols, tile.cols, std::max(tile.cols, kMostColumns));
}

template <class QSrc, class Src>
void narrow_scores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                   float* m) {
  const DF df;
  const std::int64_t R = packed_rows(it), kw = p.qk_dim + p.rope_dim;
  widen_query_rows<QSrc>(p, it, s.q);
  // Antiquant K (cpu/antiquant.hpp): channel scales folded into Q, token scales into the scores.
  const bool antiquant = p.kv_format != KvFormat::kFloat;
  if (antiquant) fold_key_scale(p, it, s.q, kw);
#ifdef FIA_INT4_LANES
  if (int4_in_lane_order(p, true))
    for (std::int64_t r = 0; r < R; ++r) permute_lane_order<false>(s.q + r * kw, p.qk_dim);
#endif
  std::fill(m, m + R, kNegInf);
  const std::int64_t cols = narrow_tile_columns(tile, it);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += cols) {
    const std::int64_t nc = std::min(cols, it.col_end - c0);
    float* tile_scores = sv.base + (c0 - it.col_begin);
    for_each_run(p, it.b, it.h, c0, nc, KvParts::kKeys, [&](std::int64_t c, const KvRun& run) {
      const NextRows next = next_rows(p, it, run, c0 + c, true);
      for_each_block(p, it, run, next, true, rows_in_place<Src>(p, true),
                     [&](std::int64_t t, std::int64_t base_r, std::int64_t hk, const KvRun& sub, const Prefetch& prefetch,
                         const HeadSteps& heads) {
                       const std::int64_t h = it.h + hk;
                       for_each_row_block<Src>(p, sub, true, it.b, h, c0 + c + t, prefetch,
                                               [&](auto as, std::int64_t t0, const KvRun& rows, const Prefetch& block_pf) {
                         using Dot = typename decltype(as)::type;
                         for (std::int64_t g0 = 0; g0 < it.heads; g0 += 4) {
                           const float* q = s.q + (base_r + g0) * kw;
                           float* out = tile_scores + (base_r + g0) * sv.row_stride + c + t + t0;
                           const Prefetch pf = g0 == 0 ? block_pf : Prefetch{};
                           switch (std::min<std::int64_t>(4, it.heads - g0)) {
                             case 1: run_dots<Dot, 1>(df, p, q, kw, rows, out, sv.row_stride, pf, heads); break;
                             case 2: run_dots<Dot, 2>(df, p, q, kw, rows, out, sv.row_stride, pf, heads); break;
                             case 3: run_dots<Dot, 3>(df, p, q, kw, rows, out, sv.row_stride, pf, heads); break;
                             default: run_dots<Dot, 4>(df, p, q, kw, rows, out, sv.row_stride, pf, heads); break;
                           }
                         }
                       });
                     });
      if (antiquant) token_scale_rows<false>(df, p, p.key_antiquant, it, c0 + c, run.count, tile_scores + c, sv.row_stride);
    });
    const bool plain = tile_fully_visible(p, it, c0, nc) && !p.has_pse;
    for (std::int64_t r = 0; r < R; ++r) {
      const float tm = scale_row(df, tile_scores + r * sv.row_stride, nc, p.scale);
      if (plain) m[r] = std::max(m[r], tm);
    }
    if (plain) continue;
    apply_visibility(p, it, sv, c0, nc);
    for (std::int64_t r = 0; r < R; ++r) {
      const float* row = tile_scores + r * sv.row_stride;
      m[r] = std::max(m[r], *std::max_element(row, row + nc));
    }
  }
}

/// Bit c set when any of the ROWS rows of P (row r at pr + r * ps) has a nonzero (or NaN) weight
/// at column c, for the n <= 64 columns from pr on: whole vectors compared at once, the columns
/// past the last full vector one by one.
template <int ROWS>
HWY_INLINE std::uint64_t weighted_columns(DF df, const float* pr, std::int64_t ps, std::int64_t n) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF zero = hn::Zero(df);
  std::uint64_t bits = 0;
  std::int64_t c = 0;
  for (; c + L <= n; c += L) {
    auto any = hn::Ne(hn::LoadU(df, pr + c), zero);
    for (int r = 1; r < ROWS; ++r) any = hn::Or(any, hn::Ne(hn::LoadU(df, pr + r * ps + c), zero));
    std::uint8_t mask_bytes[8] = {};
    hn::StoreMaskBits(df, any, mask_bytes);
    std::uint64_t word = 0;
    std::memcpy(&word, mask_bytes, sizeof(word));
    bits |= word << c;
  }
  for (; c < n; ++c) {
    bool any = false;
    for (int r = 0; r < ROWS; ++r) any |= pr[r * ps + c] != 0.0f;
    bits |= std::uint64_t{any} << c;
  }
  return bits;
}

/// acc[r][d0 : d0 + NV*L) += sum over the run's tokens of p[r][t] * V[t][d0 : ...], for ROWS rows;
/// the accumulators stay in registers over the whole run. kDense: every token of the run is
/// weighted (no tests per token). Prefetches pf.at(t) as it reaches token t, and the lines of
/// `spread` over the tokens.
template <class Src, int ROWS, int NV, bool kDense = false>
HWY_INLINE void run_axpy(DF df, const KvRun& run, const float* pr, std::int64_t ps, std::int64_t d0, float* acc,
                         std::int64_t vd, const Prefetch& pf, SpreadLines spread = {}) {
  using T = typename Src::T;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const T* v = static_cast<const T*>(run.value);
#define FIA_ACC_LOAD(r, n) VF c##r##n = (ROWS > r && NV > n) ? hn::LoadU(df, acc + r * vd + d0 + n * L) : hn::Zero(df);
  FIA_ACC_LOAD(0, 0) FIA_ACC_LOAD(0, 1) FIA_ACC_LOAD(0, 2) FIA_ACC_LOAD(0, 3)
  FIA_ACC_LOAD(1, 0) FIA_ACC_LOAD(1, 1) FIA_ACC_LOAD(1, 2) FIA_ACC_LOAD(1, 3)
  FIA_ACC_LOAD(2, 0) FIA_ACC_LOAD(2, 1) FIA_ACC_LOAD(2, 2) FIA_ACC_LOAD(2, 3)
  FIA_ACC_LOAD(3, 0) FIA_ACC_LOAD(3, 1) FIA_ACC_LOAD(3, 2) FIA_ACC_LOAD(3, 3)
#undef FIA_ACC_LOAD
  std::uint64_t weighted = 0;  // of the 64 columns from t & ~63 on (weighted_columns)
  spread.over(run.count);
  for (std::int64_t t = 0; t < run.count; ++t) {
    const T* vt = v + t * run.value_stride;
    pf.at(t);
    spread.step();
    if constexpr (!kDense) {
      // The rows share one query row, so a key excluded for one is excluded for all (weight 0):
      // it is skipped, never multiplied by 0, whatever its V holds (25.1 #24).
      if ((t & 63) == 0) weighted = weighted_columns<ROWS>(df, pr + t, ps, std::min<std::int64_t>(64, run.count - t));
      if (((weighted >> (t & 63)) & 1) == 0) continue;
    }
    VF v0, v1, v2, v3;
    if constexpr (BlockPairSource<Src>) {
      static_assert(NV % 2 == 0, "pair sources load two vectors at a time");
      Src::load2(df, vt, d0, v0, v1);
      if constexpr (NV > 2) Src::load2(df, vt, d0 + 2 * L, v2, v3);
      else v2 = v3 = v0;
    } else {
      v0 = Src::load(df, vt, d0);
      v1 = NV > 1 ? Src::load(df, vt, d0 + L) : v0;
      v2 = NV > 2 ? Src::load(df, vt, d0 + 2 * L) : v0;
      v3 = NV > 3 ? Src::load(df, vt, d0 + 3 * L) : v0;
    }
#define FIA_ROW(r)                                        \
  if constexpr (ROWS > r)                                 \
    if (!Src::kSkipZeroWeights || pr[r * ps + t] != 0.0f) { \
    const VF w = hn::Set(df, pr[r * ps + t]);             \
    c##r##0 = hn::MulAdd(w, v0, c##r##0);                 \
    if constexpr (NV > 1) c##r##1 = hn::MulAdd(w, v1, c##r##1); \
    if constexpr (NV > 2) c##r##2 = hn::MulAdd(w, v2, c##r##2); \
    if constexpr (NV > 3) c##r##3 = hn::MulAdd(w, v3, c##r##3); \
  }
    FIA_ROW(0) FIA_ROW(1) FIA_ROW(2) FIA_ROW(3)
#undef FIA_ROW
  }
  spread.rest();
#define FIA_ACC_STORE(r, n) \
  if constexpr (ROWS > r && NV > n) hn::StoreU(c##r##n, df, acc + r * vd + d0 + n * L);
  FIA_ACC_STORE(0, 0) FIA_ACC_STORE(0, 1) FIA_ACC_STORE(0, 2) FIA_ACC_STORE(0, 3)
  FIA_ACC_STORE(1, 0) FIA_ACC_STORE(1, 1) FIA_ACC_STORE(1, 2) FIA_ACC_STORE(1, 3)
  FIA_ACC_STORE(2, 0) FIA_ACC_STORE(2, 1) FIA_ACC_STORE(2, 2) FIA_ACC_STORE(2, 3)
  FIA_ACC_STORE(3, 0) FIA_ACC_STORE(3, 1) FIA_ACC_STORE(3, 2) FIA_ACC_STORE(3, 3)
#undef FIA_ACC_STORE
}

/// Bytes from the start of a row of Src to its element d.
template <class Src>
constexpr std::int64_t column_bytes(std::int64_t d) {
  return d * static_cast<std::int64_t>(sizeof(typename Src::T)) / kElementsPerWord<Src>;
}

/// x rounded down to a multiple of a cache line (64 bytes).
constexpr std::int64_t line_start(std::int64_t x) { return x & ~std::int64_t{63}; }

/// acc[r][:] += p[r][t] * V[t][:] over one run, for up to 4 rows and each KV head of `hs` (the
/// run's V rows, the P rows pr, the accumulators acc and the prefetches stepping from head to
/// head, as in run_dots): vector blocks of up to kPvBlockVectors (one pass over the tokens each;
/// blocks of 3 first where kThreeVectors), then a scalar tail.
template <class Src, int ROWS>
void run_pv(DF df, const Problem& p, const KvRun& run, const float* pr_heads, std::int64_t ps, float* acc_heads,
            const Prefetch& pf, const HeadSteps& hs) {
  // With 16 registers, passes of 3 vectors first for float V (4 x 3 accumulators; a row of 128
  // goes 3, 3, 3, 3, 2, 2): each broadcast weight feeds 3 multiply-adds instead of 2. AVX2 (Zen 4):
  // D1 0.955x, D2 0.959x the time (faster in 8 of 10 alternating pairs each; an earlier set: D2
  // 0.917x and 0.976x), D4 (bf16, one row) 1.02x, within the noise. Not for int8 V converted in
  // registers (D3 1.04x, within the noise). The same accumulation order per element.
  constexpr bool kThreeVectors = kPvBlockVectors == 2 && FloatRowSource<Src>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), vd = p.v_dim;
  // Where a pass covers fewer than 64 floats (AVX2, NEON, SSE4), the run goes in blocks of
  // kPvBytes of V rows (kPvBytesManyRows for three or four rows), every pass over a block before
  // the next; elsewhere (AVX-512: two passes over a row of 128) in blocks of kPvWideBytes, 16 to
  // 32 tokens, which the second pass reads from L1 (fewer tokens of short rows ran slower: D5,
  // int4 rows of 64 bytes, 1.09x the time with 16 tokens against 32, faster in 1 of 8 pairs, and
  // 1.05x with 64 in 16 pairs; D6, MLA rows of 1 KiB, 1.014x with 4 tokens against 16). The
  // accumulation order stays the same. Not f32 rows dequantized into the per-thread buffer: they
  // are in L1 already.
  const std::int64_t row_bytes = column_bytes<Src>(vd);
  const bool short_passes = !wide_pv_passes();
  const bool blocked = !std::is_same_v<Src, DequantF32Src>;
  constexpr std::int64_t kShortPassBytes = ROWS >= 3 ? kPvBytesManyRows : kPvBytes;
  const std::int64_t block = !blocked      ? run.count
                             : short_passes ? std::max<std::int64_t>(1, kShortPassBytes / row_bytes)
                                            : std::clamp<std::int64_t>(kPvWideBytes / row_bytes, 16, 32);
  for (std::int64_t hk = 0; hk < hs.count; ++hk) {
    const auto* v = static_cast<const typename Src::T*>(run.value) + hk * run.value_head_stride;
    const float* pr = pr_heads + hk * hs.rows * ps;
    float* acc = acc_heads + hk * hs.rows * vd;
    const Prefetch ph = hs.for_head(pf, hk);
    std::int64_t d0 = 0;
    for (std::int64_t t0 = 0; t0 < run.count; t0 += block) {
      KvRun part = run;
      part.value = v + t0 * run.value_stride;
      part.count = std::min(block, run.count - t0);
      const float* pp = pr + t0;
      const Prefetch pt = ph.from(t0);
      // A block whose every token is weighted (no key masked: the common case) skips the per-token
      // tests. Where a pass covers 64 floats or more (AVX-512: two passes over a row of 128), each
      // pass prefetches its own share of the next rows token by token as it goes, the lines that
      // start within its columns (the first pass prefetching whole rows instead left the second
      // without: Zen 4, AVX3, cold, alternating pairs, D4 0.89x the time (8 of 8 faster), D2
      // 0.96x (5 of 8; a D2-like walk 0.97x, 6 of 6), D1 0.99x (6 of 8; a D1-like walk 5 of 5)).
      // With short passes (AVX2: six over a row of 128) each pass prefetches a share of whole rows
      // instead: all at once (32 lines for D2) they filled the miss buffers, and the spread took
      // 0.935x the time on D2 (Zen 4 capped at AVX2, faster in 16 of 20 alternating pairs; D1, D4
      // unchanged), where line shares token by token ran a D1-like walk 1.02x slower (0 of 5). A
      // pass's share of rows of floats goes out over its tokens rather than before it
      // (SpreadLines; Emerald Rapids, AVX2, cold: D1 0.967-0.98x, D2 0.962-0.974x the time, faster
      // in 11-18 of 16-20 alternating pairs; D4 0.985-1.004x; int8/int4 rows: row_prefetches).
      const bool dense = blocked && part.count <= 64 && !Src::kSkipZeroWeights &&
                         weighted_columns<ROWS>(df, pp, ps, part.count) == ~std::uint64_t{0} >> (64 - part.count);
      // Tokens prefetched: floor(part.count * e / vd) once a pass ends at column e (compared as
      // products: a 64-bit division per pass took ~6 % of this function's samples on AVX2).
      std::int64_t fetched = 0;
      d0 = 0;
      auto pass = [&](auto nv) {
        constexpr int NV = decltype(nv)::value;
        if (!short_passes) {
          const std::int64_t d1 = d0 + NV * L;  // the last vector pass takes the rest of the row
          const Prefetch share = pt.slice(line_start(column_bytes<Src>(d0)),
                                          vd - d1 < L ? pt.bytes : line_start(column_bytes<Src>(d1)));
          if (dense) run_axpy<Src, ROWS, NV, true>(df, part, pp, ps, d0, acc, vd, share);
          else run_axpy<Src, ROWS, NV>(df, part, pp, ps, d0, acc, vd, share);
        } else if (dense) {
          const std::int64_t from = fetched;
          for (const std::int64_t reach = part.count * (d0 + NV * L); (fetched + 1) * vd <= reach;) ++fetched;
          run_axpy<Src, ROWS, NV, true>(df, part, pp, ps, d0, acc, vd, Prefetch{},
                                        row_prefetches<Src>(pt, from, fetched - from));
        } else {
          run_axpy<Src, ROWS, NV>(df, part, pp, ps, d0, acc, vd, d0 == 0 ? pt : Prefetch{});
        }
        d0 += NV * L;
      };
      if constexpr (kThreeVectors)
        for (std::int64_t left = (vd - d0) / L; left >= 3 && left != 4; left = (vd - d0) / L)
          pass(std::integral_constant<int, 3>());
      while (d0 + kPvBlockVectors * L <= vd) pass(std::integral_constant<int, kPvBlockVectors>());
      if constexpr (BlockPairSource<Src>) {  // vd is a multiple of 2 vectors
        while (d0 + 2 * L <= vd) pass(std::integral_constant<int, 2>());
      } else {
        while (d0 + L <= vd) pass(std::integral_constant<int, 1>());
      }
      for (; dense && short_passes && fetched < part.count; ++fetched) pt.at(fetched);
    }
    for (std::int64_t d = d0; d < vd; ++d)
      for (std::int64_t t = 0; t < run.count; ++t)
        for (int r = 0; r < ROWS; ++r)
          if (pr[r * ps + t] != 0.0f) acc[r * vd + d] += pr[r * ps + t] * Src::one(v + t * run.value_stride, d);
  }
}

template <class Src>
void narrow_accumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                       const RowStats& rs, float* l, float* acc) {
  const DF df;
  const std::int64_t R = packed_rows(it), vd = p.v_dim;
  const float* m = rs.max;
  std::fill(acc, acc + R * vd, 0.0f);
  const bool formed = form_p_rows(df, p, it, sv, rs, l);  // 25.3 paths other than round(E)
  if (!formed) std::fill(l, l + R, 0.0f);
  // Antiquant V (cpu/antiquant.hpp): P times the token scales, the channel scales at the end.
  const bool antiquant = p.kv_format != KvFormat::kFloat;
  const std::int64_t cols = narrow_tile_columns(tile, it);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += cols) {
    const std::int64_t nc = std::min(cols, it.col_end - c0);
    float* tile_p = sv.base + (c0 - it.col_begin);
    for (std::int64_t r = 0; r < R && !formed; ++r) {
      float* row = tile_p + r * sv.row_stride;
      if (m[r] == kNegInf) std::fill(row, row + nc, 0.0f);
      else l[r] += exp_row(df, row, nc, m[r], p.p_rule.round_to);
    }
    for_each_run(p, it.b, it.h, c0, nc, KvParts::kValues, [&](std::int64_t c, const KvRun& run) {
      if (antiquant) token_scale_rows<true>(df, p, p.value_antiquant, it, c0 + c, run.count, tile_p + c, sv.row_stride);
      const NextRows next = next_rows(p, it, run, c0 + c, false);
      for_each_block(p, it, run, next, false, rows_in_place<Src>(p, false),
                     [&](std::int64_t t, std::int64_t base_r, std::int64_t hk, const KvRun& sub, const Prefetch& prefetch,
                         const HeadSteps& heads) {
                       const std::int64_t h = it.h + hk;
                       for_each_row_block<Src>(p, sub, false, it.b, h, c0 + c + t, prefetch,
                                               [&](auto as, std::int64_t t0, const KvRun& rows, const Prefetch& block_pf) {
                         using Dot = typename decltype(as)::type;
                         for (std::int64_t g0 = 0; g0 < it.heads; g0 += 4) {
                           const float* pr = tile_p + (base_r + g0) * sv.row_stride + c + t + t0;
                           float* a = acc + (base_r + g0) * vd;
                           const Prefetch pf = g0 == 0 ? block_pf : Prefetch{};
                           switch (std::min<std::int64_t>(4, it.heads - g0)) {
                             case 1: run_pv<Dot, 1>(df, p, rows, pr, sv.row_stride, a, pf, heads); break;
                             case 2: run_pv<Dot, 2>(df, p, rows, pr, sv.row_stride, a, pf, heads); break;
                             case 3: run_pv<Dot, 3>(df, p, rows, pr, sv.row_stride, a, pf, heads); break;
                             default: run_pv<Dot, 4>(df, p, rows, pr, sv.row_stride, a, pf, heads); break;
                           }
                         }
                       });
                     });
    });
  }
#ifdef FIA_INT4_LANES
  if (int4_in_lane_order(p, false))
    for (std::int64_t r = 0; r < R; ++r) permute_lane_order<true>(acc + r * vd, vd);
#endif
  if (antiquant) finish_values(p, it, acc);
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_DECODE_INL_H_
