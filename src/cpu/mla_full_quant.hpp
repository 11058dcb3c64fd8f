// The cpu backend's MLA full-quantization pipeline (FIA-SPEC 13.3): the steps of
// reference/mla_full_quant.cpp with exact int32 Q·Kᵀ and P·V on the integer products of
// cpu/full_quant_products-inl.h, the bf16 rope product in f32, and the softmax in f32.
//
// An item is query rows [row_begin, row_end) of batch b with the query heads head0 .. head0 +
// heads of KV head h, packed as in WorkItem (up to 32 rows, so each latent row is read once per
// 32 packed rows). Per 512-key chunk it forms the scores of all packed rows (K converted once per
// tile and shared), the chunk max, the int8 P = round(127 exp(S - chunk max)) and the exponential
// sums of each row, then P·V with V the latent rows, folded into the row's f32 accumulator with
// exp(chunk max - running max). Items never split the KV axis: the chunk order is the semantics.
#pragma once

#include <cstdint>

#include "cpu/attention_item.hpp"
#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// The schedule of an MLA full-quant call (Problem::mla_full_quant): self-contained items over the
/// whole visible KV range of their rows, and the per-worker scratch (floats) they need.
CpuPlan make_mla_full_quant_plan(const Problem& p, int threads);

/// Runs one item of make_mla_full_quant_plan with `scratch` (plan.floats_per_thread floats,
/// 64-byte aligned), writing its BF16 attention_out rows and LSE rows to dst.
void mla_full_quant_item(const Problem& p, const WorkItem& item, float* scratch, const OutputRows& dst);

}  // namespace fia::detail
