// The cpu kernels for one work item, in three phases (see plan/plan.hpp for why):
//   A  scores S = scale * (Q·Kᵀ [+ Qr·Krᵀ]) + pse over the item's columns, -inf where not allowed,
//      and each packed row's max;
//   B  with the exact row max m: l = sum exp(S - m), acc = sum round(exp(S - m)) · V;
//   C  O = acc / l (the learnable sink joins the denominator), LSE = m + ln(l).
// Packed row r of an item is query row row_begin + r / G of query head h*G + r % G.
//
// Phases A and B are SIMD kernels (Highway, dispatched once per process to the best ISA the CPU
// supports, capped by FIA_ISA). Two shapes:
//   narrow (fewer than kWideRows packed rows, i.e. decode): K and V rows are read in place and
//     widened in registers; scores are row-major;
//   wide (prefill): K and V tiles are widened to f32 once and shared by all rows; Q is transposed
//     so that both products are register-blocked over rows; scores are column-major.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// Where attention_out and softmax_lse rows go.
struct OutputRows {
  RowIndex out;  ///< attention_out rows (dtype Problem::out_dtype)
  RowIndex lse;  ///< softmax_lse rows (F32), used when Problem::lse
};

/// K and V columns of one (batch, KV head) widened to f32 (dequantized, as the tiles of wide
/// items: widen_tile), kept in a worker's workspace across the wide items it computes, so that the
/// row blocks of a head (every prefill item over the same keys) widen each column once instead of
/// once per item. Its values depend only on (b, h, column), so any item of the call may read what
/// another item left. Reset at the start of every call (the workspace is the caller's).
struct WidenedKv {
  std::int64_t b = -1, h = -1;          ///< the batch and KV head held (-1: nothing)
  std::int64_t begin = 0, end = 0;      ///< the columns [begin, end) held
  std::int64_t capacity = 0;            ///< columns it can hold
  bool keys = true;                     ///< false: k holds nothing (V only; hold_columns)
  float* k = nullptr;                   ///< column j at k + (j - begin) * (qk_dim + rope_dim)
  float* v = nullptr;                   ///< column j at v + (j - begin) * v_tile_stride(v_dim)
  /// True when it holds columns [lo, hi) of batch b, KV head h.
  bool holds(std::int64_t b_, std::int64_t h_, std::int64_t lo, std::int64_t hi) const {
    return b == b_ && h == h_ && begin <= lo && hi <= end;
  }
};

/// Floats of workspace a WidenedKv itself takes (its columns follow).
inline constexpr std::size_t kWidenedKvFloats = (sizeof(WidenedKv) + sizeof(float) - 1) / sizeof(float);

/// Per-worker scratch (64-byte aligned): Q (R x kw, or transposed kw x Rp), K and V tiles
/// (cols x kw, cols x v_dim), and transposed accumulators (v_dim x Rp).
struct ItemScratch {
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
  float* acc_t = nullptr;
  WidenedKv* kv = nullptr;  ///< null: the plan keeps no widened columns
};

/// The scores of an item: element (r, c) (c relative to the item's first column) at
/// base[r * row_stride + c * col_stride].
struct ScoreView {
  float* base = nullptr;
  std::int64_t row_stride = 0, col_stride = 0;
  ScoreView at_column(std::int64_t c) const { return {base + c * col_stride, row_stride, col_stride}; }
};

/// Per-row inputs of phase B besides the scores (packed rows of the item; FIA-SPEC 25.3).
struct RowStats {
  /// The row max m over the whole row (-inf: the row sees nothing). For PRule kRunningMax with a
  /// sink, max(m, sink) instead, so that no factor exp(m_t - m) exceeds 1; phase C then uses the
  /// same values.
  const float* max = nullptr;
  /// PRule kRunningMax: the running max entering the item's first grid tile (the sink, and the
  /// maxima of the chunks before it).
  const float* entering = nullptr;
  /// PRule kNormalizeFirst in split groups: 1 / (l + sink term) of the whole row, the factor that
  /// normalises E. Null: computed from the item's own columns (self-contained items).
  const float* norm = nullptr;
};

/// Section 16-17 for one row: the factor that normalises sum P·V (P relative to m), from the row
/// max m, the sum l of exp(S - m) and the learnable sink of query head n; and the LSE into *lse
/// where lse is not null (without the LSE asked for, skipping its log per row took P2 0.992x
/// and P3 0.995x the time: Emerald Rapids VM, AVX3, 2 threads, in-process A/B).
float row_norm(const Problem& p, std::int64_t n, float m, float l, float* lse = nullptr);

/// Phase A (with the plan's kernels): scores of the item's columns (masked: -inf) and m[r] = their row max (-inf when the
/// row sees nothing). Rows are padded to padded_rows(); padding rows are unspecified.
void item_scores(const Problem& p, const CpuPlan& plan, const WorkItem& item, const ItemScratch& s,
                 ScoreView scores, float* m);

/// Phase B: l[r] (the sum of exp(S - m)) and acc[r * v_dim + d] = sum P·V over the item's
/// columns, from the phase-A scores and the row stats; P formed by the call's PRule (25.3).
/// Overwrites the scores with P.
void item_accumulate(const Problem& p, const CpuPlan& plan, const WorkItem& item, const ItemScratch& s,
                     ScoreView scores, const RowStats& stats, float* l, float* acc);

/// l[r] = sum of exp(S - m[r]) over the item's phase-A scores (0 for rows with m = -inf): the
/// row sums PRule kNormalizeFirst needs before phase B of a split group.
void item_exp_sums(const WorkItem& item, ScoreView scores, const float* m, float* l);

/// Phase C: writes the item's output (and LSE) rows; rows with m = -inf are fully masked and left
/// as pre-filled (0 / +inf). `acc` is scaled in place (not for PRule kNormalizeFirst, whose P
/// is already normalised). `m` is RowStats::max.
void item_finalize(const Problem& p, const WorkItem& item, const float* m, const float* l, float* acc,
                   const OutputRows& dst);

/// Writes one output row of query head n from its normalised f32 values: rounded to out_dtype,
/// or quantized to int8 in the same pass (FIA-SPEC 14.1). `src` null: a fully masked row, which is
/// 0, or quantize(0) with post-quant (25.1 #3).
void write_output_row(const Problem& p, std::int64_t n, const float* src, void* orow);

/// dst[0:n) = src[0:n) * scale rounded to `t` (F16 / BF16 to nearest even, bit for bit as
/// f32_to_f16 / f32_to_bf16; F32) on the best instruction set. False, with dst partly written,
/// when src holds a value that is not finite.
bool scale_store_row(const float* src, std::int64_t n, float scale, DType t, void* dst);

/// The name of the instruction set the kernels run on ("AVX3", "AVX2", "SSE4", ...).
const char* kernel_isa();

/// True when the kernels of that instruction set are built with bf16 dot products (the x86
/// AVX-512 targets, cpu/bf16_dots-inl.h); they take them where cpu/isa.hpp bf16_dots_enabled().
/// The AMX path of bf16 prefill (cpu/amx.hpp) lives in the same kernels: they alone can take the
/// tiles.
bool kernel_isa_has_bf16_dots();

/// dst[d] = post_quant_device(src[d], scale, offset) for a row of n values on the best instruction
/// set (FIA-SPEC 14.1, 25.1 #3): `channel` selects per-element scales and offsets (else element 0
/// of each), `offset` may be null. Bit-identical to the scalar formula of numeric/post_quant.hpp.
void post_quant_device_row(const float* src, const float* scale, const float* offset, bool channel, std::int64_t n,
                           std::int8_t* dst);

}  // namespace fia::detail
