// SIMD kernel of int8 full quantization (see cpu/full_quant.hpp), compiled once per instruction
// set with Highway. Every step rounds as reference/full_quant.cpp does (separate multiply and add,
// never fused: this file is built with -ffp-contract=off).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/full_quant.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/full_quant.hpp"
#include "cpu/item_common.hpp"
#include "numeric/full_quant.hpp"

#ifndef FIA_CPU_FULL_QUANT_LAYOUT_
#define FIA_CPU_FULL_QUANT_LAYOUT_
namespace fia::detail {
namespace {

constexpr std::int64_t kRows = 32;        // packed rows per item at most
constexpr std::int64_t kLanePad = 64;     // int32 lanes of the widest vector Highway may target
constexpr std::int64_t kTileMax = 2 * kLanePad;  // K tile columns: two vectors of int32 lanes
constexpr std::int64_t kVTile = 64;       // V tile columns (32 pairs)
constexpr std::int64_t kScoreCols = kFullQuantChunk + kTileMax;  // per row: a chunk and its padding

std::int64_t up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

/// The per-worker scratch of an item, carved from one float buffer (all pieces 64-byte aligned).
struct Buffers {
  std::int16_t* q;    // R x Dp: query rows as int16
  std::int16_t* kt;   // (Dp / 2) x tile x 2: K tile, pair-interleaved
  float* s;           // R x kScoreCols: the chunk's fp16 scores (-inf: excluded)
  std::int16_t* pq;   // R x kScoreCols: the chunk's int8 P as int16
  std::int16_t* vt;   // (kVTile / 2) x VDp x 2: V tile, pair-interleaved
  std::int32_t* acc;  // R x VDp: the chunk's int32 P·V
  float* o;           // R x VDp: the output accumulator
  float *m, *l, *alpha, *seen, *hit;  // per row
};

/// Carves the buffers from `base` (null: only sizes them); returns the bytes used. Row strides of
/// acc and o are up(VD, 4 * lanes) of the running target, at most VDp here.
std::int64_t buffer_bytes(std::int64_t D, std::int64_t VD, Buffers* b, std::byte* base) {
  const std::int64_t Dp = up(D, 2), VDp = up(VD, 4 * kLanePad);
  std::int64_t off = 0;
  auto take = [&](std::int64_t bytes) {
    std::byte* p = base ? base + off : nullptr;
    off += up(bytes, 64);
    return p;
  };
  Buffers x;
  x.q = reinterpret_cast<std::int16_t*>(take(kRows * Dp * 2));
  x.kt = reinterpret_cast<std::int16_t*>(take(Dp * kTileMax * 2));
  x.s = reinterpret_cast<float*>(take(kRows * kScoreCols * 4));
  x.pq = reinterpret_cast<std::int16_t*>(take(kRows * kScoreCols * 2));
  x.vt = reinterpret_cast<std::int16_t*>(take(kVTile * VDp * 2));
  x.acc = reinterpret_cast<std::int32_t*>(take(kRows * VDp * 4));
  x.o = reinterpret_cast<float*>(take(kRows * VDp * 4));
  float** rows[] = {&x.m, &x.l, &x.alpha, &x.seen, &x.hit};
  for (float** r : rows) *r = reinterpret_cast<float*>(take(kRows * 4));
  if (b) *b = x;
  return off;
}

}  // namespace
}  // namespace fia::detail
#endif  // FIA_CPU_FULL_QUANT_LAYOUT_

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::ScalableTag<std::int32_t>;
using DW = hn::Repartition<std::int16_t, DI>;  // the same bytes as int16 pairs
using DH = hn::Rebind<std::int16_t, DI>;       // one int16 per int32 lane
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

/// x (|x| <= 65504) rounded to fp16, nearest even: 10 mantissa bits for normal values, the
/// subnormal quantum 2^-24 below 2^-14 (0.5 has that float ulp).
HWY_INLINE VF round_f16(DF df, VF x) {
  const hn::RebindToUnsigned<DF> du;
  auto u = hn::BitCast(du, x);
  const auto lsb = hn::And(hn::ShiftRight<13>(u), hn::Set(du, 1u));
  u = hn::And(hn::Add(u, hn::Add(hn::Set(du, 0xFFFu), lsb)), hn::Set(du, 0xFFFFE000u));
  const VF a = hn::Abs(x), half = hn::Set(df, 0.5f);
  const VF sub = hn::CopySign(hn::Sub(hn::Add(a, half), half), x);
  return hn::IfThenElse(hn::Lt(a, hn::Set(df, 0x1p-14f)), sub, hn::BitCast(df, u));
}

HWY_INLINE VF clamp_f16(DF df, VF x) {
  return round_f16(df, hn::Min(hn::Max(x, hn::Set(df, -kF16Max)), hn::Set(df, kF16Max)));
}

HWY_INLINE VI pair_at(DI di, const std::int16_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return hn::Set(di, v);
}

#if HWY_TARGET == HWY_SCALAR
// One-lane target: the same sums in plain integer arithmetic.
template <int NR>
HWY_INLINE void score_block(const std::int16_t* q, std::int64_t Dp, const std::int16_t* kt, std::int64_t tc,
                            float* s, float dequant1, float scale16) {
  for (std::int64_t r = 0; r < NR; ++r)
    for (std::int64_t c = 0; c < tc; ++c) {
      std::int32_t dot = 0;
      for (std::int64_t x = 0; x < Dp; ++x) dot += q[r * Dp + x] * kt[((x / 2) * tc + c) * 2 + x % 2];
      s[r * kScoreCols + c] = full_quant_score(dot, dequant1, scale16);
    }
}

template <int NR>
HWY_INLINE void pv_block(const std::int16_t* pq, const std::int16_t* vt, std::int64_t VDp, std::int64_t pairs,
                         std::int32_t* acc) {
  for (std::int64_t r = 0; r < NR; ++r)
    for (std::int64_t d = 0; d < 4; ++d)
      for (std::int64_t c = 0; c < 2 * pairs; ++c)
        acc[r * VDp + d] += pq[r * kScoreCols + c] * vt[((c / 2) * VDp + d) * 2 + c % 2];
}
#else
/// Scores of NR packed rows x two column vectors of the K tile (`tc` columns, pair-interleaved),
/// through the fp16 steps of 13.1, stored at s (row stride kScoreCols).
template <int NR>
HWY_INLINE void score_block(const std::int16_t* q, std::int64_t Dp, const std::int16_t* kt, std::int64_t tc,
                            float* s, float dequant1, float scale16) {
  const DI di;
  const DW dw;
  const DF df;
  const std::int64_t NL = static_cast<std::int64_t>(hn::Lanes(di));
#define FIA_ZERO2(r) VI a##r##0 = hn::Zero(di), a##r##1 = hn::Zero(di), b##r##0 = hn::Zero(di), b##r##1 = hn::Zero(di);
  FIA_ZERO2(0) FIA_ZERO2(1) FIA_ZERO2(2) FIA_ZERO2(3)
#undef FIA_ZERO2
  for (std::int64_t dp = 0; dp < Dp / 2; ++dp) {
    const auto k0 = hn::LoadU(dw, kt + dp * tc * 2);
    const auto k1 = hn::LoadU(dw, kt + dp * tc * 2 + 2 * NL);
#define FIA_ROW(r)                                                               \
  if constexpr (NR > r) {                                                        \
    const auto qv = hn::BitCast(dw, pair_at(di, q + r * Dp + 2 * dp));           \
    a##r##0 = hn::ReorderWidenMulAccumulate(di, qv, k0, a##r##0, b##r##0);       \
    a##r##1 = hn::ReorderWidenMulAccumulate(di, qv, k1, a##r##1, b##r##1);       \
  }
    FIA_ROW(0) FIA_ROW(1) FIA_ROW(2) FIA_ROW(3)
#undef FIA_ROW
  }
  const VF dq = hn::Set(df, dequant1), sc = hn::Set(df, scale16);
  auto put = [&](VI a, VI b, float* dst) {
    const VF x = clamp_f16(df, hn::Mul(hn::ConvertTo(df, hn::RearrangeToOddPlusEven(a, b)), dq));
    hn::StoreU(clamp_f16(df, hn::Mul(x, sc)), df, dst);
  };
#define FIA_PUT(r)                                               \
  if constexpr (NR > r) {                                        \
    put(a##r##0, b##r##0, s + r * kScoreCols);                   \
    put(a##r##1, b##r##1, s + r * kScoreCols + NL);              \
  }
  FIA_PUT(0) FIA_PUT(1) FIA_PUT(2) FIA_PUT(3)
#undef FIA_PUT
}

/// acc[r][d] += sum over the V tile's pairs of P(r, pair) · V(pair, d) for NR rows and four
/// vectors of d from d0 (P as int16 pairs at pq, row stride kScoreCols).
template <int NR>
HWY_INLINE void pv_block(const std::int16_t* pq, const std::int16_t* vt, std::int64_t VDp, std::int64_t pairs,
                         std::int32_t* acc) {
  const DI di;
  const DW dw;
  const std::int64_t NL = static_cast<std::int64_t>(hn::Lanes(di));
#define FIA_ZERO4(r)                                                                                    \
  VI a##r##0 = hn::Zero(di), a##r##1 = hn::Zero(di), a##r##2 = hn::Zero(di), a##r##3 = hn::Zero(di);    \
  VI b##r##0 = hn::Zero(di), b##r##1 = hn::Zero(di), b##r##2 = hn::Zero(di), b##r##3 = hn::Zero(di);
  FIA_ZERO4(0) FIA_ZERO4(1)
#undef FIA_ZERO4
  for (std::int64_t cp = 0; cp < pairs; ++cp) {
    const std::int16_t* v = vt + cp * VDp * 2;
    const auto v0 = hn::LoadU(dw, v), v1 = hn::LoadU(dw, v + 2 * NL);
    const auto v2 = hn::LoadU(dw, v + 4 * NL), v3 = hn::LoadU(dw, v + 6 * NL);
#define FIA_ROW(r)                                                            \
  if constexpr (NR > r) {                                                     \
    const auto pv = hn::BitCast(dw, pair_at(di, pq + r * kScoreCols + 2 * cp)); \
    a##r##0 = hn::ReorderWidenMulAccumulate(di, pv, v0, a##r##0, b##r##0);    \
    a##r##1 = hn::ReorderWidenMulAccumulate(di, pv, v1, a##r##1, b##r##1);    \
    a##r##2 = hn::ReorderWidenMulAccumulate(di, pv, v2, a##r##2, b##r##2);    \
    a##r##3 = hn::ReorderWidenMulAccumulate(di, pv, v3, a##r##3, b##r##3);    \
  }
    FIA_ROW(0) FIA_ROW(1)
#undef FIA_ROW
  }
  auto add = [&](VI a, VI b, std::int32_t* dst) {
    hn::StoreU(hn::Add(hn::LoadU(di, dst), hn::RearrangeToOddPlusEven(a, b)), di, dst);
  };
#define FIA_ADD(r)                                                                                  \
  if constexpr (NR > r) {                                                                           \
    std::int32_t* row = acc + r * VDp;                                                              \
    add(a##r##0, b##r##0, row), add(a##r##1, b##r##1, row + NL), add(a##r##2, b##r##2, row + 2 * NL), \
        add(a##r##3, b##r##3, row + 3 * NL);                                                        \
  }
  FIA_ADD(0) FIA_ADD(1)
#undef FIA_ADD
}

#endif  // HWY_TARGET == HWY_SCALAR

/// Copies `count` token rows of an int8 K or V tensor (first token c0 of batch b, KV head h) into
/// a pair-interleaved int16 tile: element (c, x) at tile[((x / 2) * ld + c) * 2 + x % 2] for the
/// K layout (ld = tile columns) or tile[((c / 2) * ld + x) * 2 + c % 2] for the V layout (ld =
/// VDp). Missing columns and elements stay as zeroed by the caller.
void load_tile(const Problem& p, const WorkItem& it, bool value, std::int64_t c0, std::int64_t count,
               std::int64_t dim, std::int64_t ld, std::int16_t* tile) {
  for_each_run(p, it.b, it.h, c0, count, [&](std::int64_t c, const KvRun& run) {
    for (std::int64_t t = 0; t < run.count; ++t) {
      const auto* row = static_cast<const std::int8_t*>(value ? run.value : run.key) +
                        t * (value ? run.value_stride : run.key_stride);
      const std::int64_t cc = c + t;
      if (value) {
        std::int16_t* dst = tile + (cc / 2) * ld * 2 + cc % 2;
        for (std::int64_t x = 0; x < dim; ++x) dst[x * 2] = row[x];
      } else {
        std::int16_t* dst = tile + cc * 2;
        for (std::int64_t x = 0; x < dim; ++x) dst[(x / 2) * ld * 2 + x % 2] = row[x];
      }
    }
  });
}

/// The scores of every packed row over columns [cb, cb + nc) of the chunk (padded to whole
/// tiles), with masks, band and pse applied (excluded: -inf).
void chunk_scores(const Problem& p, const WorkItem& it, const Buffers& bf, std::int64_t cb, std::int64_t nc) {
  const std::int64_t R = packed_rows(it), D = p.qk_dim, Dp = up(D, 2);
  const std::int64_t tc = 2 * static_cast<std::int64_t>(hn::Lanes(DI()));
  const auto& fq = p.full_quant;
  for (std::int64_t t0 = 0; t0 < nc; t0 += tc) {
    const std::int64_t n = std::min(tc, nc - t0);
    std::fill(bf.kt, bf.kt + Dp * tc, std::int16_t{0});
    load_tile(p, it, false, cb + t0, n, D, tc, bf.kt);
    std::int64_t r = 0;
    for (; r + 4 <= R; r += 4)
      score_block<4>(bf.q + r * Dp, Dp, bf.kt, tc, bf.s + r * kScoreCols + t0, fq.dequant1, fq.scale16);
    for (; r < R; ++r) score_block<1>(bf.q + r * Dp, Dp, bf.kt, tc, bf.s + r * kScoreCols + t0, fq.dequant1, fq.scale16);
    const bool full = tile_fully_visible(p, it, cb + t0, n);
    for (r = 0; r < R; ++r) {
      float* row = bf.s + r * kScoreCols + t0;
      for (std::int64_t c = n; c < tc; ++c) row[c] = kNegInf;  // padding columns
      if (full && !p.has_pse) continue;
      const std::int64_t hn_ = it.query_head(p.group, r), i = it.query_row(r), b = it.b;
      for (std::int64_t c = 0; c < n; ++c) {
        const std::int64_t j = cb + t0 + c;
        if (!full && (j < i + p.band_lo[b] || j > i + p.band_hi[b] || (p.has_mask && p.masked(b, i, j)))) {
          row[c] = kNegInf;
        } else if (p.has_pse) {  // "A + pse (fp16)"; a pse of -inf excludes the key
          const BiasIndex& x = p.pse;
          const float bias = load_one(x.base, x.dtype,
                                      b * x.batch_stride + hn_ * x.head_stride + (p.q_start[b] + i) * x.row_stride +
                                          (j + p.kv_col_offset[b]) * x.col_stride);
          row[c] = bias == kNegInf ? kNegInf : clamp_to_f16(row[c] + clamp_to_f16(bias));
        }
      }
    }
  }
}

/// The online softmax of one row over the chunk's ncp scores: E = fp16(exp(A - m_new)), P =
/// int8(fp16(E * quant1)) into pq; updates m, l and the rescaling factor of the row.
void chunk_softmax_row(const Problem& p, const Buffers& bf, std::int64_t r, std::int64_t ncp) {
  const DF df;
  const DI di;
  const DH dh;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  float* s = bf.s + r * kScoreCols;
  std::int16_t* pq = bf.pq + r * kScoreCols;
  VF vmax = hn::Set(df, kNegInf);
  for (std::int64_t c = 0; c < ncp; c += L) vmax = hn::Max(vmax, hn::LoadU(df, s + c));
  const float mc = hn::GetLane(hn::MaxOfLanes(df, vmax));
  bf.hit[r] = mc != kNegInf;
  if (mc == kNegInf) {
    std::fill(pq, pq + ncp, std::int16_t{0});
    return;
  }
  const float m_old = bf.m[r], m_new = std::max(m_old, mc);
  const VF vm = hn::Set(df, m_new), q1 = hn::Set(df, p.full_quant.quant1);
  const VF lo = hn::Set(df, -128.0f), hi = hn::Set(df, 127.0f);
  VF sum = hn::Zero(df);
  for (std::int64_t c = 0; c < ncp; c += L) {
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, s + c), vm));
    sum = hn::Add(sum, e);
    const VF y = clamp_f16(df, hn::Mul(round_f16(df, e), q1));
    const VI pi = hn::ConvertTo(di, hn::Min(hn::Max(hn::Round(y), lo), hi));
    hn::StoreU(hn::DemoteTo(dh, pi), dh, pq + c);
  }
  const double alpha = std::exp(static_cast<double>(m_old) - m_new);
  bf.alpha[r] = round_to_f16(static_cast<float>(alpha));
  bf.l[r] = static_cast<float>(bf.l[r] * alpha) + hn::GetLane(hn::SumOfLanes(df, sum));
  bf.m[r] = m_new;
}

/// Folds the chunk's P·V into the rows' outputs: the first visible chunk in fp32, later ones as
/// fp16 partials with fp16 accumulation (13.1).
void fold_chunk(const Problem& p, const Buffers& bf, std::int64_t R, std::int64_t VDp) {
  const DF df;
  const DI di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF dq2 = hn::Set(df, p.full_quant.dequant2);
  for (std::int64_t r = 0; r < R; ++r) {
    if (bf.hit[r] == 0.0f) continue;
    float* o = bf.o + r * VDp;
    const std::int32_t* acc = bf.acc + r * VDp;
    const bool first = bf.seen[r] == 0.0f;
    const VF alpha = hn::Set(df, bf.alpha[r]);
    for (std::int64_t d = 0; d < VDp; d += L) {
      const VF oj = hn::Mul(hn::ConvertTo(df, hn::LoadU(di, acc + d)), dq2);
      const VF next = first ? oj : clamp_f16(df, hn::Add(hn::Mul(hn::LoadU(df, o + d), alpha), clamp_f16(df, oj)));
      hn::StoreU(next, df, o + d);
    }
    bf.seen[r] = 1.0f;
  }
}

void FullQuantItem(const Problem& p, const WorkItem& it, float* scratch, const OutputRows& dst) {
  Buffers bf;
  buffer_bytes(p.qk_dim, p.v_dim, &bf, reinterpret_cast<std::byte*>(scratch));
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(DI()));
  const std::int64_t R = packed_rows(it), D = p.qk_dim, Dp = up(D, 2), VD = p.v_dim, VDp = up(VD, 4 * lanes);
  const std::int64_t tc = 2 * lanes;
  for (std::int64_t r = 0; r < R; ++r) {
    const auto* q = static_cast<const std::int8_t*>(p.query.base) +
                    p.query.offset(it.b, it.query_head(p.group, r), it.query_row(r));
    std::int16_t* qr = bf.q + r * Dp;
    for (std::int64_t d = 0; d < Dp; ++d) qr[d] = d < D ? q[d] : 0;
    bf.m[r] = kNegInf;
    bf.l[r] = 0.0f;
    bf.seen[r] = 0.0f;
  }
  std::fill(bf.o, bf.o + R * VDp, 0.0f);
  for (std::int64_t k = it.col_begin / kFullQuantChunk; k * kFullQuantChunk < it.col_end; ++k) {
    const std::int64_t cb = std::max(it.col_begin, k * kFullQuantChunk);
    const std::int64_t nc = std::min(it.col_end, (k + 1) * kFullQuantChunk) - cb, ncp = up(nc, tc);
    chunk_scores(p, it, bf, cb, nc);
    for (std::int64_t r = 0; r < R; ++r) chunk_softmax_row(p, bf, r, ncp);
    std::fill(bf.acc, bf.acc + R * VDp, 0);
    const std::int64_t dv = 4 * lanes;
    for (std::int64_t v0 = 0; v0 < nc; v0 += kVTile) {
      const std::int64_t n = std::min(kVTile, nc - v0), pairs = (n + 1) / 2;
      std::fill(bf.vt, bf.vt + kVTile * VDp, std::int16_t{0});
      load_tile(p, it, true, cb + v0, n, VD, VDp, bf.vt);
      for (std::int64_t d0 = 0; d0 < VD; d0 += dv) {
        std::int64_t r = 0;
        for (; r + 2 <= R; r += 2)
          pv_block<2>(bf.pq + r * kScoreCols + v0, bf.vt + d0 * 2, VDp, pairs, bf.acc + r * VDp + d0);
        for (; r < R; ++r) pv_block<1>(bf.pq + r * kScoreCols + v0, bf.vt + d0 * 2, VDp, pairs, bf.acc + r * VDp + d0);
      }
    }
    fold_chunk(p, bf, R, VDp);
  }
  std::vector<float> row(static_cast<std::size_t>(VD));
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t n = it.query_head(p.group, r), i = it.query_row(r);
    auto* orow = static_cast<std::byte*>(const_cast<void*>(dst.out.base)) +
                 dst.out.offset(it.b, n, i) * static_cast<std::int64_t>(dtype_size(p.out_dtype));
    if (bf.seen[r] == 0.0f) {  // fully masked: 0 (or quantize(0)) / +inf
      write_output_row(p, n, nullptr, orow);
      continue;
    }
    const float l16 = clamp_to_f16(bf.l[r]);
    for (std::int64_t d = 0; d < VD; ++d) row[d] = bf.o[r * VDp + d] / l16;
    write_output_row(p, n, row.data(), orow);
    if (p.lse)
      static_cast<float*>(const_cast<void*>(dst.lse.base))[dst.lse.offset(it.b, n, i)] = std::log(bf.l[r]) + bf.m[r];
  }
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fia::detail {

HWY_EXPORT(FullQuantItem);

void full_quant_item(const Problem& p, const WorkItem& item, float* scratch, const OutputRows& dst) {
  HWY_DYNAMIC_DISPATCH(FullQuantItem)(p, item, scratch, dst);
}

CpuPlan make_full_quant_plan(const Problem& p, int threads) {
  CpuPlan plan;
  const std::int64_t G = p.group, heads = std::min(G, kRows), rows = std::max<std::int64_t>(1, kRows / heads);
  double work = 0.0;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.num_kv_heads; ++h)
      for (std::int64_t g0 = 0; g0 < G; g0 += heads)
        for (std::int64_t r = 0; r < p.act_q[b]; r += rows) {
          WorkItem it;
          it.b = b;
          it.h = h;
          it.head0 = g0;
          it.heads = std::min(heads, G - g0);
          it.row_begin = r;
          it.row_end = std::min(r + rows, p.act_q[b]);
          std::int64_t lo, hi;
          visible_columns(p, b, it.row_begin, it.row_end, &lo, &hi);
          if (lo > hi) continue;  // every row fully masked: stays 0 / +inf
          it.col_begin = lo;
          it.col_end = hi + 1;
          work += static_cast<double>(packed_rows(it)) * static_cast<double>(hi + 1 - lo) *
                  static_cast<double>(p.qk_dim + p.v_dim);
          plan.items.push_back(it);
        }
  const std::size_t widest = work < PlanLimits{}.serial_work ? 1 : plan.items.size();
  plan.threads = static_cast<int>(std::clamp<std::size_t>(widest, 1, static_cast<std::size_t>(std::max(threads, 1))));
  plan.floats_per_thread = static_cast<std::size_t>(buffer_bytes(p.qk_dim, p.v_dim, nullptr, nullptr)) / sizeof(float);
  plan.workspace_bytes = plan.items.empty() ? 0 : plan.floats_per_thread * plan.threads * sizeof(float) + 64;
  return plan;
}

}  // namespace fia::detail
#endif  // HWY_ONCE
