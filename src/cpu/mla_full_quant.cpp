// SIMD kernel of MLA full quantization (see cpu/mla_full_quant.hpp), compiled once per
// instruction set with Highway. Multiplies and adds stay separate (-ffp-contract=off) so that the
// f32 steps round alike on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/mla_full_quant.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/full_quant.hpp"
#include "cpu/full_quant_layout.hpp"
#include "cpu/item_common.hpp"
#include "cpu/mla_full_quant.hpp"
#include "numeric/full_quant.hpp"
#include "numeric/half.hpp"

#include "cpu/full_quant_products-inl.h"
#include "cpu/full_quant_tiles-inl.h"
#include "cpu/softmax_exp-inl.h"

#ifndef FIA_CPU_MLA_FULL_QUANT_LAYOUT_
#define FIA_CPU_MLA_FULL_QUANT_LAYOUT_
namespace fia::detail {
namespace {

using fq::kKTile;
using fq::kLanePad;
using fq::kRowsPad;
using fq::kVTile;
using fq::up;
constexpr std::int64_t kChunk = kMlaFullQuantChunk;

/// The per-worker scratch of an item, carved from one float buffer, every piece 64-byte aligned.
/// Rows are padded to Rp, a multiple of the running target's int32 lanes (at most kRowsPad).
struct Buffers {
  std::int32_t* q;    // (D / G) x Rp: query groups, transposed
  float* qr;          // rope_dim x Rp: query rope, transposed
  std::byte* k;       // kKTile rows of K groups (int16 pairs, or bytes offset by 128)
  float* kr;          // kKTile x rope_dim: key rope as f32
  float* s;           // kChunk x Rp: the chunk's scores, column-major (-inf: excluded)
  std::int32_t* p;    // (kChunk / G) x Rp: P groups
  std::int32_t* v;    // (kVTile / G) x VDp: V groups of rows
  std::int32_t* acc;  // Rp x VDp: the chunk's int32 P·V
  float* o;           // Rp x VDp: the output accumulator, relative to the running max
  float *factor, *m, *mc, *l, *sum, *hit;  // per row
  std::int32_t* qsum;                      // per row: byte quads' offset correction of Q·Kᵀ
  std::int32_t* psum;                      // per row: byte quads' offset correction of P·V
};

/// Carves the buffers from `base` (null: only sizes them); returns the bytes used.
std::int64_t buffer_bytes(std::int64_t D, std::int64_t RD, std::int64_t VD, Buffers* b, std::byte* base) {
  const std::int64_t Dp = up(D, 4), VDp = up(VD, 4 * kLanePad), R = kRowsPad;
  std::int64_t off = 0;
  auto take = [&](std::int64_t bytes) {
    std::byte* p = base ? base + off : nullptr;
    off += up(bytes, 64);
    return p;
  };
  Buffers x;
  x.q = reinterpret_cast<std::int32_t*>(take(Dp / 2 * R * 4));
  x.qr = reinterpret_cast<float*>(take(RD * R * 4));
  x.k = take(kKTile * Dp * 2);
  x.kr = reinterpret_cast<float*>(take(kKTile * RD * 4));
  x.s = reinterpret_cast<float*>(take(kChunk * R * 4));
  x.p = reinterpret_cast<std::int32_t*>(take(kChunk / 2 * R * 4));
  x.v = reinterpret_cast<std::int32_t*>(take(kVTile / 2 * VDp * 4));
  x.acc = reinterpret_cast<std::int32_t*>(take(R * VDp * 4));
  x.o = reinterpret_cast<float*>(take(R * VDp * 4));
  float** rows[] = {&x.factor, &x.m, &x.mc, &x.l, &x.sum, &x.hit};
  for (float** r : rows) *r = reinterpret_cast<float*>(take(R * 4));
  x.qsum = reinterpret_cast<std::int32_t*>(take(R * 4));
  x.psum = reinterpret_cast<std::int32_t*>(take(R * 4));
  if (b) *b = x;
  return off;
}

}  // namespace
}  // namespace fia::detail
#endif  // FIA_CPU_MLA_FULL_QUANT_LAYOUT_

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

/// The scores of every packed row over columns [cb, cb + nc) of a chunk, column-major in bf.s:
/// S = (Q·Kᵀ + Qrope·Kropeᵀ) * factor (13.3), masked and out-of-band keys -inf.
template <int G>
void chunk_scores(const Problem& p, const WorkItem& it, const Buffers& bf, std::int64_t Rp, std::int64_t cb,
                  std::int64_t nc) {
  const DF df;
  const DI di;
  const std::int64_t R = packed_rows(it), D = p.qk_dim, RD = p.rope_dim, Dg = up(D, G);
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t krow = G == 2 ? 2 * Dg : Dg, groups = Dg / G;
  const DType rt = p.rope_dtype;
  const auto rope_size = static_cast<std::int64_t>(dtype_size(rt));
  const VF fmax = hn::Set(df, std::numeric_limits<float>::max());
  auto* raw = reinterpret_cast<std::int32_t*>(bf.s);  // int32 sums, turned into scores in place
  for (std::int64_t t0 = 0; t0 < nc; t0 += kKTile) {
    const std::int64_t n = std::min(kKTile, nc - t0);
    for_each_run(p, it.b, it.h, cb + t0, n, KvParts::kKeys, [&](std::int64_t c, const KvRun& run) {
      for (std::int64_t t = 0; t < run.count; ++t) {
        convert_key_row<G>(static_cast<const std::int8_t*>(run.key) + t * run.key_stride, D, Dg,
                           bf.k + (c + t) * krow);
        const auto* kr = static_cast<const std::byte*>(run.key_rope) + t * run.rope_stride * rope_size;
        for (std::int64_t d = 0; d < RD; ++d) bf.kr[(c + t) * RD + d] = load_one(kr, rt, d);
      }
    });
    std::int32_t* out = raw + t0 * Rp;
    qk_tile<G>(bf.q, Rp, bf.k, krow, groups, n, out);
    for (std::int64_t c = 0; c < n; ++c) {
      for (std::int64_t r0 = 0; r0 < Rp; r0 += L) {
        VI x = hn::LoadU(di, out + c * Rp + r0);
        if constexpr (G == 4) x = hn::Sub(x, hn::ShiftLeft<7>(hn::LoadU(di, bf.qsum + r0)));  // the 128 offset
        VF rope = hn::Zero(df);
        for (std::int64_t d = 0; d < RD; ++d)
          rope = hn::Add(rope, hn::Mul(hn::LoadU(df, bf.qr + d * Rp + r0), hn::Set(df, bf.kr[c * RD + d])));
        const VF s = hn::Mul(hn::Add(hn::ConvertTo(df, x), rope), hn::LoadU(df, bf.factor + r0));
        hn::StoreU(hn::Min(hn::Max(s, hn::Neg(fmax)), fmax), df, bf.s + (t0 + c) * Rp + r0);  // no inf - inf
      }
    }
  }
  for (std::int64_t t0 = 0; t0 < nc; t0 += kKTile) {  // visibility (25.1 #24) and pse after scaling (5, 8.1)
    const std::int64_t n = std::min(kKTile, nc - t0);
    const bool full = tile_fully_visible(p, it, cb + t0, n);
    if (full && !p.has_pse) continue;
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t i = it.query_row(r), head = it.query_head(p.group, r);
      for (std::int64_t c = t0; c < t0 + n; ++c) {
        float& s = bf.s[c * Rp + r];
        if (!full && !p.visible(it.b, i, cb + c)) {
          s = kNegInf;
        } else if (p.has_pse) {  // a pse of -inf excludes the key like a mask (25.1 #24-25)
          const float bias = load_one(p.pse.base, p.pse.dtype, p.pse_offset(it.b, head, i, cb + c));
          s = bias == kNegInf ? kNegInf : saturate(s + bias);
        }
      }
    }
  }
}

/// The chunk's row max (bf.mc), whether the row sees a key (bf.hit), the sum of exp(S - chunk max)
/// (bf.sum) and P = round(127 exp(S - chunk max)) as groups in bf.p (their row sums in bf.psum).
template <int G>
void chunk_softmax(const Buffers& bf, std::int64_t Rp, std::int64_t nc) {
  const DF df;
  const DI di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF ninf = hn::Set(df, kNegInf), k127 = hn::Set(df, 127.0f);
  for (std::int64_t r0 = 0; r0 < Rp; r0 += L) {
    VF mc = ninf;
    for (std::int64_t c = 0; c < nc; ++c) mc = hn::Max(mc, hn::LoadU(df, bf.s + c * Rp + r0));
    const auto hit = hn::Ne(mc, ninf);
    const VF base = hn::IfThenElse(hit, mc, hn::Zero(df));  // rows without a key: exp(-inf) = 0
    VF sum = hn::Zero(df);
    VI psum = hn::Zero(di);
    for (std::int64_t c = 0; c < nc; c += G) {
      VI group = hn::Zero(di);  // (no array of vectors: SVE vectors are sizeless)
      for (int k = 0; k < G && c + k < nc; ++k) {
        const VF e = highway_exp(df, hn::Sub(hn::LoadU(df, bf.s + (c + k) * Rp + r0), base));
        sum = hn::Add(sum, e);
        const VI x = nearest_int(di, hn::Mul(e, k127));  // half to even, in [0, 127]
        if constexpr (G == 4) psum = hn::Add(psum, x);
        group = add_to_group<G>(di, group, x, k);
      }
      hn::StoreU(group, di, bf.p + (c / G) * Rp + r0);
    }
    hn::StoreU(hn::IfThenElseZero(hit, hn::Set(df, 1.0f)), df, bf.hit + r0);
    hn::StoreU(mc, df, bf.mc + r0);
    hn::StoreU(sum, df, bf.sum + r0);
    hn::StoreU(psum, di, bf.psum + r0);
  }
}

/// Query groups, query rope and the per-row factor dequant_scale_query * key_scale * scale.
template <int G>
void load_queries(const Problem& p, const WorkItem& it, const Buffers& bf, std::int64_t Rp) {
  const auto& mq = p.mla_full_quant;
  const std::int64_t R = packed_rows(it), D = p.qk_dim, Dg = up(D, G), RD = p.rope_dim;
  std::fill(bf.q, bf.q + Dg / G * Rp, 0);
  std::fill(bf.qr, bf.qr + RD * Rp, 0.0f);
  std::fill(bf.qsum, bf.qsum + Rp, 0);
  std::fill(bf.factor, bf.factor + Rp, 0.0f);
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t n = it.query_head(p.group, r), i = it.query_row(r);
    const auto* q = static_cast<const std::int8_t*>(p.query.base) + p.query.offset(it.b, n, i);
    fq::query_groups<G>(q, D, Dg, Rp, bf.q + r);
    for (std::int64_t d = 0; d < D; ++d) bf.qsum[r] += q[d];
    const auto* qr = static_cast<const std::byte*>(p.query_rope.base) +
                     p.query_rope.offset(it.b, n, i) * static_cast<std::int64_t>(dtype_size(p.rope_dtype));
    for (std::int64_t d = 0; d < RD; ++d) bf.qr[d * Rp + r] = load_one(qr, p.rope_dtype, d);
    const float dq = static_cast<const float*>(mq.dequant_query.base)[mq.dequant_query.offset(it.b, n, i)];
    bf.factor[r] = static_cast<float>(static_cast<double>(dq) * mq.key_scale * p.scale);
  }
}

template <int G>
void mla_item_groups(const Problem& p, const WorkItem& it, float* scratch, const OutputRows& dst) {
  Buffers bf;
  buffer_bytes(p.qk_dim, p.rope_dim, p.v_dim, &bf, reinterpret_cast<std::byte*>(scratch));
  const DF df;
  const DI di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(di));
  const std::int64_t R = packed_rows(it), Rp = up(R, L), VD = p.v_dim, VDp = up(VD, 4 * L);
  load_queries<G>(p, it, bf, Rp);
  std::fill(bf.m, bf.m + Rp, kNegInf);
  std::fill(bf.l, bf.l + Rp, 0.0f);
  std::fill(bf.o, bf.o + R * VDp, 0.0f);
  for (std::int64_t k = it.col_begin / kChunk; k * kChunk < it.col_end; ++k) {
    const std::int64_t cb = std::max(it.col_begin, k * kChunk);
    const std::int64_t nc = std::min(it.col_end, (k + 1) * kChunk) - cb;
    chunk_scores<G>(p, it, bf, Rp, cb, nc);
    chunk_softmax<G>(bf, Rp, nc);
    pv_chunk<G>(p, it, bf.p, Rp, bf.v, bf.acc, R, VDp, cb, nc);  // V: the latent rows
    for (std::int64_t r = 0; r < R; ++r) {  // fold the chunk in: rescale by the new running max
      if (bf.hit[r] == 0.0f) continue;
      const float m_new = std::max(bf.m[r], bf.mc[r]);
      const float alpha = std::exp(bf.m[r] - m_new), beta = std::exp(bf.mc[r] - m_new);
      bf.l[r] = bf.l[r] * alpha + bf.sum[r] * beta;
      bf.m[r] = m_new;
      const VF va = hn::Set(df, alpha), vb = hn::Set(df, beta);
      const VI offset = hn::Set(di, G == 4 ? 128 * bf.psum[r] : 0);  // V's 128 offset times sum P
      float* o = bf.o + r * VDp;
      for (std::int64_t d = 0; d < VDp; d += L) {
        const VF pv = hn::ConvertTo(df, hn::Sub(hn::LoadU(di, bf.acc + r * VDp + d), offset));
        hn::StoreU(hn::Add(hn::Mul(hn::LoadU(df, o + d), va), hn::Mul(pv, vb)), df, o + d);
      }
    }
  }
  for (std::int64_t r = 0; r < R; ++r) {
    if (bf.m[r] == kNegInf) {  // fully masked: 0 / +inf
      fq::write_item_row(p, it, r, nullptr, 0.0f, 0.0f, dst);
      continue;
    }
    const auto norm = static_cast<float>(static_cast<double>(p.mla_full_quant.value_scale) / (127.0 * bf.l[r]));
    float* o = bf.o + r * VDp;
    for (std::int64_t d = 0; d < VD; ++d) o[d] *= norm;  // / 127 / l * value_scale, in place
    fq::write_item_row(p, it, r, o, bf.m[r], bf.l[r], dst);
  }
}

void MlaFullQuantItem(const Problem& p, const WorkItem& it, float* scratch, const OutputRows& dst) {
#if FIA_FULL_QUANT_QUADS
  static const bool byte_dots = cpu_has_byte_dots(HWY_TARGET != HWY_AVX2);
  if (byte_dots && byte_quads_allowed()) return mla_item_groups<4>(p, it, scratch, dst);
#endif
  mla_item_groups<2>(p, it, scratch, dst);
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fia::detail {

HWY_EXPORT(MlaFullQuantItem);

void mla_full_quant_item(const Problem& p, const WorkItem& item, float* scratch, const OutputRows& dst) {
  HWY_DYNAMIC_DISPATCH(MlaFullQuantItem)(p, item, scratch, dst);
}

CpuPlan make_mla_full_quant_plan(const Problem& p, int threads) {
  const auto bytes = static_cast<std::size_t>(buffer_bytes(p.qk_dim, p.rope_dim, p.v_dim, nullptr, nullptr));
  const std::size_t floats = bytes / sizeof(float);
  return fq::full_quant_plan(p, threads, p.qk_dim + p.rope_dim + p.v_dim, floats);
}

}  // namespace fia::detail
#endif  // HWY_ONCE
