// SIMD kernels of phases A and B (see attention_item.hpp), compiled once per instruction set with
// Highway and dispatched at run time; phase C is plain C++ at the end of this file.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/attention_item.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <cmath>
#include <cstring>

#include "cpu/item_common.hpp"

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// ---- element types: widening loads ---------------------------------------------------------

struct F16Src {
  using T = hwy::float16_t;
  static float one(const T* p) { return f16_to_f32(reinterpret_cast<const std::uint16_t*>(p)[0]); }
  static VF load(DF df, const T* p) { return hn::PromoteTo(df, hn::LoadU(hn::Rebind<T, DF>(), p)); }
};
struct BF16Src {
  using T = hwy::bfloat16_t;
  static float one(const T* p) { return bf16_to_f32(reinterpret_cast<const std::uint16_t*>(p)[0]); }
  static VF load(DF df, const T* p) { return hn::PromoteTo(df, hn::LoadU(hn::Rebind<T, DF>(), p)); }
};
struct F32Src {
  using T = float;
  static float one(const T* p) { return *p; }
  static VF load(DF df, const T* p) { return hn::LoadU(df, p); }
};

/// dst[0:n) = float(src[0:n)).
template <class Src>
HWY_INLINE void widen_row(const typename Src::T* src, std::int64_t n, float* dst) {
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t d = 0;
  for (; d + L <= n; d += L) hn::StoreU(Src::load(df, src + d), df, dst + d);
  for (; d < n; ++d) dst[d] = Src::one(src + d);
}

// ---- the P cast (FIA-SPEC 5 step 7): round to the query dtype, nearest even ----------------

/// bf16: keep the top 16 bits after adding 0x7FFF + lsb. Exact for the finite E in [0, 1].
HWY_INLINE VF round_bf16(DF df, VF e) {
  const hn::RebindToUnsigned<DF> du;
  auto u = hn::BitCast(du, e);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  u = hn::And(hn::Add(u, hn::Add(hn::Set(du, 0x7FFFu), lsb)), hn::Set(du, 0xFFFF0000u));
  return hn::BitCast(df, u);
}

/// fp16: 10 mantissa bits for normal values; below 2^-14 the subnormal quantum 2^-24, obtained
/// by adding and subtracting 0.5 (whose float ulp is 2^-24). Exact for E in [0, 1].
HWY_INLINE VF round_f16(DF df, VF e) {
  const hn::RebindToUnsigned<DF> du;
  auto u = hn::BitCast(du, e);
  const auto lsb = hn::And(hn::ShiftRight<13>(u), hn::Set(du, 1u));
  u = hn::And(hn::Add(u, hn::Add(hn::Set(du, 0xFFFu), lsb)), hn::Set(du, 0xFFFFE000u));
  const VF half = hn::Set(df, 0.5f);
  const VF sub = hn::Sub(hn::Add(e, half), half);
  return hn::IfThenElse(hn::Lt(e, hn::Set(df, 0x1p-14f)), sub, hn::BitCast(df, u));
}

HWY_INLINE VF round_p(DF df, VF e, DType t) {
  if (t == DType::BF16) return round_bf16(df, e);
  if (t == DType::F16) return round_f16(df, e);
  return e;
}

/// E = exp(s - m) on n values at x (in place becomes the rounded P); returns the sum of E.
/// Lanes past n are computed on a copy so that x[n..] is never touched.
HWY_INLINE float exp_row(DF df, float* x, std::int64_t n, float m, DType t) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF vm = hn::Set(df, m);
  VF sum = hn::Zero(df);
  std::int64_t c = 0;
  for (; c + L <= n; c += L) {
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + c), vm));
    sum = hn::Add(sum, e);
    hn::StoreU(round_p(df, e, t), df, x + c);
  }
  if (c < n) {
    HWY_ALIGN float tmp[HWY_MAX_BYTES / sizeof(float)];
    for (std::int64_t k = 0; k < L; ++k) tmp[k] = c + k < n ? x[c + k] : kNegInf;
    const VF e = hn::Exp(df, hn::Sub(hn::Load(df, tmp), vm));
    sum = hn::Add(sum, e);
    hn::Store(round_p(df, e, t), df, tmp);
    for (std::int64_t k = 0; c + k < n; ++k) x[c + k] = tmp[k];
  }
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

// ---- narrow items (decode): K and V read in place, widened in registers ---------------------

/// How far ahead decode kernels prefetch K and V rows (into L2): strided rows by tokens,
/// contiguous rows by bytes (measured on Zen 4: 4 KiB ahead made cold D1 and D4 ~10 % faster than
/// the hardware prefetcher alone, 8 KiB was slower again).
constexpr std::int64_t kPrefetchTokens = 8;
constexpr std::int64_t kPrefetchBytes = 4096;

/// Tokens per block when an item spans several KV heads: each block's token rows are read for all
/// heads before the next block, and the next block is prefetched meanwhile. Small blocks keep the
/// rows of one head (2 KiB apart in a (block, block_size, H) cache, so in few L1 sets) from
/// evicting each other: 8 tokens ran D2 ~1.5x faster than 32.
constexpr std::int64_t kTokenBlock = 8;

/// Prefetches the cache lines of one row of `bytes` bytes into L2 (not L1, where strided rows
/// would evict each other before use).
HWY_INLINE void prefetch_row(const void* row, std::int64_t bytes) {
  const auto* b = static_cast<const char*>(row);
  for (std::int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(b + o, 0, 2);
}

/// What a kernel prefetches while it walks tokens t of a sub-run: `bytes` of the token row
/// `distance` tokens ahead (base + (t + distance) * stride), while t + distance < limit.
struct Prefetch {
  const char* base = nullptr;
  std::int64_t stride = 0, bytes = 0, distance = 0, limit = 0;
  HWY_INLINE void at(std::int64_t t) const {
    if (bytes > 0 && t + distance < limit) prefetch_row(base + (t + distance) * stride, bytes);
  }
};

/// out[0..4) = the lane sums of a, b, c, d. On AVX2 three horizontal adds serve all four sums;
/// elsewhere one reduction each. (AVX-512 targets use sum16 instead.)
HWY_INLINE void sum4(DF df, VF a, VF b, VF c, VF d, float* out) {
#if HWY_TARGET == HWY_AVX2
  (void)df;
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a.raw, b.raw), _mm256_hadd_ps(c.raw, d.raw));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
#else
  out[0] = hn::GetLane(hn::SumOfLanes(df, a));
  out[1] = hn::GetLane(hn::SumOfLanes(df, b));
  out[2] = hn::GetLane(hn::SumOfLanes(df, c));
  out[3] = hn::GetLane(hn::SumOfLanes(df, d));
#endif
}

/// Calls fn(first token, first packed row, sub-run, prefetch) for every (query row, KV head) of a
/// narrow item over one run. Single-head items take the run whole, prefetching their rows ahead;
/// items spanning several KV heads go block by block of kTokenBlock tokens, all heads of a block
/// before the next, each head's pass prefetching its rows of the next block.
template <class Fn>
HWY_INLINE void for_each_block(const Problem& p, const WorkItem& it, const KvRun& run, const void* base,
                               std::int64_t token_stride, std::int64_t head_stride, std::int64_t row_elems, Fn fn) {
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(p.dtype));
  const std::int64_t nrows = it.row_end - it.row_begin, kvh = it.kv_heads;
  const std::int64_t row_bytes = row_elems * es;
  const auto* first = static_cast<const char*>(base);
  if (kvh == 1) {
    Prefetch pf;
    if (token_stride * es > row_bytes) pf = {first, token_stride * es, row_bytes, kPrefetchTokens, run.count};
    else pf = {first, row_bytes, row_bytes, std::max<std::int64_t>(1, kPrefetchBytes / std::max<std::int64_t>(1, row_bytes)), run.count};
    for (std::int64_t rl = 0; rl < nrows; ++rl) fn(0, rl * it.heads, run.sub(0, run.count, 0, es), rl == 0 ? pf : Prefetch{});
    return;
  }
  for (std::int64_t t = 0; t < run.count; t += kTokenBlock) {
    const std::int64_t nt = std::min(kTokenBlock, run.count - t);
    for (std::int64_t rl = 0; rl < nrows; ++rl)
      for (std::int64_t hk = 0; hk < kvh; ++hk) {
        Prefetch pf;
        if (rl == 0) pf = {first + (t * token_stride + hk * head_stride) * es, token_stride * es, row_bytes, kTokenBlock, run.count - t};
        fn(t, (rl * kvh + hk) * it.heads, run.sub(t, nt, hk, es), pf);
      }
  }
}

/// Dot products of ROWS query rows (stride kw) with two K rows k0, k1 over n elements, added to
/// out0[r * os0] / out1[r * os1]. k1 may repeat k0 (its result is then ignored by the caller).
template <class Src, int ROWS>
HWY_INLINE void dots2(DF df, const float* q, std::int64_t kw, const typename Src::T* k0, const typename Src::T* k1,
                      std::int64_t n, float* out0, std::int64_t os0, float* out1, std::int64_t os1) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  VF b0 = hn::Zero(df), b1 = hn::Zero(df), b2 = hn::Zero(df), b3 = hn::Zero(df);
  std::int64_t d = 0;
  for (; d + L <= n; d += L) {
    const VF x0 = Src::load(df, k0 + d), x1 = Src::load(df, k1 + d);
    VF qv = hn::LoadU(df, q + d);
    a0 = hn::MulAdd(qv, x0, a0);
    b0 = hn::MulAdd(qv, x1, b0);
    if constexpr (ROWS > 1) {
      qv = hn::LoadU(df, q + kw + d);
      a1 = hn::MulAdd(qv, x0, a1);
      b1 = hn::MulAdd(qv, x1, b1);
    }
    if constexpr (ROWS > 2) {
      qv = hn::LoadU(df, q + 2 * kw + d);
      a2 = hn::MulAdd(qv, x0, a2);
      b2 = hn::MulAdd(qv, x1, b2);
    }
    if constexpr (ROWS > 3) {
      qv = hn::LoadU(df, q + 3 * kw + d);
      a3 = hn::MulAdd(qv, x0, a3);
      b3 = hn::MulAdd(qv, x1, b3);
    }
  }
  float sa[4], sb[4];
  sum4(df, a0, a1, a2, a3, sa);
  sum4(df, b0, b1, b2, b3, sb);
  for (int r = 0; r < ROWS; ++r) {
    float s0 = sa[r], s1 = sb[r];
    for (std::int64_t e = d; e < n; ++e) {
      s0 += q[r * kw + e] * Src::one(k0 + e);
      s1 += q[r * kw + e] * Src::one(k1 + e);
    }
    out0[r * os0] += s0;
    out1[r * os1] += s1;
  }
}

#undef FIA_DOTS4  // this file is compiled once per target
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3_ZEN4 || HWY_TARGET == HWY_AVX3_SPR
#define FIA_DOTS4 1
/// a shuffled by kLo plus a shuffled by kHi, the shuffles picking 128-bit quarters of a and b.
template <int kLo, int kHi>
HWY_INLINE __m512 fold_quarters(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, kLo), _mm512_shuffle_f32x4(a, b, kHi));
}

/// The same with the shuffles picking lanes within each 128-bit quarter.
template <int kLo, int kHi>
HWY_INLINE __m512 fold_lanes(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, kLo), _mm512_shuffle_ps(a, b, kHi));
}

/// The lane sums of 16 vectors in one vector: lane 4r + j holds the sum of v[4r + j]. A
/// transposing tree of 15 adds, instead of 16 separate reductions.
HWY_INLINE VF sum16(const VF* v) {
  __m512 u[4];
  for (int j = 0; j < 4; ++j) {  // u[j], quarter r: four partial sums of v[4r + j]
    const __m512 s01 = fold_quarters<0x44, 0xEE>(v[j].raw, v[4 + j].raw);
    const __m512 s23 = fold_quarters<0x44, 0xEE>(v[8 + j].raw, v[12 + j].raw);
    u[j] = fold_quarters<0x88, 0xDD>(s01, s23);
  }
  return VF{fold_lanes<0x88, 0xDD>(fold_lanes<0x44, 0xEE>(u[0], u[1]), fold_lanes<0x44, 0xEE>(u[2], u[3]))};
}

/// a[4r + j] += q row r times K row k[j] over n elements, for ROWS rows and 4 tokens; the
/// elements past the last full vector go to tail[4r + j]. Each lane's FMA chain and the sum16 tree
/// depend only on (row, token), so a token's score is the same bits in any group of 4.
template <class Src, int ROWS>
HWY_INLINE void dots4(DF df, const float* q, std::int64_t kw, const typename Src::T* const* k, std::int64_t n, VF* a,
                      float* tail) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const auto *k0 = k[0], *k1 = k[1], *k2 = k[2], *k3 = k[3];
  std::int64_t d = 0;
  for (; d + L <= n; d += L) {
    const VF x0 = Src::load(df, k0 + d), x1 = Src::load(df, k1 + d);
    const VF x2 = Src::load(df, k2 + d), x3 = Src::load(df, k3 + d);
#define FIA_ROW(r)                                   \
  if constexpr (ROWS > r) {                          \
    const VF qv = hn::LoadU(df, q + r * kw + d);     \
    a[4 * r] = hn::MulAdd(qv, x0, a[4 * r]);         \
    a[4 * r + 1] = hn::MulAdd(qv, x1, a[4 * r + 1]); \
    a[4 * r + 2] = hn::MulAdd(qv, x2, a[4 * r + 2]); \
    a[4 * r + 3] = hn::MulAdd(qv, x3, a[4 * r + 3]); \
  }
    FIA_ROW(0) FIA_ROW(1) FIA_ROW(2) FIA_ROW(3)
#undef FIA_ROW
  }
  for (; d < n; ++d)
    for (int r = 0; r < ROWS; ++r)
      for (int j = 0; j < 4; ++j) tail[4 * r + j] += q[r * kw + d] * Src::one(k[j] + d);
}

/// Scores of ROWS rows against tokens t .. t + count of the run (count 1..4), stored at
/// out[r * os + j] for j < count.
template <class Src, int ROWS>
HWY_INLINE void dots4_store(DF df, const Problem& p, const float* q, std::int64_t kw, const KvRun& run, std::int64_t t,
                            std::int64_t count, float* out, std::int64_t os) {
  using T = typename Src::T;
  const T* k[4];
  const T* kr[4];
  for (std::int64_t j = 0; j < 4; ++j) {
    const std::int64_t tj = t + std::min(j, count - 1);
    k[j] = static_cast<const T*>(run.key) + tj * run.key_stride;
    kr[j] = p.rope_dim > 0 ? static_cast<const T*>(run.key_rope) + tj * run.rope_stride : nullptr;
  }
  VF a[16];
  for (VF& v : a) v = hn::Zero(df);
  HWY_ALIGN float tail[16] = {};
  dots4<Src, ROWS>(df, q, kw, k, p.qk_dim, a, tail);
  if (p.rope_dim > 0) dots4<Src, ROWS>(df, q + p.qk_dim, kw, kr, p.rope_dim, a, tail);
  const VF sums = hn::Add(sum16(a), hn::Load(df, tail));
  if (count == 4) {
    const __m512 v = sums.raw;
    _mm_storeu_ps(out, _mm512_castps512_ps128(v));
    if constexpr (ROWS > 1) _mm_storeu_ps(out + os, _mm512_extractf32x4_ps(v, 1));
    if constexpr (ROWS > 2) _mm_storeu_ps(out + 2 * os, _mm512_extractf32x4_ps(v, 2));
    if constexpr (ROWS > 3) _mm_storeu_ps(out + 3 * os, _mm512_extractf32x4_ps(v, 3));
    return;
  }
  HWY_ALIGN float all[16];
  hn::Store(sums, df, all);
  for (int r = 0; r < ROWS; ++r)
    for (std::int64_t j = 0; j < count; ++j) out[r * os + j] = all[4 * r + j];
}
#endif

/// Raw dot products (with the rope part) of ROWS rows against the tokens of one run.
template <class Src, int ROWS>
void run_dots(DF df, const Problem& p, const float* q, std::int64_t kw, const KvRun& run, float* out, std::int64_t os,
              const Prefetch& pf) {
#ifdef FIA_DOTS4
  for (std::int64_t t = 0; t < run.count; t += 4) {
    for (std::int64_t j = 0; j < 4; ++j) pf.at(t + j);
    dots4_store<Src, ROWS>(df, p, q, kw, run, t, std::min<std::int64_t>(4, run.count - t), out + t, os);
  }
#else
  using T = typename Src::T;
  const T* k = static_cast<const T*>(run.key);
  const T* kr = static_cast<const T*>(run.key_rope);
  for (std::int64_t t = 0; t < run.count; t += 2) {
    const std::int64_t t1 = std::min(t + 1, run.count - 1);
    pf.at(t);
    pf.at(t + 1);
    float sink[4];  // the second result of a lone last token lands here
    float* o1 = t + 1 < run.count ? out + t + 1 : sink;
    const std::int64_t os1 = t + 1 < run.count ? os : 1;
    for (int r = 0; r < ROWS; ++r) out[r * os + t] = 0.0f;
    for (int r = 0; r < ROWS; ++r) o1[r * os1] = 0.0f;
    dots2<Src, ROWS>(df, q, kw, k + t * run.key_stride, k + t1 * run.key_stride, p.qk_dim, out + t, os, o1, os1);
    if (p.rope_dim > 0)
      dots2<Src, ROWS>(df, q + p.qk_dim, kw, kr + t * run.rope_stride, kr + t1 * run.rope_stride, p.rope_dim, out + t, os,
                       o1, os1);
  }
#endif
}

/// x[0:n) = saturate(x * scale) in place; returns the max.
HWY_INLINE float scale_row(DF df, float* x, std::int64_t n, float scale) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF vs = hn::Set(df, scale);
  const VF lo = hn::Set(df, -std::numeric_limits<float>::max()), hi = hn::Set(df, std::numeric_limits<float>::max());
  VF vm = hn::Set(df, kNegInf);
  std::int64_t c = 0;
  for (; c + L <= n; c += L) {
    const VF v = hn::Min(hn::Max(hn::Mul(hn::LoadU(df, x + c), vs), lo), hi);
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

template <class Src>
void narrow_scores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                   float* m) {
  const DF df;
  const std::int64_t R = packed_rows(it), kw = p.qk_dim + p.rope_dim;
  for (std::int64_t r = 0; r < R; ++r) load_query_row(p, it, r, s.q + r * kw, 1);
  std::fill(m, m + R, kNegInf);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    float* tile_scores = sv.base + (c0 - it.col_begin);
    for_each_run(p, it.b, it.h, c0, nc, [&](std::int64_t c, const KvRun& run) {
      for_each_block(p, it, run, run.key, run.key_stride, run.key_head_stride, p.qk_dim,
                     [&](std::int64_t t, std::int64_t base_r, const KvRun& sub, const Prefetch& prefetch) {
                       for (std::int64_t g0 = 0; g0 < it.heads; g0 += 4) {
                         const float* q = s.q + (base_r + g0) * kw;
                         float* out = tile_scores + (base_r + g0) * sv.row_stride + c + t;
                         const Prefetch pf = g0 == 0 ? prefetch : Prefetch{};
                         switch (std::min<std::int64_t>(4, it.heads - g0)) {
                           case 1: run_dots<Src, 1>(df, p, q, kw, sub, out, sv.row_stride, pf); break;
                           case 2: run_dots<Src, 2>(df, p, q, kw, sub, out, sv.row_stride, pf); break;
                           case 3: run_dots<Src, 3>(df, p, q, kw, sub, out, sv.row_stride, pf); break;
                           default: run_dots<Src, 4>(df, p, q, kw, sub, out, sv.row_stride, pf); break;
                         }
                       }
                     });
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

/// acc[r][d0 : d0 + NV*L) += sum over the run's tokens of p[r][t] * V[t][d0 : ...], for ROWS rows;
/// the accumulators stay in registers over the whole run.
template <class Src, int ROWS, int NV>
HWY_INLINE void run_axpy(DF df, const KvRun& run, const float* pr, std::int64_t ps, std::int64_t d0, float* acc,
                         std::int64_t vd, const Prefetch& pf) {
  using T = typename Src::T;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const T* v = static_cast<const T*>(run.value) + d0;
#define FIA_ACC_LOAD(r, n) VF c##r##n = (ROWS > r && NV > n) ? hn::LoadU(df, acc + r * vd + d0 + n * L) : hn::Zero(df);
  FIA_ACC_LOAD(0, 0) FIA_ACC_LOAD(0, 1) FIA_ACC_LOAD(0, 2) FIA_ACC_LOAD(0, 3)
  FIA_ACC_LOAD(1, 0) FIA_ACC_LOAD(1, 1) FIA_ACC_LOAD(1, 2) FIA_ACC_LOAD(1, 3)
  FIA_ACC_LOAD(2, 0) FIA_ACC_LOAD(2, 1) FIA_ACC_LOAD(2, 2) FIA_ACC_LOAD(2, 3)
  FIA_ACC_LOAD(3, 0) FIA_ACC_LOAD(3, 1) FIA_ACC_LOAD(3, 2) FIA_ACC_LOAD(3, 3)
#undef FIA_ACC_LOAD
  for (std::int64_t t = 0; t < run.count; ++t) {
    const T* vt = v + t * run.value_stride;
    pf.at(t);
    const VF v0 = Src::load(df, vt);
    const VF v1 = NV > 1 ? Src::load(df, vt + L) : v0;
    const VF v2 = NV > 2 ? Src::load(df, vt + 2 * L) : v0;
    const VF v3 = NV > 3 ? Src::load(df, vt + 3 * L) : v0;
#define FIA_ROW(r)                                        \
  if constexpr (ROWS > r) {                               \
    const VF w = hn::Set(df, pr[r * ps + t]);             \
    c##r##0 = hn::MulAdd(w, v0, c##r##0);                 \
    if constexpr (NV > 1) c##r##1 = hn::MulAdd(w, v1, c##r##1); \
    if constexpr (NV > 2) c##r##2 = hn::MulAdd(w, v2, c##r##2); \
    if constexpr (NV > 3) c##r##3 = hn::MulAdd(w, v3, c##r##3); \
  }
    FIA_ROW(0) FIA_ROW(1) FIA_ROW(2) FIA_ROW(3)
#undef FIA_ROW
  }
#define FIA_ACC_STORE(r, n) \
  if constexpr (ROWS > r && NV > n) hn::StoreU(c##r##n, df, acc + r * vd + d0 + n * L);
  FIA_ACC_STORE(0, 0) FIA_ACC_STORE(0, 1) FIA_ACC_STORE(0, 2) FIA_ACC_STORE(0, 3)
  FIA_ACC_STORE(1, 0) FIA_ACC_STORE(1, 1) FIA_ACC_STORE(1, 2) FIA_ACC_STORE(1, 3)
  FIA_ACC_STORE(2, 0) FIA_ACC_STORE(2, 1) FIA_ACC_STORE(2, 2) FIA_ACC_STORE(2, 3)
  FIA_ACC_STORE(3, 0) FIA_ACC_STORE(3, 1) FIA_ACC_STORE(3, 2) FIA_ACC_STORE(3, 3)
#undef FIA_ACC_STORE
}

/// acc[r][:] += p[r][t] * V[t][:] over one run, for up to 4 rows: vector blocks of up to
/// kBlockVectors, then a scalar tail.
template <class Src, int ROWS>
void run_pv(DF df, const Problem& p, const KvRun& run, const float* pr, std::int64_t ps, float* acc, const Prefetch& pf) {
  constexpr int kBlockVectors = HWY_MAX_BYTES >= 64 ? 4 : 2;  // 4 x 4 accumulators on AVX-512
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), vd = p.v_dim;
  std::int64_t d0 = 0;
  for (; d0 + kBlockVectors * L <= vd; d0 += kBlockVectors * L)
    run_axpy<Src, ROWS, kBlockVectors>(df, run, pr, ps, d0, acc, vd, d0 == 0 ? pf : Prefetch{});
  for (; d0 + L <= vd; d0 += L) run_axpy<Src, ROWS, 1>(df, run, pr, ps, d0, acc, vd, d0 == 0 ? pf : Prefetch{});
  const auto* v = static_cast<const typename Src::T*>(run.value);
  for (std::int64_t d = d0; d < vd; ++d)
    for (std::int64_t t = 0; t < run.count; ++t)
      for (int r = 0; r < ROWS; ++r) acc[r * vd + d] += pr[r * ps + t] * Src::one(v + t * run.value_stride + d);
}

template <class Src>
void narrow_accumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                       const float* m, float* l, float* acc) {
  const DF df;
  const std::int64_t R = packed_rows(it), vd = p.v_dim;
  std::fill(l, l + R, 0.0f);
  std::fill(acc, acc + R * vd, 0.0f);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    float* tile_p = sv.base + (c0 - it.col_begin);
    for (std::int64_t r = 0; r < R; ++r) {
      float* row = tile_p + r * sv.row_stride;
      if (m[r] == kNegInf) std::fill(row, row + nc, 0.0f);
      else l[r] += exp_row(df, row, nc, m[r], p.dtype);
    }
    for_each_run(p, it.b, it.h, c0, nc, [&](std::int64_t c, const KvRun& run) {
      for_each_block(p, it, run, run.value, run.value_stride, run.value_head_stride, vd,
                     [&](std::int64_t t, std::int64_t base_r, const KvRun& sub, const Prefetch& prefetch) {
                       for (std::int64_t g0 = 0; g0 < it.heads; g0 += 4) {
                         const float* pr = tile_p + (base_r + g0) * sv.row_stride + c + t;
                         float* a = acc + (base_r + g0) * vd;
                         const Prefetch pf = g0 == 0 ? prefetch : Prefetch{};
                         switch (std::min<std::int64_t>(4, it.heads - g0)) {
                           case 1: run_pv<Src, 1>(df, p, sub, pr, sv.row_stride, a, pf); break;
                           case 2: run_pv<Src, 2>(df, p, sub, pr, sv.row_stride, a, pf); break;
                           case 3: run_pv<Src, 3>(df, p, sub, pr, sv.row_stride, a, pf); break;
                           default: run_pv<Src, 4>(df, p, sub, pr, sv.row_stride, a, pf); break;
                         }
                       }
                     });
    });
  }
}

// ---- wide items (prefill): f32 tiles, products register-blocked over rows ------------------

/// Widens tokens [j0, j0 + count) of key (with rope) or value rows into a c-major f32 tile.
template <class Src>
void widen_tile(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, bool keys, float* dst) {
  using T = typename Src::T;
  const std::int64_t kw = p.qk_dim + p.rope_dim, width = keys ? kw : p.v_dim;
  for_each_run(p, it.b, it.h, j0, count, [&](std::int64_t c, const KvRun& run) {
    for (std::int64_t t = 0; t < run.count; ++t) {
      float* row = dst + (c + t) * width;
      if (keys) {
        widen_row<Src>(static_cast<const T*>(run.key) + t * run.key_stride, p.qk_dim, row);
        if (p.rope_dim > 0) widen_row<Src>(static_cast<const T*>(run.key_rope) + t * run.rope_stride, p.rope_dim, row + p.qk_dim);
      } else {
        widen_row<Src>(static_cast<const T*>(run.value) + t * run.value_stride, p.v_dim, row);
      }
    }
  });
}

/// out[c][r-block] = scale * sum_x a[x][r-block] * b(c, x) for NV row vectors and NC columns,
/// b(c, x) = b[c * bc + x * bx]; `a` rows have stride lda, `out` rows stride ldo. With
/// `accumulate` the sum is added to out instead (scale unused). Scaled results saturate (see
/// saturate()).
template <int NV, int NC>
HWY_INLINE void block_product(DF df, const float* a, std::int64_t lda, const float* b, std::int64_t bc, std::int64_t bx,
                              std::int64_t depth, float* out, std::int64_t ldo, float scale, bool accumulate) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
#define FIA_ZERO6(v) VF c##v##0 = hn::Zero(df), c##v##1 = hn::Zero(df), c##v##2 = hn::Zero(df), \
                        c##v##3 = hn::Zero(df), c##v##4 = hn::Zero(df), c##v##5 = hn::Zero(df);
  FIA_ZERO6(0) FIA_ZERO6(1) FIA_ZERO6(2) FIA_ZERO6(3)
#undef FIA_ZERO6
  for (std::int64_t x = 0; x < depth; ++x) {
    const float* ax = a + x * lda;
    const VF a0 = hn::Load(df, ax);
    const VF a1 = NV > 1 ? hn::Load(df, ax + L) : a0;
    const VF a2 = NV > 2 ? hn::Load(df, ax + 2 * L) : a0;
    const VF a3 = NV > 3 ? hn::Load(df, ax + 3 * L) : a0;
    const float* bcol = b + x * bx;
#define FIA_COLUMN(n)                                              \
  if constexpr (NC > n) {                                          \
    const VF bn = hn::Set(df, bcol[n * bc]);                       \
    c0##n = hn::MulAdd(a0, bn, c0##n);                             \
    if constexpr (NV > 1) c1##n = hn::MulAdd(a1, bn, c1##n);       \
    if constexpr (NV > 2) c2##n = hn::MulAdd(a2, bn, c2##n);       \
    if constexpr (NV > 3) c3##n = hn::MulAdd(a3, bn, c3##n);       \
  }
    FIA_COLUMN(0) FIA_COLUMN(1) FIA_COLUMN(2) FIA_COLUMN(3) FIA_COLUMN(4) FIA_COLUMN(5)
#undef FIA_COLUMN
  }
  const VF vs = hn::Set(df, scale);
  const VF lo = hn::Set(df, -std::numeric_limits<float>::max()), hi = hn::Set(df, std::numeric_limits<float>::max());
  auto put = [&](VF v, float* o) {
    hn::Store(accumulate ? hn::Add(hn::Load(df, o), v) : hn::Min(hn::Max(hn::Mul(v, vs), lo), hi), df, o);
  };
#define FIA_STORE(n)                                  \
  if constexpr (NC > n) {                             \
    float* o = out + n * ldo;                         \
    put(c0##n, o);                                    \
    if constexpr (NV > 1) put(c1##n, o + L);          \
    if constexpr (NV > 2) put(c2##n, o + 2 * L);      \
    if constexpr (NV > 3) put(c3##n, o + 3 * L);      \
  }
  FIA_STORE(0) FIA_STORE(1) FIA_STORE(2) FIA_STORE(3) FIA_STORE(4) FIA_STORE(5)
#undef FIA_STORE
}

/// All columns of one row block of NV vectors: blocks of 6 columns, then single columns.
template <int NV>
HWY_INLINE void row_block_product(DF df, const float* a, std::int64_t lda, const float* b, std::int64_t bc, std::int64_t bx,
                                  std::int64_t ncols, std::int64_t depth, float* out, std::int64_t ldo, float scale,
                                  bool accumulate) {
  std::int64_t c = 0;
  for (; c + 6 <= ncols; c += 6)
    block_product<NV, 6>(df, a, lda, b + c * bc, bc, bx, depth, out + c * ldo, ldo, scale, accumulate);
  for (; c < ncols; ++c) block_product<NV, 1>(df, a, lda, b + c * bc, bc, bx, depth, out + c * ldo, ldo, scale, accumulate);
}

/// out[c][0:Rp) (stride ldo) = scale * sum_x a[x][0:Rp) * b(c, x) for c < ncols, or += when
/// accumulating; b(c, x) = b[c * bc + x * bx]. Rp is a multiple of the lane count. Row blocks of
/// 4 vectors where the target has 32 vector registers (AVX-512), else 2.
HWY_INLINE void panel_product(DF df, const float* a, std::int64_t lda, std::int64_t Rp, const float* b, std::int64_t bc,
                              std::int64_t bx, std::int64_t ncols, std::int64_t depth, float* out, std::int64_t ldo,
                              float scale, bool accumulate) {
  constexpr int kRowVectors = HWY_MAX_BYTES >= 64 ? 4 : 2;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t r = 0;
  for (; r + kRowVectors * L <= Rp; r += kRowVectors * L)
    row_block_product<kRowVectors>(df, a + r, lda, b, bc, bx, ncols, depth, out + r, ldo, scale, accumulate);
  for (; r + 2 * L <= Rp; r += 2 * L) row_block_product<2>(df, a + r, lda, b, bc, bx, ncols, depth, out + r, ldo, scale, accumulate);
  for (; r < Rp; r += L) row_block_product<1>(df, a + r, lda, b, bc, bx, ncols, depth, out + r, ldo, scale, accumulate);
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

template <class Src>
void wide_scores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                 float* m) {
  const DF df;
  const std::int64_t R = packed_rows(it), Rp = padded_rows(it), kw = p.qk_dim + p.rope_dim;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  // Q transposed: q[x * Rp + r], padding rows zero. Rows are widened with SIMD into the K tile
  // buffer first when they fit there.
  std::fill(s.q, s.q + kw * Rp, 0.0f);
  if (R <= tile.cols) {
    using T = typename Src::T;
    const std::size_t es = sizeof(T);
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t n = it.query_head(p.group, r), i = it.query_row(r);
      widen_row<Src>(reinterpret_cast<const T*>(element_at(p.query.base, p.query.offset(it.b, n, i), es)), p.qk_dim, s.k + r * kw);
      if (p.rope_dim > 0)
        widen_row<Src>(reinterpret_cast<const T*>(element_at(p.query_rope.base, p.query_rope.offset(it.b, n, i), es)), p.rope_dim,
                       s.k + r * kw + p.qk_dim);
    }
    for (std::int64_t x = 0; x < kw; ++x)
      for (std::int64_t r = 0; r < R; ++r) s.q[x * Rp + r] = s.k[r * kw + x];
  } else {
    for (std::int64_t r = 0; r < R; ++r) load_query_row(p, it, r, s.q + r, Rp);
  }
  std::fill(m, m + Rp, kNegInf);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    widen_tile<Src>(p, it, c0, nc, true, s.k);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    panel_product(df, s.q, Rp, Rp, s.k, kw, 1, nc, kw, st, sv.col_stride, p.scale, false);
    if (!p.has_mask && !p.has_pse && band_fits_float(p, it, c0 + nc)) {
      if (!tile_fully_visible(p, it, c0, nc)) band_wide(df, p, it, c0, nc, st, sv.col_stride, Rp);
    } else {
      apply_visibility(p, it, sv, c0, nc);
    }
    for (std::int64_t r = 0; r < Rp; r += L) {
      VF vm = hn::Load(df, m + r);
      for (std::int64_t c = 0; c < nc; ++c) vm = hn::Max(vm, hn::Load(df, st + c * sv.col_stride + r));
      hn::Store(vm, df, m + r);
    }
  }
}

template <class Src>
void wide_accumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                     const float* m, float* l, float* acc) {
  const DF df;
  const std::int64_t R = packed_rows(it), Rp = padded_rows(it), vd = p.v_dim;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::fill(s.acc_t, s.acc_t + vd * Rp, 0.0f);
  std::fill(l, l + Rp, 0.0f);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    widen_tile<Src>(p, it, c0, nc, false, s.v);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    // E = exp(S - m), l += E, P = round(E) in place. Rows with m = -inf give 0 (NaN filtered by Exp).
    for (std::int64_t r = 0; r < Rp; r += L) {
      const VF vm = hn::Load(df, m + r);
      VF vl = hn::Load(df, l + r);
      for (std::int64_t c = 0; c < nc; ++c) {
        float* x = st + c * sv.col_stride + r;
        const VF e = hn::Exp(df, hn::Sub(hn::Load(df, x), vm));
        vl = hn::Add(vl, e);
        hn::Store(round_p(df, e, p.dtype), df, x);
      }
      hn::Store(vl, df, l + r);
    }
    // acc_t[d][r] += sum_c P[c][r] * V[c][d]
    panel_product(df, st, sv.col_stride, Rp, s.v, 1, vd, vd, nc, s.acc_t, Rp, 1.0f, true);
  }
  for (std::int64_t r = 0; r < R; ++r) {
    if (m[r] == kNegInf) l[r] = 0.0f;
    for (std::int64_t d = 0; d < vd; ++d) acc[r * vd + d] = s.acc_t[d * Rp + r];
  }
}

// ---- entry points ---------------------------------------------------------------------------

void ItemScores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv, float* m) {
  const bool wide = is_wide(it);
  switch (p.dtype) {
    case DType::F16: return wide ? wide_scores<F16Src>(p, tile, it, s, sv, m) : narrow_scores<F16Src>(p, tile, it, s, sv, m);
    case DType::BF16: return wide ? wide_scores<BF16Src>(p, tile, it, s, sv, m) : narrow_scores<BF16Src>(p, tile, it, s, sv, m);
    default: return wide ? wide_scores<F32Src>(p, tile, it, s, sv, m) : narrow_scores<F32Src>(p, tile, it, s, sv, m);
  }
}

void ItemAccumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                    const float* m, float* l, float* acc) {
  const bool wide = is_wide(it);
  switch (p.dtype) {
    case DType::F16:
      return wide ? wide_accumulate<F16Src>(p, tile, it, s, sv, m, l, acc) : narrow_accumulate<F16Src>(p, tile, it, s, sv, m, l, acc);
    case DType::BF16:
      return wide ? wide_accumulate<BF16Src>(p, tile, it, s, sv, m, l, acc) : narrow_accumulate<BF16Src>(p, tile, it, s, sv, m, l, acc);
    default:
      return wide ? wide_accumulate<F32Src>(p, tile, it, s, sv, m, l, acc) : narrow_accumulate<F32Src>(p, tile, it, s, sv, m, l, acc);
  }
}

const char* IsaName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fia::detail {

HWY_EXPORT(ItemScores);
HWY_EXPORT(ItemAccumulate);
HWY_EXPORT(IsaName);

void item_scores(const Problem& p, const TileShape& tile, const WorkItem& item, const ItemScratch& s, ScoreView scores,
                 float* m) {
  HWY_DYNAMIC_DISPATCH(ItemScores)(p, tile, item, s, scores, m);
}

void item_accumulate(const Problem& p, const TileShape& tile, const WorkItem& item, const ItemScratch& s,
                     ScoreView scores, const float* m, float* l, float* acc) {
  HWY_DYNAMIC_DISPATCH(ItemAccumulate)(p, tile, item, s, scores, m, l, acc);
}

const char* kernel_isa() { return HWY_DYNAMIC_DISPATCH(IsaName)(); }

void item_finalize(const Problem& p, const WorkItem& item, const float* m, const float* l, float* acc,
                   const OutputRows& dst) {
  const std::int64_t G = p.group, vd = p.v_dim;
  const std::int64_t R = packed_rows(item);
  const std::size_t out_es = dtype_size(p.out_dtype);
  for (std::int64_t r = 0; r < R; ++r) {
    if (m[r] == kNegInf) continue;  // fully masked: 0 / +inf (25.1 #1)
    const std::int64_t n = item.query_head(G, r), i = item.query_row(r);
    float norm, lse;
    if (p.has_sink) {  // section 16, stabilised with max(m, sink)
      const float sink = p.sink[n];
      const float m2 = std::max(m[r], sink);
      const float denom = l[r] * std::exp(m[r] - m2) + std::exp(sink - m2);
      norm = std::exp(m[r] - m2) / denom;
      lse = m2 + std::log(denom);
    } else {
      norm = 1.0f / l[r];
      lse = m[r] + std::log(l[r]);  // section 17
    }
    float* ar = acc + r * vd;
    for (std::int64_t d = 0; d < vd; ++d) ar[d] *= norm;
    auto* orow = static_cast<std::byte*>(const_cast<void*>(dst.out.base)) +
                 dst.out.offset(item.b, n, i) * static_cast<std::int64_t>(out_es);
    store_row(ar, vd, p.out_dtype, orow);
    if (p.lse) static_cast<float*>(const_cast<void*>(dst.lse.base))[dst.lse.offset(item.b, n, i)] = lse;
  }
}

}  // namespace fia::detail
#endif  // HWY_ONCE
