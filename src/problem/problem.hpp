// The canonical Problem: one layout-free description of a validated FIA call (DESIGN.md).
//
// Every layout, storage mode, length rule and sparse mode is resolved by layer 2 (validate/)
// into the fields below. Kernels and the reference read only this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "args/layout.hpp"
#include "fia/args.hpp"
#include "fia/tensor.hpp"

namespace fia::detail {

/// Offsets farther than any sequence: used for "no band limit".
inline constexpr std::int64_t kFar = std::int64_t{1} << 52;

/// Rows of a tensor indexed by (batch, head, row): element offset
///   batch_offset[b] + head * head_stride + row * row_stride,  innermost axis contiguous.
struct RowIndex {
  const void* base = nullptr;
  std::vector<std::int64_t> batch_offset;
  std::int64_t head_stride = 0;
  std::int64_t row_stride = 0;

  std::int64_t offset(std::int64_t b, std::int64_t n, std::int64_t i) const {
    return batch_offset[b] + n * head_stride + i * row_stride;
  }
};

/// How the elements of one stored token row lie: contiguous (stride 0), or in pieces of `width`
/// elements `stride` apart, as in the NZ cache (blockNum, KV_N, D/D0, blockSize, D0), FIA-SPEC
/// 3.2, 9.1: element d at (d / width) * stride + d % width with width D0 (16 for 2-byte, 32 for
/// 1-byte elements) and stride blockSize * D0.
struct RowTiling {
  std::int64_t stride = 0, width = 0;
  bool tiled() const { return stride != 0; }
};

/// Where the token rows of one KV tensor (key, value or key_rope) live.
///   batched: token t of batch b, KV head h at  batch[b].base + h*head_stride + t*token_stride
///   paged:   block blk = block_table[b][t / block_size]; at
///            pool + blk*block_stride + h*head_stride + (t % block_size)*token_stride,
///            its elements laid out by `tiling` (NZ caches; contiguous otherwise)
struct KvTensorRows {
  struct Batch {
    const void* base = nullptr;
    std::int64_t head_stride = 0;
    std::int64_t token_stride = 0;
  };
  std::vector<Batch> batch;  ///< batched addressing (contiguous KV, tensor list, shared prefix)
  const void* pool = nullptr;  ///< paged addressing
  std::int64_t block_stride = 0, head_stride = 0, token_stride = 0;
  RowTiling tiling;  ///< paged addressing
};

/// One segment of the logical KV axis: the shared prefix, or the batch's own KV (DESIGN.md
/// KvSource). `length[b]` tokens of batch b, addressed contiguously per batch or through a block
/// table. Key, value and key_rope share the addressing.
struct KvSegment {
  bool paged = false;
  const std::int32_t* block_table = nullptr;  ///< paged: [b][k] at block_table[b*table_stride + k*table_col_stride]
  std::int64_t table_stride = 0;
  std::int64_t table_col_stride = 1;
  /// The id of block k of batch b.
  std::int64_t block_id(std::int64_t b, std::int64_t k) const { return block_table[b * table_stride + k * table_col_stride]; }
  std::int64_t block_size = 0;
  KvTensorRows key, value, key_rope;  ///< key_rope used only when Problem::rope_dim > 0
  std::vector<std::int64_t> length;
};

/// Which rows of a KvRun a consumer reads: K with its rope part, V, or both.
enum class KvParts : std::uint8_t { kKeys = 1, kValues = 2, kAll = 3 };

/// A run of consecutive tokens [t, t + count) of one (segment, batch, head) with constant strides.
/// Rows of an NZ cache are tiled (RowTiling); Problem::untile copies them into contiguous rows.
struct KvRun {
  const void* key = nullptr;
  const void* value = nullptr;
  const void* key_rope = nullptr;
  std::int64_t key_stride = 0, value_stride = 0, rope_stride = 0;  ///< elements between tokens
  std::int64_t key_head_stride = 0, value_head_stride = 0, rope_head_stride = 0;  ///< between KV heads
  std::int64_t count = 0;
  RowTiling key_tiling, value_tiling, rope_tiling;

  bool tiled() const { return key_tiling.tiled() || value_tiling.tiled() || rope_tiling.tiled(); }

  /// The same tokens [t, t + n) of KV head `dh` heads further on.
  KvRun sub(std::int64_t t, std::int64_t n, std::int64_t dh, std::size_t elem_size) const {
    auto at = [&](const void* base, std::int64_t stride, std::int64_t head_stride) {
      return base ? static_cast<const void*>(static_cast<const std::byte*>(base) +
                                             (t * stride + dh * head_stride) * static_cast<std::int64_t>(elem_size))
                  : nullptr;
    };
    KvRun r = *this;
    r.key = at(key, key_stride, key_head_stride);
    r.value = at(value, value_stride, value_head_stride);
    r.key_rope = at(key_rope, rope_stride, rope_head_stride);
    r.count = n;
    return r;
  }
};

/// Byte view of a mask or bias indexed by (batch, [head,] physical row, physical column).
struct BiasIndex {
  const void* base = nullptr;
  DType dtype = DType::U8;
  std::int64_t batch_stride = 0;  ///< 0 when broadcast over batch
  std::int64_t head_stride = 0;   ///< pse only
  std::int64_t row_stride = 0;    ///< 0 when one row serves every query row
  std::int64_t col_stride = 1;
};

/// How stored K or V elements become real values (FIA-SPEC 12): float elements of
/// Problem::kv_dtype as they are, or int8 / int4 (eight per int32, lowest nibble first, 12.6)
/// dequantized as x_real = (x + offset) * scale (12.1, 25.1 #14).
enum class KvFormat : std::uint8_t { kFloat, kInt8, kInt4 };

/// The antiquant scale and offset of element (b, h, t, d) of K or V (FIA-SPEC 12.3), factored as
///   scale  = channel_scale[h * D + d] * token_scale(b, h, j)
///   offset = channel_offset[h * D + d] + token_offset(b, h, j)
/// where every mode has at most one non-trivial factor of each: per-channel, per-tensor and
/// per-tensor x per-head modes fill the channel tables (per-tensor values repeated) and have no
/// token factor; per-token modes (1, 3, 4, 5) leave the channel tables empty (scale 1, offset 0).
/// j is the logical column on the prefix-inclusive axis of batch b.
struct Antiquant {
  std::vector<float> channel_scale;   ///< KV_N * D, or empty (all 1)
  std::vector<float> channel_offset;  ///< KV_N * D, or empty (all 0)

  bool per_token = false;             ///< token factors present (modes 1, 3, 4, 5)
  const float* token_scale = nullptr;   ///< F32 elements
  const float* token_offset = nullptr;  ///< F32 elements, or null (offset 0)
  /// Element offset of (b, h, column): b * batch_stride + h * head_stride + (column + column_offset[b])
  /// * token_stride; column_offset folds in KV left padding (25.1 #8). head_stride is 0 for modes
  /// 1 and 4.
  std::int64_t batch_stride = 0, head_stride = 0, token_stride = 0;
  std::vector<std::int64_t> column_offset;  ///< per batch
  /// Modes 4 and 5: the scales live beside the paged cache, indexed through the own segment's
  /// block table: block blk = block_table[b][t / block_size], element blk * block_stride +
  /// h * head_stride + (t % block_size) * token_stride, t = j - prefix_len.
  bool paged = false;
  std::int64_t block_stride = 0;
};

/// How the softmax numerators P are formed before P·V (FIA-SPEC 25.3). In every case l is the sum
/// of the unrounded E = exp(S - m) over the row (m the exact row max) and LSE = m + ln(l):
///   kRoundE:        P = round(E) to `round_to`; O = (P·V) / l (FIA non-TND, PFA; section 5 step 7)
///   kRunningMax:    split fuse (21.6): over tiles of `tile_cols` keys from column 0, with the
///                   running max m_t through the tile (the sink included), P = round(exp(S - m_t))
///                   to `round_to`, times exp(m_t - m); O = (P·V) / l. Without rounding (`round_to`
///                   F32) this is E itself.
///   kNormalizeFirst: P = round(E / l) to `round_to`, l including the sink term; O = P·V (IFA).
/// `round_to` F32 means no rounding.
struct PRule {
  enum class Kind : std::uint8_t { kRoundE, kRunningMax, kNormalizeFirst };
  Kind kind = Kind::kRoundE;
  DType round_to = DType::F16;
  std::int64_t tile_cols = 512;  ///< kRunningMax only
};

/// The canonical problem (FIA-SPEC 1): for batch b, query head n (KV head n / group),
/// logical query rows i in [0, act_q[b]) and logical KV columns j in [0, prefix_len + act_kv[b]).
struct Problem {
  // --- sizes -----------------------------------------------------------------------------
  std::int64_t batch = 0;
  std::int64_t num_heads = 0;     ///< Q_N
  std::int64_t num_kv_heads = 0;  ///< KV_N
  std::int64_t group = 1;         ///< G = Q_N / KV_N
  std::int64_t qk_dim = 0;        ///< QK_D (without rope)
  std::int64_t rope_dim = 0;      ///< 0 without MLA rope
  std::int64_t v_dim = 0;         ///< V_D
  DType dtype = DType::F16;       ///< query element type (F16, BF16, F32, I8); also K/V's when kv_format is kFloat
  DType kv_dtype = DType::F16;    ///< stored K/V element type: dtype, I8, or I32 (packed int4); strides count these
  DType rope_dtype = DType::F16;  ///< query_rope / key_rope element type (15.2)
  KvFormat kv_format = KvFormat::kFloat;  ///< FIA-SPEC 12
  EntryPoint entry_point = EntryPoint::kFusedInferAttentionScore;  ///< the operator called
  PRule p_rule;                           ///< from the entry point, layout and inner_precise (25.3)
  Antiquant key_antiquant, value_antiquant;  ///< used when kv_format is not kFloat

  // --- lengths (FIA-SPEC 7, 11) ---------------------------------------------------------
  std::vector<std::int64_t> act_q;   ///< computed query rows per batch
  std::vector<std::int64_t> q_start; ///< physical row of logical row 0 (left padding), per batch
  std::int64_t prefix_len = 0;       ///< P
  std::vector<std::int64_t> kv_col_offset;  ///< physical mask/pse column = j + kv_col_offset[b]

  // --- operands ---------------------------------------------------------------------------
  RowIndex query;       ///< rows i (physical row q_start[b] + i already folded into batch_offset)
  RowIndex query_rope;  ///< as query, when rope_dim > 0
  std::vector<KvSegment> segments;  ///< in logical order: [shared prefix,] own KV

  // --- visibility (FIA-SPEC 6) ------------------------------------------------------------
  /// Band: column j is in band for row i iff i + band_lo[b] <= j <= i + band_hi[b].
  std::vector<std::int64_t> band_lo, band_hi;
  bool has_mask = false;
  BiasIndex mask;  ///< full mask (modes 0/1, legacy decode) or tree mask; nonzero byte = masked
  /// FIA-SPEC 6.5 (sparse_mode 9): `mask` is a tree mask over the last act_q keys of each batch:
  /// (b, i, j) is masked iff j >= tree_start[b] (= L - act_q[b]) and the byte at tree_offset[b] +
  /// i * tree_row[b] + (j - tree_start[b]) * mask.col_stride is nonzero; earlier keys are visible.
  bool tree_mask = false;
  std::vector<std::int64_t> tree_start, tree_offset, tree_row;

  // --- additive terms ------------------------------------------------------------------------
  float scale = 1.0f;
  bool has_pse = false;
  BiasIndex pse;
  bool has_sink = false;
  std::vector<float> sink;  ///< per query head

  /// fia::Options::softmax_max (partial attention): row i of (b, n) takes E against
  /// max(own row max, softmax_max[softmax_max_rows.offset(b, n, i)]). Null base: absent.
  RowIndex softmax_max_rows;
  float softmax_max_floor(std::int64_t b, std::int64_t n, std::int64_t i) const {
    return static_cast<const float*>(softmax_max_rows.base)[softmax_max_rows.offset(b, n, i)];
  }

  /// FIA-SPEC 14: the output quantized to int8 (out_dtype I8). scale/offset hold one value
  /// (per-tensor) or Q_N * V_D values, element (n, d) at n * V_D + d (per-channel); offset is
  /// empty without quant_offset2. Rows that are computed, fully masked ones included (quantize(0)),
  /// are quantized; rows never computed stay 0, except that a decode query (Q_S = 1) of a batch
  /// with no key gives quantize(0) (25.1 #3).
  struct PostQuant {
    bool on = false;
    PostQuantRounding rounding = PostQuantRounding::kDevice;
    std::vector<float> scale, offset;
    bool zero_kv_rows = false;  ///< Q_S = 1: batches with L = 0 give quantize(0)
  } post_quant;

  /// FIA-SPEC 13.1: int8 query, key and value ("full quantization"; dtype and kv_dtype I8,
  /// kv_format kFloat), computed by its own pipeline (reference/full_quant.cpp). dequant1 and
  /// dequant2 are already cut to 19 bits (numeric/full_quant.hpp), quant1 and scale16 are the fp16
  /// values of quant_scale1 and the scale attribute. The output is F16, or I8 with post_quant.
  struct FullQuant {
    bool on = false;
    float dequant1 = 1.0f, quant1 = 1.0f, dequant2 = 1.0f, scale16 = 1.0f;
  } full_quant;

  /// FIA-SPEC 13.3: MLA full quantization, an int8 query and int8 key (the latent cache, also V
  /// when the head dim is 512, 25.1 #11) with BF16 rope inputs (Problem::rope_dtype); computed by its
  /// own pipeline (reference/mla_full_quant.cpp) with dtype and kv_dtype I8, kv_format kFloat and
  /// a BF16 output. The query dequant scale of row i of (b, n) is the F32 element at
  /// `dequant_query.offset(b, n, i)`; key_scale and value_scale are the per-tensor
  /// key_antiquant_scale and value_antiquant_scale.
  struct MlaFullQuant {
    bool on = false;
    RowIndex dequant_query;
    float key_scale = 1.0f, value_scale = 1.0f;
  } mla_full_quant;

  /// Decode MLA (FIA-SPEC 15.4, 25.1 #11): V := K, the value rows are the key rows (`value` is
  /// ignored), so each latent row is stored, and read, once.
  bool values_are_keys = false;

  /// Set by plan(): the kernels may take bf16 dot products (cpu/isa.hpp bf16_dots_enabled() at
  /// plan time, and kernels built with them), so that a plan computes one way however the switch
  /// changes while it runs.
  bool bf16_dots = false;
  /// Set by plan(): the kernels may take AMX tiles (cpu/amx.hpp amx_enabled() at plan time; int8
  /// full quant: AMX-INT8, cpu/isa.cpp read_kernel_settings).
  bool amx = false;

  /// FIA-SPEC 19: the query is empty; nothing was validated and nothing is computed. out_shape is
  /// the query's shape in the output layout (the query's own shape when the layout is unknown).
  bool empty_query = false;

  // --- outputs -------------------------------------------------------------------------------
  DType out_dtype = DType::F16;
  std::vector<std::int64_t> out_shape;  ///< attention_out (FIA-SPEC 3.1)
  bool lse = false;                     ///< softmax_lse_flag
  std::vector<std::int64_t> lse_shape;  ///< (B, Q_N, Q_S, 1) or (T, Q_N, 1); {1} without the flag
  Layout out_layout = Layout::kBSH;
  bool token_layout = false;                 ///< TND/NTD family: rows addressed by q_token_start
  std::vector<std::int64_t> q_token_start;   ///< token layouts: first T row of each batch

  /// Row addressing of an attention_out tensor of shape out_shape: row i of (b, n) is the
  /// physical row q_start[b] + i.
  RowIndex out_index(const MutableTensorView& out) const;
  /// Row addressing of a softmax_lse tensor of shape lse_shape (one F32 per row).
  RowIndex lse_index(const MutableTensorView& lse_view) const;

  // --- derived helpers -----------------------------------------------------------------------
  std::int64_t kv_len(std::int64_t b) const {
    std::int64_t n = 0;
    for (const auto& s : segments) n += s.length[b];
    return n;
  }
  /// True when element (b, i, j) of the full or tree mask masks the pair.
  bool masked(std::int64_t b, std::int64_t i, std::int64_t j) const {
    const auto* m = static_cast<const std::uint8_t*>(mask.base);
    if (tree_mask) {
      const std::int64_t t = j - tree_start[b];
      return t >= 0 && m[tree_offset[b] + i * tree_row[b] + t * mask.col_stride] != 0;
    }
    return m[b * mask.batch_stride + (q_start[b] + i) * mask.row_stride +
             (j + kv_col_offset[b]) * mask.col_stride] != 0;
  }
  /// True when key j is visible to query row i of batch b: inside the band and not masked (6).
  bool visible(std::int64_t b, std::int64_t i, std::int64_t j) const {
    return j >= i + band_lo[b] && j <= i + band_hi[b] && !(has_mask && masked(b, i, j));
  }
  /// Element offset in `pse` of (b, query head n, row i, key j) (FIA-SPEC 8.1).
  std::int64_t pse_offset(std::int64_t b, std::int64_t n, std::int64_t i, std::int64_t j) const {
    return b * pse.batch_stride + n * pse.head_stride + (q_start[b] + i) * pse.row_stride +
           (j + kv_col_offset[b]) * pse.col_stride;
  }
  /// Locates logical token j (on the prefix-inclusive axis) of batch b, KV head h.
  KvRun locate(std::int64_t b, std::int64_t h, std::int64_t j) const;
  /// The rows `parts` of a tiled run (NZ cache, FIA-SPEC 9.1) copied into `scratch` as contiguous
  /// rows of one KV head (the others' pointers null); a run that is not tiled comes back as it
  /// is. When V is K (decode MLA, 25.1 #11) the copy serves both. The result is valid until the
  /// next call with the same scratch.
  KvRun untile(const KvRun& run, KvParts parts, std::vector<std::byte>* scratch) const;
  /// The rows `parts` of logical token j of batch b, KV head h as contiguous rows (count 1):
  /// locate then untile.
  KvRun token_rows(std::int64_t b, std::int64_t h, std::int64_t j, KvParts parts,
                   std::vector<std::byte>* scratch) const {
    KvRun run = locate(b, h, j);
    run.count = 1;
    return untile(run, parts, scratch);
  }
  /// Element offset of the token factors (token_scale / token_offset) of logical column j of
  /// batch b, KV head h, in a per-token Antiquant (FIA-SPEC 12.3, 25.1 #8).
  std::int64_t token_factor_offset(const Antiquant& q, std::int64_t b, std::int64_t h, std::int64_t j) const;
  /// True when the KV heads of one token lie closer together than consecutive tokens of one head
  /// (BSH/BSND KV, (block_num, block_size, H) caches): reading all heads of a token is sequential.
  bool kv_heads_interleaved() const;
};

/// True when the query and the K rows of `p` are bf16 (float KV, no antiquant).
inline bool bf16_key_rows(const Problem& p) {
  return p.dtype == DType::BF16 && p.kv_dtype == DType::BF16 && p.kv_format == KvFormat::kFloat;
}

/// True when Q·Kᵀ of `p` may take bf16 dot products (cpu/bf16_dots-inl.h): bf16_key_rows,
/// planned where they are taken (Problem::bf16_dots, cpu/isa.hpp).
inline bool bf16_key_dots(const Problem& p) { return p.bf16_dots && bf16_key_rows(p); }

/// True when Q·Kᵀ of the wide items of `p` that do not run in place takes AMX tiles (cpu/amx.hpp,
/// cpu/prefill_dots-inl.h): bf16_key_rows, planned where they are taken (Problem::amx), with key
/// and rope dims in whole chunks of 32 (one tile row of K). Where amx_wide_values holds too, no
/// item runs in place (cpu/attention_item.cpp).
inline bool amx_wide_keys(const Problem& p) {
  return p.amx && bf16_key_rows(p) && p.qk_dim % 32 == 0 && p.rope_dim % 32 == 0;
}

/// True when Q·Kᵀ of the wide (prefill) items of `p` takes them (cpu/prefill_dots-inl.h):
/// bf16_key_dots, with key and rope dims in whole pairs.
inline bool bf16_wide_key_dots(const Problem& p) {
  return bf16_key_dots(p) && p.qk_dim % 2 == 0 && p.rope_dim % 2 == 0;
}

/// True when the int8 full-quant products of `p` (FIA-SPEC 13.1) take AMX-INT8 tiles
/// (cpu/full_quant_tiles-inl.h): planned where they are taken (Problem::amx: the CPU has them, the
/// setting allows them, the kernels' instruction set is AVX-512), K rows in whole 64-byte tile rows
/// and V dims in whole tiles of 16. The tiles' products are the exact int32 ones of the byte quads,
/// so the results keep their bytes.
inline bool full_quant_tiles(const Problem& p) {
  return p.amx && p.full_quant.on && p.qk_dim % 64 == 0 && p.v_dim % 16 == 0;
}

/// True when P·V of the wide items of `p` that do not run in place takes AMX tiles
/// (cpu/amx.hpp, cpu/prefill_tiles-inl.h), where their Q·Kᵀ takes the tiles or bf16 dot products:
/// bf16_key_rows (V bf16 too), planned where they are taken (Problem::amx), V dims in whole tiles
/// of 16, and P E rounded to bf16 or kept in f32 (FIA-SPEC 25.3: non-TND layouts, and TND's high
/// precision).
inline bool amx_wide_values(const Problem& p) {
  return p.amx && bf16_key_rows(p) && p.v_dim % 16 == 0 && p.p_rule.kind == PRule::Kind::kRoundE &&
         (p.p_rule.round_to == DType::BF16 || p.p_rule.round_to == DType::F32);
}

/// True when P·V of the in-place and other wide items of `p` may take them too: P the exponentials rounded to bf16 (FIA-SPEC 25.3,
/// first row: PRule kRoundE to bf16), so that P is exact in bf16.
inline bool bf16_value_dots(const Problem& p) {
  return bf16_key_dots(p) && p.p_rule.kind == PRule::Kind::kRoundE && p.p_rule.round_to == DType::BF16;
}

}  // namespace fia::detail
