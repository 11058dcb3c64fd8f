// SIMD kernels of phases A and B (see attention_item.hpp), compiled once per instruction set with
// Highway and dispatched at run time; phase C is plain C++ at the end of this file.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/attention_item.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/contrib/math/math-inl.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "cpu/item_common.hpp"

#include "cpu/amx.hpp"
#include "cpu/antiquant.hpp"
#include "numeric/post_quant.hpp"
#include "reference/reference.hpp"

// Kernel sources by concern, each compiled here once per target.
#include "cpu/kv_formats-inl.h"
#include "cpu/p_rounding-inl.h"
#include "cpu/p_rules-inl.h"
#include "cpu/registers-inl.h"
#include "cpu/guards-inl.h"
#include "cpu/reductions-inl.h"
#include "cpu/decode_rows-inl.h"
#include "cpu/decode_dots-inl.h"
#include "cpu/decode-inl.h"
#include "cpu/transpose-inl.h"
#include "cpu/prefill-inl.h"
#include "cpu/bf16_dots-inl.h"
#include "cpu/prefill_dots-inl.h"
#include "cpu/prefill_tiles-inl.h"
#include "cpu/wide_inplace-inl.h"
#include "cpu/wide_inplace_pv-inl.h"
#include "cpu/post_quant-inl.h"
#include "cpu/output_row-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- the kernel table: (query dtype x KV format) -> kernels, chosen once per plan -----------

template <class QSrc, class KvSrc>
ItemKernels kernels_for(const Problem& p) {
  ItemKernels k;
  bool tiles = false;  // AMX tiles take both products of wide items
  k.narrow_scores = &narrow_scores<QSrc, KvSrc>;
  k.wide_scores = &wide_scores<QSrc, KvSrc>;
  k.narrow_accumulate = &narrow_accumulate<KvSrc>;
  k.wide_accumulate = &wide_accumulate<KvSrc>;
#ifdef FIA_BF16_DOTS
  if constexpr (std::is_same_v<QSrc, BF16Src> && std::is_same_v<KvSrc, BF16Src>)
    if (bf16_wide_key_dots(p) || amx_wide_keys(p)) {
      k.wide_scores = &wide_pair_scores<QSrc, KvSrc>;
      if (amx_wide_values(p)) {
        k.wide_accumulate = &wide_tile_accumulate;
        k.wide_reads_kv_in_place = true;
        tiles = amx_wide_keys(p);
      } else if (bf16_value_dots(p)) {
        k.wide_accumulate = &wide_pair_accumulate;
        k.wide_reads_kv_in_place = true;
      }
    }
#endif
#ifdef FIA_INPLACE_WIDE
  if constexpr (std::is_same_v<QSrc, KvSrc>)
    if (inplace_supported(p) && !tiles) {  // items of 16 rows take the tiles too where they take both products
      k.inplace_scores = &inplace_scores<QSrc, KvSrc>;
      k.inplace_accumulate = inplace_pv(p) ? &inplace_accumulate<KvSrc> : &wide_accumulate<KvSrc>;
    }
#else
  (void)p;
  (void)tiles;
#endif
  return k;
}

template <class QSrc>
ItemKernels kernels_for_kv(const Problem& p) {
  switch (p.kv_format) {
    case KvFormat::kInt8: return kernels_for<QSrc, I8Src>(p);
    case KvFormat::kInt4: return kernels_for<QSrc, I4Src>(p);
    default: return kernels_for<QSrc, QSrc>(p);
  }
}

ItemKernels SelectKernels(const Problem& p) {
  switch (p.dtype) {
    case DType::F16: return kernels_for_kv<F16Src>(p);
    case DType::BF16: return kernels_for_kv<BF16Src>(p);
    default: return kernels_for_kv<F32Src>(p);
  }
}

const char* IsaName() { return hwy::TargetName(HWY_TARGET); }

bool HasBf16Dots() {
#ifdef FIA_BF16_DOTS
  return true;
#else
  return false;
#endif
}

void RowExpSums(const WorkItem& it, ScoreView sv, const float* m, float* l) { row_exp_sums(DF(), it, sv, m, l); }

void PostQuantDeviceRow(const float* src, const float* scale, const float* offset, bool channel, std::int64_t n,
                        std::int8_t* dst) {
  post_quant_device_row(src, scale, offset, channel, n, dst);
}

bool ScaleStoreRow(const float* src, std::int64_t n, float scale, DType t, void* dst) {
  return scale_store_row(src, n, scale, t, dst);
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fia::detail {

HWY_EXPORT(SelectKernels);
HWY_EXPORT(IsaName);
HWY_EXPORT(HasBf16Dots);
HWY_EXPORT(RowExpSums);
HWY_EXPORT(PostQuantDeviceRow);
HWY_EXPORT(ScaleStoreRow);

void item_exp_sums(const WorkItem& item, ScoreView scores, const float* m, float* l) {
  HWY_DYNAMIC_DISPATCH(RowExpSums)(item, scores, m, l);
}

ItemKernels select_item_kernels(const Problem& p) { return HWY_DYNAMIC_DISPATCH(SelectKernels)(p); }

void item_scores(const Problem& p, const CpuPlan& plan, const WorkItem& item, const ItemScratch& s, ScoreView scores,
                 float* m) {
  const auto kernel = runs_in_place(plan, item) ? plan.kernels.inplace_scores
                      : is_wide(item)      ? plan.kernels.wide_scores
                                           : plan.kernels.narrow_scores;
  kernel(p, plan.tile, item, s, scores, m);
}

void item_accumulate(const Problem& p, const CpuPlan& plan, const WorkItem& item, const ItemScratch& s,
                     ScoreView scores, const RowStats& stats, float* l, float* acc) {
  const auto kernel = runs_in_place(plan, item) ? plan.kernels.inplace_accumulate
                      : is_wide(item)      ? plan.kernels.wide_accumulate
                                           : plan.kernels.narrow_accumulate;
  kernel(p, plan.tile, item, s, scores, stats, l, acc);
}

const char* kernel_isa() { return HWY_DYNAMIC_DISPATCH(IsaName)(); }

bool kernel_isa_has_bf16_dots() { return HWY_DYNAMIC_DISPATCH(HasBf16Dots)(); }

void post_quant_device_row(const float* src, const float* scale, const float* offset, bool channel, std::int64_t n,
                           std::int8_t* dst) {
  HWY_DYNAMIC_DISPATCH(PostQuantDeviceRow)(src, scale, offset, channel, n, dst);
}

bool scale_store_row(const float* src, std::int64_t n, float scale, DType t, void* dst) {
  return HWY_DYNAMIC_DISPATCH(ScaleStoreRow)(src, n, scale, t, dst);
}

float row_norm(const Problem& p, std::int64_t n, float m, float l, float* lse) {
  if (!p.has_sink) {
    if (lse) *lse = m + std::log(l);  // section 17
    return 1.0f / l;
  }
  const float sink = p.sink[n];  // section 16, stabilised with max(m, sink)
  const float m2 = std::max(m, sink);
  const float denom = l * std::exp(m - m2) + std::exp(sink - m2);
  if (lse) *lse = m2 + std::log(denom);
  return std::exp(m - m2) / denom;
}

/// Writes one output row of query head n from its normalised f32 values: rounded to out_dtype,
/// or quantized to int8 in the same pass (FIA-SPEC 14.1). `src` null: a fully masked row, which is
/// 0, or quantize(0) with post-quant (25.1 #3).
void write_output_row(const Problem& p, std::int64_t n, const float* src, void* orow) {
  if (!p.post_quant.on) {
    if (src) store_row(src, p.v_dim, p.out_dtype, orow);
    else std::memset(orow, 0, static_cast<std::size_t>(p.v_dim) * dtype_size(p.out_dtype));
    return;
  }
  const std::vector<float> zeros(src ? 0 : static_cast<std::size_t>(p.v_dim), 0.0f);
  if (!src) src = zeros.data();
  const auto& pq = p.post_quant;
  if (pq.rounding == PostQuantRounding::kGolden) {
    post_quant_row(p, n, src, static_cast<std::int8_t*>(orow));
    return;
  }
  const bool channel = pq.scale.size() != 1;
  const std::int64_t first = channel ? n * p.v_dim : 0;  // (n, d) at n * V_D + d (14.2)
  post_quant_device_row(src, pq.scale.data() + first, pq.offset.empty() ? nullptr : pq.offset.data() + first,
                        channel, p.v_dim, static_cast<std::int8_t*>(orow));
}

namespace {

/// False when a row's max and sum left float32's normal range: its max is a saturated (or NaN)
/// score (saturate()), the sum overflowed, or it fell below the smallest normal float (every E
/// subnormal or 0: E taken against an Options::softmax_max some 87 or more above the row's
/// scores), where 1 / l would overflow. (An overflowed P·V shows when the row is written.)
bool stats_in_range(float m, float l) {
  return std::abs(m) < std::numeric_limits<float>::max() && std::isfinite(l) && l >= std::numeric_limits<float>::min();
}

/// Writes row i of (b, n) as the float64 reference computes it (docs/numerics.md "Overflow").
void recompute_row(const Problem& p, std::int64_t b, std::int64_t n, std::int64_t i, const OutputRows& dst) {
  std::vector<double> exact(p.v_dim);
  double lse = 0.0;
  auto* orow = static_cast<std::byte*>(const_cast<void*>(dst.out.base)) +
               dst.out.offset(b, n, i) * static_cast<std::int64_t>(dtype_size(p.out_dtype));
  if (!reference_row(p, b, n, i, exact.data(), &lse)) {  // fully masked: 0 (or quantize(0)) / +inf
    write_output_row(p, n, nullptr, orow);
    return;
  }
  std::vector<float> row(exact.begin(), exact.end());
  write_output_row(p, n, row.data(), orow);
  if (p.lse) static_cast<float*>(const_cast<void*>(dst.lse.base))[dst.lse.offset(b, n, i)] = lse_as_f32(lse);
}

}  // namespace

void item_finalize(const Problem& p, const WorkItem& item, const float* m, const float* l, float* acc,
                   const OutputRows& dst) {
  const std::int64_t G = p.group, vd = p.v_dim;
  const std::size_t out_es = dtype_size(p.out_dtype);
  item.for_each_row(G, [&](std::int64_t r, std::int64_t n, std::int64_t i) {
    auto* orow = static_cast<std::byte*>(const_cast<void*>(dst.out.base)) +
                 dst.out.offset(item.b, n, i) * static_cast<std::int64_t>(out_es);
    if (m[r] == kNegInf) {  // fully masked: 0 (or quantize(0)) / +inf (25.1 #1, #3)
      write_output_row(p, n, nullptr, orow);
      return;
    }
    float* ar = acc + r * vd;
    if (!stats_in_range(m[r], l[r])) {
      recompute_row(p, item.b, n, i, dst);
      return;
    }
    float lse = 0.0f;
    float norm = row_norm(p, n, m[r], l[r], p.lse ? &lse : nullptr);
    if (p.p_rule.kind == PRule::Kind::kNormalizeFirst) norm = 1.0f;  // P·V is already normalised
    if (!p.post_quant.on) {
      if (!scale_store_row(ar, vd, norm, p.out_dtype, orow)) {  // P·V overflowed
        recompute_row(p, item.b, n, i, dst);
        return;
      }
    } else {
      if (!std::all_of(ar, ar + vd, [](float x) { return std::isfinite(x); })) {
        recompute_row(p, item.b, n, i, dst);
        return;
      }
      for (std::int64_t d = 0; d < vd; ++d) ar[d] *= norm;
      write_output_row(p, n, ar, orow);
    }
    if (p.lse) static_cast<float*>(const_cast<void*>(dst.lse.base))[dst.lse.offset(item.b, n, i)] = lse;
  });
}

}  // namespace fia::detail
#endif  // HWY_ONCE
