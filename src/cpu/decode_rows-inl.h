// How the narrow (decode) kernels walk K and V rows: prefetching them ahead into L2, block by
// block when an item spans several KV heads, and in the element source each block is read with
// (in place, int4 in lane order, or unpacked / dequantized into a per-thread buffer). Included per
// Highway target by cpu/attention_item.cpp (the toggle guard below lets foreach_target re-include
// it once per target).
#if defined(FIA_CPU_DECODE_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_DECODE_ROWS_INL_H_
#undef FIA_CPU_DECODE_ROWS_INL_H_
#else
#define FIA_CPU_DECODE_ROWS_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// How far ahead decode kernels prefetch K and V rows (into L2): strided rows by tokens,
/// contiguous rows by bytes (measured on Zen 4: 4 KiB ahead made cold D1 and D4 ~10 % faster than
/// the hardware prefetcher alone, 8 KiB was slower again). Items of one or two query rows (MHA
/// decode) compute a quarter as much per row as GQA's four, so the same bytes ahead are less time
/// ahead: 6 KiB made cold D4 (one row, bf16) 0.909x, 0.931x and 0.897x the time on Zen 4 (AVX2,
/// AVX3, AVX2: faster in 10 of 10, 9 of 10 and 6 of 8 alternating pairs), where D1 (four rows)
/// gained nothing certain (0.947x on AVX3, 1.01x and 1.22x on AVX2). P·V computes less per row
/// than Q·Kᵀ and waits on memory more, so V rows go 6 KiB ahead for every item: a cold D1-like
/// walk (Zen 4, 2 threads, K and V 8x over) took about 0.95x the time on AVX3 (faster in 6 of 8
/// alternating pairs, and 6 of 6 in an earlier set) and about 0.97x on AVX2 (5 of 8, 3 of 3),
/// where K rows 3, 5 or 6 KiB ahead instead of 4 moved nothing beyond the noise.
constexpr std::int64_t kPrefetchTokens = 8;
constexpr std::int64_t kPrefetchBytes = 4096;
constexpr std::int64_t kPrefetchBytesFar = 6144;

/// Tokens per block of K rows when an item spans several KV heads: each block's token rows are
/// read for all heads before the next block, and the next block is prefetched meanwhile. Small
/// blocks keep the rows of one head (2 KiB apart in a (block, block_size, H) cache, so in few L1
/// sets) from evicting each other: 8 tokens ran D2 ~1.5x faster than 32.
constexpr std::int64_t kTokenBlock = 8;

/// Tokens per block of V rows in the same walk. P·V loads and stores each head's accumulators
/// (4 rows x 128 floats on AVX-512: every register) once per block, and 8 tokens made that a
/// quarter as many memory operations as multiply-adds. 16 against 8 (Zen 4, D2-like calls: 16
/// sequences of 2048 tokens, paged BSH, block 128, shuffled): 0.91x (AVX3) and 0.94x (AVX2) the
/// time with K and V in L3 on one thread; cold on two, 4 copies of K and V, 0.955x (AVX3, faster
/// in 9 of 10 alternating runs) and 0.985x (AVX2, 7 of 10), 2 copies 0.961x (AVX3, 8 of 10).
/// 32 was no faster than 16. K rows keep 8: 16 for both was slower cold on AVX3.
constexpr std::int64_t kValueTokenBlock = 16;

/// Bytes of V rows per block of decode P·V on targets whose column passes cover fewer than 64
/// floats (AVX2, NEON, SSE4: 6 passes or more over a row of 128): every pass over a block runs
/// before the next block, so that the rows come from memory in the first pass and from L1 in the
/// others, and the first pass's stalls spread over the run (Zen 3, AVX2: 8 tokens of fp16 at head
/// dim 128 ran D1 and D4 faster than 4, 16, 32 or 64). Items of three or four rows take
/// kPvBytesManyRows: their passes compute more per token, and each pass's fixed cost (the
/// accumulators loaded and stored, the loop started) weighed more than the block's memory. Zen 4,
/// AVX2, D1-like calls (4 rows, fp16) with 4 KiB against 2 KiB: 0.93x the time with K and V in L3
/// on one thread (faster in 3 of 3 alternating runs), 0.955x cold on two (4 of 4), where 8 KiB
/// ran 1.1x slower than 4; D3-like (int8) 0.96x cold (3 of 3). Items of one or two rows lost
/// with 4 KiB: 1.06x the time on a D4-like call (bf16, one row, 4 of 4) and 1.09x with two rows
/// (3 of 3), so they keep 2 KiB.
constexpr std::int64_t kPvBytes = 2048;
constexpr std::int64_t kPvBytesManyRows = 4096;

/// Bytes of V rows per block (16 to 32 tokens) of decode P·V where each pass covers 64 floats
/// (AVX-512: two passes over a row of 128): the second pass reads the block from L1. 4 KiB (16
/// rows of 256 bytes) against 16 KiB, in alternating `fia bench` pairs (Zen 4, AVX3, cold): D1
/// 0.901x the time (faster in 10 of 10), D4 0.944x (10 of 10); against 8 KiB D1 0.926x (8 of 8),
/// D4 0.950x (7 of 8); against 2 KiB D1 0.992x (4 of 8) and D4 1.021x (2 of 8), where a cold
/// D1-like walk (2 threads) ran 2 KiB and 3 KiB slower. In that walk phase B (P·V) took about
/// 0.83x the time with 16 rows per block as with 64. (Short passes: kPvBytes.)
constexpr std::int64_t kPvWideBytes = 4096;

/// The token rows after a run that its prefetches go on into: the next run of the item (the next
/// tile of a contiguous cache, the next block of a paged one, wherever that block is stored), at
/// the run's stride.
struct NextRows {
  const char* first = nullptr;  ///< the next run's first row (at the run's first KV head)
  std::int64_t count = 0;       ///< its tokens within the item
};

/// What a kernel prefetches while it walks tokens t of a sub-run: `bytes` of the token row
/// `distance` tokens ahead (base + (t + distance) * stride) while t + distance < limit, then the
/// rows of `next` (the run after, counted from limit on) while there are any.
struct Prefetch {
  const char* base = nullptr;
  std::int64_t stride = 0, bytes = 0, distance = 0, limit = 0;
  NextRows next;
  HWY_INLINE void at(std::int64_t t) const {
    if (bytes == 0) return;
    const std::int64_t i = t + distance;
    if (i < limit) prefetch_row(base + i * stride, bytes);
    else if (i - limit < next.count) prefetch_row(next.first + (i - limit) * stride, bytes);
  }
  /// at(t) .. at(t + n - 1), as one run of lines where those rows lie back to back within limit
  /// (contiguous rows, the sweep of an interleaved-head block). The per-row tests and loops had
  /// cost D2's Q·Kᵀ about 4 % of its time with K and V in L2/L3 (Zen 4, AVX3: 0.955x and 0.967x
  /// the time with one run; cold, ABBA in one process, D2 0.947-1.017x on AVX3 and 0.909-1.039x
  /// on AVX2, D1 0.947-1.006x and 0.974-1.005x, 3-6 sets each).
  HWY_INLINE void span(std::int64_t t, std::int64_t n) const { spread(t, n).rest(); }
  /// span(t, n) for a product step that spreads it over its loop: the run of lines span takes
  /// at once where the rows lie back to back within limit; elsewhere the rows' prefetches go out
  /// now, row by row, and nothing is left to spread.
  HWY_INLINE SpreadLines spread(std::int64_t t, std::int64_t n) const {
    if (bytes > 0 && bytes == stride && t + distance + n <= limit)
      return SpreadLines::of(base + (t + distance) * stride, n * bytes);
    for (std::int64_t j = 0; j < n; ++j) at(t + j);
    return {};
  }
  /// The same prefetches for the tokens from t0 on, counted from t0 (t0 may lie past limit: then
  /// they are all rows of `next`).
  Prefetch from(std::int64_t t0) const {
    if (bytes == 0) return {};
    return {t0 < limit ? base + t0 * stride : nullptr, stride, bytes, distance, limit - t0, next};
  }
  /// Bytes [lo, hi) of the same rows (hi <= bytes): a share of each row.
  Prefetch slice(std::int64_t lo, std::int64_t hi) const {
    if (bytes == 0 || hi <= lo) return {};
    Prefetch r = shifted(lo);
    r.bytes = hi - lo;
    return r;
  }
  /// The same prefetches `offset` bytes further on (the rows of another KV head).
  Prefetch shifted(std::int64_t offset) const {
    if (bytes == 0) return {};
    Prefetch r = *this;
    if (r.base != nullptr) r.base += offset;  // null: every row lies in `next` (from())
    if (next.count > 0) r.next.first += offset;
    return r;
  }
};

/// pf's prefetches for tokens t .. t + n - 1 (rows `distance` ahead, or the next block's pieces),
/// for a Q·Kᵀ step over those tokens or a P·V pass's share of whole rows: spread over the step's
/// loop where pf's rows are rows of floats lying back to back (Prefetch::spread), else issued now.
/// int8/int4 rows keep the burst: spread, D3 and D5 took 1.00-1.06x the time in Q·Kᵀ on AVX3
/// and AVX2 and 1.01-1.02x in AVX2's P·V (Emerald Rapids VM, 2 threads, cold, faster in 5-8 of
/// 16 alternating pairs).
template <class Src>
HWY_INLINE SpreadLines row_prefetches(const Prefetch& pf, std::int64_t t, std::int64_t n) {
  if constexpr (FloatRowSource<Src>) {
    return pf.spread(t, n);
  } else {
    pf.span(t, n);
    return {};
  }
}

/// How the KV heads of a narrow item follow one another (for_each_block): a decode kernel call
/// walks `count` of them, each head's K/V rows one KV head stride of the run further on and its
/// packed query rows `rows` further on. Each head's prefetches go on `prefetch_pieces` pieces
/// after the previous head's when those sweep the next block's bytes, else they are the previous
/// head's `prefetch_bytes` further on.
struct HeadSteps {
  std::int64_t count = 1;
  std::int64_t rows = 0;
  std::int64_t prefetch_bytes = 0;
  std::int64_t prefetch_pieces = 0;
  /// The prefetches of head hk of the call, from those of its first head.
  Prefetch for_head(const Prefetch& first, std::int64_t hk) const {
    if (hk == 0) return first;
    return prefetch_pieces > 0 ? first.from(hk * prefetch_pieces) : first.shifted(hk * prefetch_bytes);
  }
};

/// The rows of item `it` after `run` (a run of K when `keys`, else of V, from logical column j) as
/// the run's prefetches go on into them: the next run's rows when they have the run's stride
/// (a paged cache's next block, even when stored elsewhere: without it every block's first rows
/// were read cold; Zen 4, 2 threads: a standalone copy of D2's walk over shuffled blocks read
/// 23.5-27.1 GB/s instead of 16.1-20.3, where reading the blocks in order read 25.4-28.1; D2 took
/// 0.925x the time on AVX3, 0.897x on AVX2, in 10 alternating pairs each).
/// None at the item's end and for NZ rows.
HWY_INLINE NextRows next_rows(const Problem& p, const WorkItem& it, const KvRun& run, std::int64_t j, bool keys) {
  const std::int64_t next = j + run.count, end = std::max(it.col_end, it.prefetch_end);
  if (next >= end || run.tiled()) return {};
  const KvRun n = p.locate(it.b, it.h, next);
  const std::int64_t stride = keys ? run.key_stride : run.value_stride;
  if (n.tiled() || (keys ? n.key_stride : n.value_stride) != stride) return {};
  return {static_cast<const char*>(keys ? n.key : n.value), std::min(n.count, end - next)};
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

/// Row vectors per pass of decode P·V (run_pv): 4 x 4 accumulators with 32 registers, else 2.
inline constexpr int kPvBlockVectors = kVectorRegisters >= 32 ? 4 : 2;

/// True where a pass of run_pv covers 64 floats or more (AVX-512: two passes over a row of 128;
/// also 512-bit SVE or RVV vectors, where for_each_block's head-by-head prefetch is unmeasured).
HWY_INLINE bool wide_pv_passes() { return kPvBlockVectors * static_cast<std::int64_t>(hn::Lanes(DF())) >= 64; }

/// Calls fn(first token, first packed row, KV head within the item, sub-run, prefetch, heads) for
/// every (query row, KV head) of a narrow item over one run. Single-head items take the run whole,
/// prefetching their rows ahead; items spanning several KV heads go block by block of
/// kTokenBlock tokens of K rows or kValueTokenBlock of V rows, all heads of a block before the
/// next, while the heads' passes prefetch the next block: each head's pass its own rows of the
/// next block (2 KiB apart in D2), which the same head's pass reads first there. Where the item's
/// heads fill the token rows (every KV head of BSH/BSND rows) and the P·V passes are short (not
/// wide_pv_passes: AVX2, NEON, SSE4), the next block's bytes are one contiguous sequence of
/// row-sized pieces and the passes sweep it in address order instead, a block's worth of pieces
/// each. D2 with the sweep, in three sets of pairs alternating with the build before (Zen 4): AVX2
/// 0.956x, 1.000x and 0.963x the time (faster in 20 of 32 pairs), AVX3 0.941x, 1.026x and 0.991x
/// (16 of 32). With the sweep, the rows of a block's last tokens, which its first head reads at
/// once, are prefetched only by the previous block's last head. Head by head against the sweep
/// (Emerald Rapids VM, 2 threads, cold): AVX3 D2 0.95-0.956x the time (faster in 12 of 12 and 16
/// of 16 pairs), D1's K and V as BSH rows 0.971x (11 of 12); AVX2 D2 1.02x.
/// The rows are the run's K rows when `keys` (qk_dim elements), else its V rows (v_dim); V rows
/// and the K rows of one- or two-row items are prefetched kPrefetchBytesFar ahead where they are
/// contiguous, other K rows kPrefetchBytes. With `all_heads` one call covers every KV
/// head of a block (`heads` says how to step from one to the next; the caller reads the rows in
/// place), otherwise each call covers one. The prefetches run on into the rows of `next`
/// (next_rows).
template <class Fn>
HWY_INLINE void for_each_block(const Problem& p, const WorkItem& it, const KvRun& run, const NextRows& next, bool keys,
                               bool all_heads, Fn fn) {
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(p.kv_dtype));
  const std::int64_t nrows = it.row_end - it.row_begin, kvh = it.kv_heads;
  const std::int64_t token_stride = keys ? run.key_stride : run.value_stride;
  const std::int64_t head_stride = keys ? run.key_head_stride : run.value_head_stride;
  const std::int64_t row_bytes = kv_row_bytes(p, keys ? p.qk_dim : p.v_dim);
  const auto* first = static_cast<const char*>(keys ? run.key : run.value);
  if (kvh == 1) {
    Prefetch pf;
    if (token_stride * es > row_bytes) {
      pf = {first, token_stride * es, row_bytes, kPrefetchTokens, run.count, next};
    } else {
      const std::int64_t ahead = keys && packed_rows(it) > 2 ? kPrefetchBytes : kPrefetchBytesFar;
      pf = {first, row_bytes, row_bytes, std::max<std::int64_t>(1, ahead / std::max<std::int64_t>(1, row_bytes)), run.count, next};
    }
    for (std::int64_t rl = 0; rl < nrows; ++rl)
      fn(0, rl * it.heads, 0, run.sub(0, run.count, 0, es), rl == 0 ? pf : Prefetch{}, HeadSteps{});
    return;
  }
  // Where the heads fill the token rows the first head's pass prefetches the next block's first
  // `block` pieces and each further head the next `block`; otherwise each head its own rows of
  // the next block, one head stride further on.
  const std::int64_t block = keys ? kTokenBlock : kValueTokenBlock;
  const bool sweep = !wide_pv_passes() && head_stride * es == row_bytes && token_stride * es == kvh * row_bytes;
  const HeadSteps steps{all_heads ? kvh : 1, it.heads, sweep ? 0 : head_stride * es, sweep ? block : 0};
  for (std::int64_t t = 0; t < run.count; t += block) {
    const std::int64_t nt = std::min(block, run.count - t);
    Prefetch first_head;
    if (sweep) {  // the pieces after this block: the rest of the run, then the rows of `next`
      const std::int64_t here = (run.count - t - nt) * kvh;
      first_head = {here > 0 ? first + (t + nt) * token_stride * es : nullptr, row_bytes, row_bytes, 0, here,
                    NextRows{next.first, next.count * kvh}};
    } else {
      first_head = {first + t * token_stride * es, token_stride * es, row_bytes, block, run.count - t, next};
    }
    for (std::int64_t rl = 0; rl < nrows; ++rl)
      for (std::int64_t hk = 0; hk < kvh; hk += steps.count)
        fn(t, (rl * kvh + hk) * it.heads, hk, run.sub(t, nt, hk, es), rl == 0 ? steps.for_head(first_head, hk) : Prefetch{},
           steps);
  }
}

/// Tag types naming the element source a block of rows is read with.
template <class Src>
struct As {
  using type = Src;
};

/// Logical elements per block of rows that are unpacked or dequantized into a per-thread buffer
/// (16 tokens at head dim 128). The packed rows' prefetches are issued while a block is prepared,
/// so blocks must be short: on Emerald Rapids (2 threads, D5) 2048 ran 1.25x faster than 8192
/// and 1.1x faster than 512.
constexpr std::int64_t kUnpackBytes = 2048;

/// f32 rows dequantized from int8/int4 rows with offsets (for_each_row_block). A masked key's
/// offset slot may hold anything (NaN included, 25.1 #24), so P·V skips zero weights for them.
struct DequantF32Src : F32Src {
  static constexpr bool kSkipZeroWeights = true;
};

/// True when K (keys) or V of an int8/int4 call has offsets.
HWY_INLINE bool has_offsets(const Problem& p, bool keys) {
  const Antiquant& q = keys ? p.key_antiquant : p.value_antiquant;
  return p.kv_format != KvFormat::kFloat && (!q.channel_offset.empty() || q.token_offset != nullptr);
}

/// True when decode reads the int4 rows of K (keys) or V in place, in lane order (I4LanesSrc):
/// on AVX-512 targets, for rows without offsets, a multiple of 32 elements long, without a rope
/// part. The query rows (K) and the accumulators (V) are then in lane order too.
HWY_INLINE bool int4_in_lane_order(const Problem& p, bool keys) {
#ifdef FIA_INT4_LANES
  return p.kv_format == KvFormat::kInt4 && !has_offsets(p, keys) &&
         (keys ? p.qk_dim % 32 == 0 && p.rope_dim == 0 : p.v_dim % 32 == 0);
#else
  (void)p;
  (void)keys;
  return false;
#endif
}

/// True when for_each_row_block hands the decode products the run itself (K rows when `keys`,
/// else V rows): float rows, int8 rows without offsets, int4 rows in lane order.
template <class Src>
HWY_INLINE bool rows_in_place(const Problem& p, bool keys) {
  if constexpr (std::is_same_v<Src, I4Src>) return int4_in_lane_order(p, keys);
  return !has_offsets(p, keys);
}

/// Calls fn(As<Dot>(), t0, rows, prefetch) over `sub` (the token rows of K when `keys`, else V, of
/// batch b, KV head h, logical columns from j) as the decode products read it:
///   - float rows and int8 rows without offsets: the run itself, in place;
///   - int4 rows in lane order (int4_in_lane_order): the run itself, in place;
///   - other int4 rows without offsets: blocks unpacked to int8 rows (byte operations, once per row
///     for every query row of the group instead of nibble shifts in every product);
///   - int8/int4 rows with offsets: blocks dequantized to f32 rows x + offset (FIA-SPEC 12.1:
///     the offset is added before any product, so an offset that cancels the stored value leaves
///     exactly 0 instead of the difference of two large sums).
/// Scales are never applied here: they fold multiplicatively (cpu/antiquant.hpp). Blocks live in a
/// per-thread buffer, their rows `dim` apart, and prefetch the packed rows as they are prepared.
template <class Src, class Fn>
HWY_INLINE void for_each_row_block(const Problem& p, const KvRun& sub, bool keys, std::int64_t b, std::int64_t h,
                                   std::int64_t j, const Prefetch& pf, Fn fn) {
  if (rows_in_place<Src>(p, keys)) {
#ifdef FIA_INT4_LANES
    if constexpr (std::is_same_v<Src, I4Src>) fn(As<I4LanesSrc>(), 0, sub, pf);
#endif
    if constexpr (!std::is_same_v<Src, I4Src>) fn(As<Src>(), 0, sub, pf);
    return;
  }
  if constexpr (std::is_same_v<Src, I8Src> || std::is_same_v<Src, I4Src>) {
    using T = typename Src::T;
    const bool offsets = has_offsets(p, keys);
    static thread_local std::vector<float> buffer;  // f32 rows, or int8 rows in its bytes
    const std::int64_t dim = keys ? p.qk_dim : p.v_dim;
    const std::int64_t block = std::clamp<std::int64_t>(kUnpackBytes / dim, 1, 64);
    if (buffer.size() < static_cast<std::size_t>(block * dim)) buffer.resize(static_cast<std::size_t>(block * dim));
    const auto* stored = static_cast<const T*>(keys ? sub.key : sub.value);
    const std::int64_t stride = keys ? sub.key_stride : sub.value_stride;
    const RunFactors f(p, keys ? p.key_antiquant : p.value_antiquant, dim, b, h, j);
    for (std::int64_t t0 = 0; t0 < sub.count; t0 += block) {
      const std::int64_t n = std::min(block, sub.count - t0);
      for (std::int64_t t = 0; t < n; ++t) {
        pf.at(t0 + t);
        const T* row = stored + (t0 + t) * stride;
        if (offsets) {
          float* out = buffer.data() + t * dim;
          widen_row<Src>(row, dim, out);
          dequant_row(out, dim, nullptr, f.co, 1.0f, f.offset(t0 + t));
        } else if constexpr (std::is_same_v<Src, I4Src>) {
          unpack_int4_row(row, dim, reinterpret_cast<std::int8_t*>(buffer.data()) + t * dim);
        }
      }
      KvRun rows = sub;
      rows.count = n;
      const void* data = buffer.data();
      (keys ? rows.key : rows.value) = data;
      (keys ? rows.key_stride : rows.value_stride) = dim;
      if (offsets) fn(As<DequantF32Src>(), t0, rows, Prefetch{});
      else fn(As<I8Src>(), t0, rows, Prefetch{});
    }
  }
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_DECODE_ROWS_INL_H_
