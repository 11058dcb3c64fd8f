// SIMD kernels of phases A and B (see attention_item.hpp), compiled once per instruction set with
// Highway and dispatched at run time; phase C is plain C++ at the end of this file.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/attention_item.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
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

/// acc += dot products of up to 4 query rows with one K row of n elements.
template <class Src>
HWY_INLINE void dot4(DF df, const float* q, std::int64_t q_stride, std::int64_t rows, const typename Src::T* k,
                     std::int64_t n, float* out) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  std::int64_t d = 0;
  for (; d + L <= n; d += L) {
    const VF kv = Src::load(df, k + d);
    a0 = hn::MulAdd(hn::LoadU(df, q + d), kv, a0);
    if (rows > 1) a1 = hn::MulAdd(hn::LoadU(df, q + q_stride + d), kv, a1);
    if (rows > 2) a2 = hn::MulAdd(hn::LoadU(df, q + 2 * q_stride + d), kv, a2);
    if (rows > 3) a3 = hn::MulAdd(hn::LoadU(df, q + 3 * q_stride + d), kv, a3);
  }
  float s[4] = {hn::GetLane(hn::SumOfLanes(df, a0)), hn::GetLane(hn::SumOfLanes(df, a1)),
                hn::GetLane(hn::SumOfLanes(df, a2)), hn::GetLane(hn::SumOfLanes(df, a3))};
  for (; d < n; ++d) {
    const float kd = Src::one(k + d);
    for (std::int64_t r = 0; r < rows; ++r) s[r] += q[r * q_stride + d] * kd;
  }
  for (std::int64_t r = 0; r < rows; ++r) out[r] += s[r];
}

template <class Src>
void narrow_scores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                   float* m) {
  using T = typename Src::T;
  const DF df;
  const std::int64_t R = packed_rows(it), kw = p.qk_dim + p.rope_dim;
  for (std::int64_t r = 0; r < R; ++r) load_query_row(p, it, r, s.q + r * kw, 1);
  std::fill(m, m + R, kNegInf);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    for_each_run(p, it.b, it.h, c0, nc, [&](std::int64_t c, const KvRun& run) {
      const T* k = static_cast<const T*>(run.key);
      const T* kr = static_cast<const T*>(run.key_rope);
      for (std::int64_t t = 0; t < run.count; ++t) {
        float dots[4];
        for (std::int64_t r0 = 0; r0 < R; r0 += 4) {
          const std::int64_t rows = std::min<std::int64_t>(4, R - r0);
          std::fill(dots, dots + 4, 0.0f);
          dot4<Src>(df, s.q + r0 * kw, kw, rows, k + t * run.key_stride, p.qk_dim, dots);
          if (p.rope_dim > 0) dot4<Src>(df, s.q + r0 * kw + p.qk_dim, kw, rows, kr + t * run.rope_stride, p.rope_dim, dots);
          for (std::int64_t r = 0; r < rows; ++r)
            sv.base[(r0 + r) * sv.row_stride + (c0 - it.col_begin + c + t)] = saturate(dots[r] * p.scale);
        }
      }
    });
    apply_visibility(p, it, sv, c0, nc);
    for (std::int64_t r = 0; r < R; ++r) {
      const float* row = sv.base + r * sv.row_stride + (c0 - it.col_begin);
      m[r] = std::max(m[r], *std::max_element(row, row + nc));
    }
  }
}

/// acc[r][0:vd) += p[r] * v for up to 4 tokens at once (p: rows x 4, stride 4).
template <class Src>
HWY_INLINE void axpy_rows(DF df, const float* pw, std::int64_t rows, const typename Src::T* const* v, std::int64_t tokens,
                          std::int64_t vd, float* acc) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t d = 0;
  for (; d + L <= vd; d += L) {
    const VF v0 = Src::load(df, v[0] + d);
    const VF v1 = tokens > 1 ? Src::load(df, v[1] + d) : hn::Zero(df);
    const VF v2 = tokens > 2 ? Src::load(df, v[2] + d) : hn::Zero(df);
    const VF v3 = tokens > 3 ? Src::load(df, v[3] + d) : hn::Zero(df);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* w = pw + r * 4;
      VF a = hn::LoadU(df, acc + r * vd + d);
      a = hn::MulAdd(hn::Set(df, w[0]), v0, a);
      a = hn::MulAdd(hn::Set(df, w[1]), v1, a);
      a = hn::MulAdd(hn::Set(df, w[2]), v2, a);
      a = hn::MulAdd(hn::Set(df, w[3]), v3, a);
      hn::StoreU(a, df, acc + r * vd + d);
    }
  }
  for (; d < vd; ++d)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t t = 0; t < tokens; ++t) acc[r * vd + d] += pw[r * 4 + t] * Src::one(v[t] + d);
}

template <class Src>
void narrow_accumulate(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                       const float* m, float* l, float* acc) {
  using T = typename Src::T;
  const DF df;
  const std::int64_t R = packed_rows(it), vd = p.v_dim;
  std::fill(l, l + R, 0.0f);
  std::fill(acc, acc + R * vd, 0.0f);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    for (std::int64_t r = 0; r < R; ++r) {
      float* row = sv.base + r * sv.row_stride + (c0 - it.col_begin);
      if (m[r] == kNegInf) std::fill(row, row + nc, 0.0f);
      else l[r] += exp_row(df, row, nc, m[r], p.dtype);
    }
    for_each_run(p, it.b, it.h, c0, nc, [&](std::int64_t c, const KvRun& run) {
      const T* v = static_cast<const T*>(run.value);
      for (std::int64_t t = 0; t < run.count; t += 4) {
        const std::int64_t tokens = std::min<std::int64_t>(4, run.count - t);
        const T* rows_v[4];
        for (std::int64_t k = 0; k < 4; ++k) rows_v[k] = v + (t + std::min(k, tokens - 1)) * run.value_stride;
        float pw[4 * 16];
        for (std::int64_t r0 = 0; r0 < R; r0 += 16) {
          const std::int64_t rows = std::min<std::int64_t>(16, R - r0);
          for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t k = 0; k < 4; ++k)
              pw[r * 4 + k] = k < tokens ? sv.base[(r0 + r) * sv.row_stride + (c0 - it.col_begin + c + t + k)] : 0.0f;
          axpy_rows<Src>(df, pw, rows, rows_v, tokens, vd, acc + r0 * vd);
        }
      }
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
/// `accumulate` the sum is added to out instead (scale unused).
template <int NV, int NC>
HWY_INLINE void block_product(DF df, const float* a, std::int64_t lda, const float* b, std::int64_t bc, std::int64_t bx,
                              std::int64_t depth, float* out, std::int64_t ldo, float scale, bool accumulate) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  VF c00 = hn::Zero(df), c01 = hn::Zero(df), c02 = hn::Zero(df), c03 = hn::Zero(df), c04 = hn::Zero(df), c05 = hn::Zero(df);
  VF c10 = hn::Zero(df), c11 = hn::Zero(df), c12 = hn::Zero(df), c13 = hn::Zero(df), c14 = hn::Zero(df), c15 = hn::Zero(df);
  for (std::int64_t x = 0; x < depth; ++x) {
    const VF a0 = hn::Load(df, a + x * lda);
    const VF a1 = NV > 1 ? hn::Load(df, a + x * lda + L) : a0;
    const float* bcol = b + x * bx;
#define FIA_COLUMN(n)                                 \
  if constexpr (NC > n) {                             \
    const VF bn = hn::Set(df, bcol[n * bc]);          \
    c0##n = hn::MulAdd(a0, bn, c0##n);                \
    if constexpr (NV > 1) c1##n = hn::MulAdd(a1, bn, c1##n); \
  }
    FIA_COLUMN(0)
    FIA_COLUMN(1)
    FIA_COLUMN(2)
    FIA_COLUMN(3)
    FIA_COLUMN(4)
    FIA_COLUMN(5)
#undef FIA_COLUMN
  }
  const VF vs = hn::Set(df, scale);
  const VF lo = hn::Set(df, -std::numeric_limits<float>::max()), hi = hn::Set(df, std::numeric_limits<float>::max());
  auto scaled = [&](VF v) { return hn::Min(hn::Max(hn::Mul(v, vs), lo), hi); };
#define FIA_STORE(n)                                                                                 \
  if constexpr (NC > n) {                                                                            \
    float* o = out + n * ldo;                                                                        \
    hn::Store(accumulate ? hn::Add(hn::Load(df, o), c0##n) : scaled(c0##n), df, o);                  \
    if constexpr (NV > 1) hn::Store(accumulate ? hn::Add(hn::Load(df, o + L), c1##n) : scaled(c1##n), df, o + L); \
  }
  FIA_STORE(0)
  FIA_STORE(1)
  FIA_STORE(2)
  FIA_STORE(3)
  FIA_STORE(4)
  FIA_STORE(5)
#undef FIA_STORE
}

/// out[c][0:Rp) (stride ldo) = scale * sum_x a[x][0:Rp) * b(c, x) for c < ncols, or += when
/// accumulating; b(c, x) = b[c * bc + x * bx]. Rp is a multiple of the lane count.
HWY_INLINE void panel_product(DF df, const float* a, std::int64_t lda, std::int64_t Rp, const float* b, std::int64_t bc,
                              std::int64_t bx, std::int64_t ncols, std::int64_t depth, float* out, std::int64_t ldo,
                              float scale, bool accumulate) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t r = 0;
  for (; r + 2 * L <= Rp; r += 2 * L) {
    std::int64_t c = 0;
    for (; c + 6 <= ncols; c += 6)
      block_product<2, 6>(df, a + r, lda, b + c * bc, bc, bx, depth, out + c * ldo + r, ldo, scale, accumulate);
    for (; c < ncols; ++c)
      block_product<2, 1>(df, a + r, lda, b + c * bc, bc, bx, depth, out + c * ldo + r, ldo, scale, accumulate);
  }
  for (; r < Rp; r += L) {
    std::int64_t c = 0;
    for (; c + 6 <= ncols; c += 6)
      block_product<1, 6>(df, a + r, lda, b + c * bc, bc, bx, depth, out + c * ldo + r, ldo, scale, accumulate);
    for (; c < ncols; ++c)
      block_product<1, 1>(df, a + r, lda, b + c * bc, bc, bx, depth, out + c * ldo + r, ldo, scale, accumulate);
  }
}

template <class Src>
void wide_scores(const Problem& p, const TileShape& tile, const WorkItem& it, const ItemScratch& s, ScoreView sv,
                 float* m) {
  const DF df;
  const std::int64_t R = packed_rows(it), Rp = padded_rows(it), kw = p.qk_dim + p.rope_dim;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  // Q transposed: q[x * Rp + r], padding rows zero.
  std::fill(s.q, s.q + kw * Rp, 0.0f);
  for (std::int64_t r = 0; r < R; ++r) load_query_row(p, it, r, s.q + r, Rp);
  std::fill(m, m + Rp, kNegInf);
  for (std::int64_t c0 = it.col_begin; c0 < it.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, it.col_end - c0);
    widen_tile<Src>(p, it, c0, nc, true, s.k);
    float* st = sv.base + (c0 - it.col_begin) * sv.col_stride;
    panel_product(df, s.q, Rp, Rp, s.k, kw, 1, nc, kw, st, sv.col_stride, p.scale, false);
    apply_visibility(p, it, sv, c0, nc);
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
