// The cpu backend's int8 full-quantization pipeline (FIA-SPEC 13.1): the steps of
// reference/full_quant.cpp with exact int32 products on 16-bit multiply-add instructions
// (vpmaddwd on x86, smlal on Arm), byte quads (VNNI, I8MM) or AMX-INT8 tiles, and the fp16
// roundings in SIMD.
//
// An item is query rows [row_begin, row_end) of batch b with the query heads head0 .. head0 +
// heads of KV head h, packed as in WorkItem. Per 1024-key chunk it forms the scores of all packed
// rows (K converted once per tile to pair-interleaved int16 and shared by the rows), the online
// softmax and int8 P of each row, then P·V (V converted likewise), and folds the chunk into the
// row's fp32/fp16 output. Items never split the KV axis: the chunk order is the semantics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/attention_item.hpp"
#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// The schedule of a full-quant call: self-contained items over the whole visible KV range of
/// their rows, and the per-worker scratch (floats) full_quant_item needs.
CpuPlan make_full_quant_plan(const Problem& p, int threads);

/// Runs one item of make_full_quant_plan with `scratch` (plan.floats_per_thread floats, 64-byte
/// aligned), writing its attention_out rows (F16, or int8 with post-quant) and LSE rows to dst.
void full_quant_item(const Problem& p, const WorkItem& item, float* scratch, const OutputRows& dst);

/// Whether items may use byte-quad products (VNNI, see cpu/full_quant_products-inl.h) where the CPU
/// has them; tests turn them off to run the 16-bit pair products on the same instruction set.
/// Results are identical either way (both are exact).
bool byte_quads_allowed();
void allow_byte_quads(bool allowed);

/// Whether the running instruction set's full-quant kernel takes byte quads on this CPU (a target
/// with them, cpu_has_byte_dots) when they are allowed.
bool kernel_isa_takes_byte_quads();

/// Whether the running instruction set's full-quant kernel can take AMX-INT8 tiles (its AVX-512
/// targets); read_kernel_settings (cpu/isa.hpp) plans them with it (Problem::amx,
/// full_quant_tiles).
bool kernel_isa_takes_int8_tiles();

/// Whether the CPU has the byte-quad dot product: AVX-512 VNNI (`avx512`) or AVX-VNNI (for AVX2)
/// on x86, I8MM (usdot) on Arm.
bool cpu_has_byte_dots(bool avx512);

}  // namespace fia::detail
