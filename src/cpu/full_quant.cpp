// SIMD kernel of int8 full quantization (see cpu/full_quant.hpp), compiled once per instruction
// set with Highway. Every step rounds as reference/full_quant.cpp does (separate multiply and add,
// never fused: this file is built with -ffp-contract=off).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/full_quant.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#include "cpu/amx.hpp"
#include "cpu/full_quant.hpp"
#include "cpu/full_quant_layout.hpp"
#include "cpu/item_common.hpp"
#include "numeric/full_quant.hpp"

#include "cpu/registers-inl.h"
#include "cpu/f16_rounding-inl.h"
#include "cpu/softmax_exp-inl.h"
#include "cpu/full_quant_products-inl.h"
#include "cpu/full_quant_tiles-inl.h"

#ifndef FIA_CPU_FULL_QUANT_LAYOUT_
#define FIA_CPU_FULL_QUANT_LAYOUT_
namespace fia::detail {
namespace {

using fq::kKTile;
using fq::kLanePad;
using fq::kRowsPad;
using fq::kVTile;
using fq::up;

/// The per-worker scratch of an item (cpu/full_quant_products-inl.h for the groups), carved from
/// one float buffer, every piece 64-byte aligned. Rows are padded to Rp, a multiple of the running
/// target's int32 lanes (at most kRowsPad); strides below are the running target's.
struct Buffers {
  std::int32_t* q;    // (D / G) x Rp: query groups, transposed
  std::byte* k;       // kKTile rows of K groups (int16 pairs, or bytes offset by 128); with AMX
                      // tiles, a 64-token tile of P quads as their A operand (Rp x 16 int32)
  float* s;           // chunk x Rp: the chunk's fp16 scores, column-major (-inf: excluded)
  std::int32_t* p;    // (chunk / G) x Rp: P groups of columns (G c, ..., G c + G - 1)
  std::int32_t* v;    // (kVTile / G) x VDp: V groups of rows
  std::int32_t* acc;  // Rp x VDp: the chunk's int32 P·V
  float* o;           // Rp x VDp: the output accumulator
  float *m, *l, *alpha, *sum, *seen, *hit;  // per row
  std::int32_t *qsum, *psum;                // per row: byte quads' offset corrections
};

/// Carves the buffers from `base` (null: only sizes them); returns the bytes used.
std::int64_t buffer_bytes(std::int64_t D, std::int64_t VD, Buffers* b, std::byte* base) {
  const std::int64_t Dp = up(D, 4), VDp = up(VD, 4 * kLanePad), R = kRowsPad, C = kFullQuantChunk;
  std::int64_t off = 0;
  auto take = [&](std::int64_t bytes) {
    std::byte* p = base ? base + off : nullptr;
    off += up(bytes, 64);
    return p;
  };
  Buffers x;
  x.q = reinterpret_cast<std::int32_t*>(take(Dp / 2 * R * 4));
  x.k = take(kKTile * Dp * 2);
  x.s = reinterpret_cast<float*>(take(C * R * 4));
  x.p = reinterpret_cast<std::int32_t*>(take(C / 2 * R * 4));
  x.v = reinterpret_cast<std::int32_t*>(take(kVTile / 2 * VDp * 4));
  x.acc = reinterpret_cast<std::int32_t*>(take(R * VDp * 4));
  x.o = reinterpret_cast<float*>(take(R * VDp * 4));
  float** rows[] = {&x.m, &x.l, &x.alpha, &x.sum, &x.seen, &x.hit};
  for (float** r : rows) *r = reinterpret_cast<float*>(take(R * 4));
  x.qsum = reinterpret_cast<std::int32_t*>(take(R * 4));
  x.psum = reinterpret_cast<std::int32_t*>(take(R * 4));
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
using VF = hn::Vec<DF>;

HWY_INLINE VF clamp_f16(DF df, VF x) {
  return round_f16<true>(df, hn::Min(hn::Max(x, hn::Set(df, -kF16Max)), hn::Set(df, kF16Max)));
}

/// The fp16 scores of every packed row over columns [cb, cb + nc) of a chunk, column-major in
/// bf.s, with masks, band and pse applied (excluded: -inf). kTiles: the int32 sums from AMX tiles,
/// K rows read where they are stored (the same exact integers: no 128 offset to take out).
template <int G, bool kTiles>
void chunk_scores(const Problem& p, const WorkItem& it, const Buffers& bf, std::int64_t Rp, std::int64_t cb,
                  std::int64_t nc) {
  const DF df;
  const DI di;
  const std::int64_t R = packed_rows(it), D = p.qk_dim, Dg = up(D, G), L = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t krow = G == 2 ? 2 * Dg : Dg, groups = Dg / G;
  auto* raw = reinterpret_cast<std::int32_t*>(bf.s);  // int32 sums, turned into scores in place
  if constexpr (kTiles) {
    for_each_run(p, it.b, it.h, cb, nc, KvParts::kKeys, [&](std::int64_t c, const KvRun& run) {
      const AmxKeyPart keys{run.key, run.key_stride, D / 4, 0, nullptr, 0, 0};
      amx_int8_key_sums(bf.q, Rp, Rp, keys, run.count, raw + c * Rp, Rp);
    });
  } else {
    for (std::int64_t t0 = 0; t0 < nc; t0 += kKTile) {
      const std::int64_t n = std::min(kKTile, nc - t0);
      fq::each_kv_row(p, it, false, cb + t0, n,
                      [&](std::int64_t c, const std::int8_t* row) { convert_key_row<G>(row, D, Dg, bf.k + c * krow); });
      qk_tile<G>(bf.q, Rp, bf.k, krow, groups, n, raw + t0 * Rp);
    }
  }
  const VF dq = hn::Set(df, p.full_quant.dequant1), sc = hn::Set(df, p.full_quant.scale16);
  for (std::int64_t c = 0; c < nc; ++c)
    for (std::int64_t r0 = 0; r0 < Rp; r0 += L) {
      VI x = hn::LoadU(di, raw + c * Rp + r0);
      if constexpr (G == 4 && !kTiles) x = hn::Sub(x, hn::ShiftLeft<7>(hn::LoadU(di, bf.qsum + r0)));  // the 128 offset
      const VF a = clamp_f16(df, hn::Mul(hn::ConvertTo(df, x), dq));
      hn::StoreU(clamp_f16(df, hn::Mul(a, sc)), df, bf.s + c * Rp + r0);
    }
  for (std::int64_t t0 = 0; t0 < nc; t0 += kKTile) {
    const std::int64_t n = std::min(kKTile, nc - t0);
    const bool full = tile_fully_visible(p, it, cb + t0, n);
    if (full && !p.has_pse) continue;
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t head = it.query_head(p.group, r), i = it.query_row(r), b = it.b;
      for (std::int64_t c = t0; c < t0 + n; ++c) {
        const std::int64_t j = cb + c;
        float& s = bf.s[c * Rp + r];
        if (!full && !p.visible(b, i, j)) {
          s = kNegInf;
        } else if (p.has_pse) {  // "A + pse (fp16)"; a pse of -inf excludes the key
          const float bias = load_one(p.pse.base, p.pse.dtype, p.pse_offset(b, head, i, j));
          s = bias == kNegInf ? kNegInf : clamp_to_f16(s + clamp_to_f16(bias));
        }
      }
    }
  }
}

/// The online softmax of the chunk's nc columns for every row: E = fp16(exp(A - m_new)), P =
/// int8(fp16(E * quant1)) as groups in bf.p (and their row sums in bf.psum); the new row max goes
/// to bf.alpha, the sum of E to bf.sum, and whether the row sees a key to bf.hit.
template <int G>
void chunk_softmax(const Problem& p, const Buffers& bf, std::int64_t Rp, std::int64_t nc) {
  const DF df;
  const DI di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF q1 = hn::Set(df, p.full_quant.quant1), lo = hn::Set(df, -128.0f), hi = hn::Set(df, 127.0f);
  const VF ninf = hn::Set(df, kNegInf);
  for (std::int64_t r0 = 0; r0 < Rp; r0 += L) {
    VF mc = ninf;
    for (std::int64_t c = 0; c < nc; ++c) mc = hn::Max(mc, hn::LoadU(df, bf.s + c * Rp + r0));
    const VF m_old = hn::LoadU(df, bf.m + r0);
    const auto hit = hn::Ne(mc, ninf);
    const VF m_new = hn::IfThenElse(hit, hn::Max(m_old, mc), m_old);
    const VF base = hn::IfThenElse(hit, m_new, hn::Zero(df));  // rows without a key: E = exp(-inf) = 0
    VF sum = hn::Zero(df);
    VI psum = hn::Zero(di);
    auto take = [&](VF e, int k, VI& group) {  // E of column k of a group: into l's sum, P, psum
      sum = hn::Add(sum, e);
      const VF y = clamp_f16(df, hn::Mul(round_f16<false>(df, e), q1));
      const VI x = nearest_int(di, hn::Min(hn::Max(y, lo), hi));  // = clamped after rounding: integer bounds
      if constexpr (G == 4) psum = hn::Add(psum, x);  // byte quads only: V's offset correction
      group = add_to_group<G>(di, group, x, k);
    };
    std::int64_t c = 0;
#if !HWY_HAVE_SCALABLE
    // A whole group's exponentials step by step together (highway_exps, the same bits as one at a
    // time): one after another, their dependency chains left the out-of-order window idle.
    for (; c + G <= nc; c += G) {
      VF e[G];
      for (int k = 0; k < G; ++k) e[k] = hn::Sub(hn::LoadU(df, bf.s + (c + k) * Rp + r0), base);
      highway_exps<G>(df, e);
      VI group = hn::Zero(di);
      for (int k = 0; k < G; ++k) take(e[k], k, group);
      hn::StoreU(group, di, bf.p + (c / G) * Rp + r0);
    }
#endif
    for (; c < nc; c += G) {
      VI group = hn::Zero(di);  // (no array of vectors: SVE vectors are sizeless)
      for (int k = 0; k < G && c + k < nc; ++k)
        take(highway_exp(df, hn::Sub(hn::LoadU(df, bf.s + (c + k) * Rp + r0), base)), k, group);
      hn::StoreU(group, di, bf.p + (c / G) * Rp + r0);
    }
    hn::StoreU(hn::IfThenElseZero(hit, hn::Set(df, 1.0f)), df, bf.hit + r0);
    hn::StoreU(m_new, df, bf.alpha + r0);
    hn::StoreU(sum, df, bf.sum + r0);
    hn::StoreU(psum, di, bf.psum + r0);
  }
}

template <int G, bool kTiles = false>
void full_quant_item_groups(const Problem& p, const WorkItem& it, float* scratch, const OutputRows& dst) {
  Buffers bf;
  buffer_bytes(p.qk_dim, p.v_dim, &bf, reinterpret_cast<std::byte*>(scratch));
  const DF df;
  const DI di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(di));
  const std::int64_t R = packed_rows(it), Rp = up(R, L), D = p.qk_dim, Dg = up(D, G), VD = p.v_dim;
  const std::int64_t VDp = up(VD, 4 * L);
  std::fill(bf.q, bf.q + Dg / G * Rp, 0);
  std::fill(bf.qsum, bf.qsum + Rp, 0);
  for (std::int64_t r = 0; r < R; ++r) {
    const auto* q = static_cast<const std::int8_t*>(p.query.base) +
                    p.query.offset(it.b, it.query_head(p.group, r), it.query_row(r));
    fq::query_groups<G>(q, D, Dg, Rp, bf.q + r);
    if constexpr (kTiles) continue;  // signed bytes both: no offset sum
    for (std::int64_t d = 0; d < D; ++d) bf.qsum[r] += q[d];
  }
  std::fill(bf.m, bf.m + Rp, kNegInf);
  std::fill(bf.l, bf.l + Rp, 0.0f);
  std::fill(bf.seen, bf.seen + Rp, 0.0f);
  std::fill(bf.o, bf.o + R * VDp, 0.0f);
  const VF dq2 = hn::Set(df, p.full_quant.dequant2);
  for (std::int64_t k = it.col_begin / kFullQuantChunk; k * kFullQuantChunk < it.col_end; ++k) {
    const std::int64_t cb = std::max(it.col_begin, k * kFullQuantChunk);
    const std::int64_t nc = std::min(it.col_end, (k + 1) * kFullQuantChunk) - cb;
    chunk_scores<G, kTiles>(p, it, bf, Rp, cb, nc);
    chunk_softmax<G>(p, bf, Rp, nc);
    for (std::int64_t r = 0; r < R; ++r) {  // l and the rescaling factor as the reference forms them
      if (bf.hit[r] == 0.0f) continue;
      const float m_new = bf.alpha[r];
      const double alpha = std::exp(static_cast<double>(bf.m[r]) - m_new);
      bf.l[r] = static_cast<float>(bf.l[r] * alpha) + bf.sum[r];
      bf.alpha[r] = round_to_f16(static_cast<float>(alpha));
      bf.m[r] = m_new;
    }
#if FIA_FULL_QUANT_TILES
    if constexpr (kTiles) pv_chunk_tiles(p, it, bf.p, Rp, bf.v, reinterpret_cast<std::int32_t*>(bf.k), bf.acc, VDp, cb, nc);
    else
#endif
      pv_chunk<G>(p, it, bf.p, Rp, bf.v, bf.acc, R, VDp, cb, nc);
    // Fold the chunk into the outputs: the first visible chunk in fp32, later ones as fp16
    // partials with fp16 accumulation (13.1).
    for (std::int64_t r = 0; r < R; ++r) {
      if (bf.hit[r] == 0.0f) continue;
      float* o = bf.o + r * VDp;
      const bool first = bf.seen[r] == 0.0f;
      const VF alpha = hn::Set(df, bf.alpha[r]);
      const VI offset = hn::Set(di, G == 4 && !kTiles ? 128 * bf.psum[r] : 0);  // V's 128 offset times sum P
      for (std::int64_t d = 0; d < VDp; d += L) {
        const VF oj = hn::Mul(hn::ConvertTo(df, hn::Sub(hn::LoadU(di, bf.acc + r * VDp + d), offset)), dq2);
        hn::StoreU(first ? oj : clamp_f16(df, hn::Add(hn::Mul(hn::LoadU(df, o + d), alpha), clamp_f16(df, oj))), df,
                   o + d);
      }
      bf.seen[r] = 1.0f;
    }
  }
  for (std::int64_t r = 0; r < R; ++r) {
    if (bf.seen[r] == 0.0f) {  // fully masked: 0 (or quantize(0)) / +inf
      fq::write_item_row(p, it, r, nullptr, 0.0f, 0.0f, dst);
      continue;
    }
    const float l16 = clamp_to_f16(bf.l[r]);
    float* o = bf.o + r * VDp;
    for (std::int64_t d = 0; d < VD; ++d) o[d] /= l16;  // O / fp16(l), in place
    fq::write_item_row(p, it, r, o, bf.m[r], bf.l[r], dst);
  }
}

bool TakesInt8Tiles() {
#if FIA_FULL_QUANT_TILES
  return true;
#else
  return false;
#endif
}

/// Whether this target's kernel takes byte quads on this CPU (allow_byte_quads permitting).
bool TakesByteQuads() {
#if FIA_FULL_QUANT_QUADS
  static const bool byte_dots = cpu_has_byte_dots(HWY_TARGET != HWY_AVX2);
  return byte_dots;
#else
  return false;
#endif
}

void FullQuantItem(const Problem& p, const WorkItem& it, float* scratch, const OutputRows& dst) {
#if FIA_FULL_QUANT_TILES
  if (full_quant_tiles(p)) {
    const AmxTileSession tiles;  // configured once for the item's many tile calls
    return full_quant_item_groups<4, true>(p, it, scratch, dst);
  }
#endif
#if FIA_FULL_QUANT_QUADS
  if (TakesByteQuads() && byte_quads_allowed()) return full_quant_item_groups<4>(p, it, scratch, dst);
#endif
  full_quant_item_groups<2>(p, it, scratch, dst);
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fia::detail {

HWY_EXPORT(FullQuantItem);
HWY_EXPORT(TakesInt8Tiles);
HWY_EXPORT(TakesByteQuads);

namespace {
std::atomic<bool> g_byte_quads{true};
}  // namespace

/// Whether the CPU has the byte-quad dot product: on x86 AVX-512 VNNI (`avx512`) or AVX-VNNI
/// (VEX-encoded, for AVX2), from CPUID; on Arm I8MM (usdot), from the kernel's hardware
/// capabilities (Linux) or sysctl (macOS).
bool cpu_has_byte_dots(bool avx512) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (avx512) return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 11) & 1u);
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 4) & 1u);
#elif defined(__aarch64__) && defined(__linux__)
  (void)avx512;
  return (getauxval(AT_HWCAP2) & (1ul << 13)) != 0;  // HWCAP2_I8MM
#elif defined(__aarch64__) && defined(__APPLE__)
  (void)avx512;
  int has = 0;
  std::size_t size = sizeof has;
  return sysctlbyname("hw.optional.arm.FEAT_I8MM", &has, &size, nullptr, 0) == 0 && has != 0;
#else
  (void)avx512;
  return false;
#endif
}

bool kernel_isa_takes_int8_tiles() { return HWY_DYNAMIC_DISPATCH(TakesInt8Tiles)(); }
bool kernel_isa_takes_byte_quads() { return HWY_DYNAMIC_DISPATCH(TakesByteQuads)(); }

bool byte_quads_allowed() { return g_byte_quads.load(std::memory_order_relaxed); }
void allow_byte_quads(bool allowed) { g_byte_quads.store(allowed, std::memory_order_relaxed); }

void full_quant_item(const Problem& p, const WorkItem& item, float* scratch, const OutputRows& dst) {
  HWY_DYNAMIC_DISPATCH(FullQuantItem)(p, item, scratch, dst);
}

CpuPlan make_full_quant_plan(const Problem& p, int threads) {
  const auto floats = static_cast<std::size_t>(buffer_bytes(p.qk_dim, p.v_dim, nullptr, nullptr)) / sizeof(float);
  return fq::full_quant_plan(p, threads, p.qk_dim + p.v_dim, floats);
}

CpuPlan fq::full_quant_plan(const Problem& p, int threads, std::int64_t dims, std::size_t floats_per_thread) {
  CpuPlan plan;
  const std::int64_t G = p.group, heads = std::min(G, fq::kRows), rows = std::max<std::int64_t>(1, fq::kRows / heads);
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
          work += static_cast<double>(packed_rows(it)) * static_cast<double>(hi + 1 - lo) * static_cast<double>(dims);
          plan.items.push_back(it);
        }
  const std::size_t widest = work < PlanLimits{}.serial_work ? 1 : plan.items.size();
  plan.threads = static_cast<int>(std::clamp<std::size_t>(widest, 1, static_cast<std::size_t>(std::max(threads, 1))));
  plan.floats_per_thread = floats_per_thread;
  plan.workspace_bytes = plan.items.empty() ? 0 : plan.floats_per_thread * plan.threads * sizeof(float) + 64;
  return plan;
}

}  // namespace fia::detail
#endif  // HWY_ONCE
