// FiaArgs: every input and attribute of FusedInferAttentionScore V4 under its torch_npu name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fia/tensor.hpp"

namespace fia {

/// The default of `pre_tokens` / `next_tokens` (FIA-SPEC Appendix A).
inline constexpr std::int64_t kIntMax = 2147483647;

/// The operator a call came through. FIA, IncreFlashAttention (IFA) and PromptFlashAttention (PFA)
/// compute the same attention, but the vendor's goldens for each round the softmax numerators P
/// differently, and fia follows the path's golden (FIA-SPEC 25.3):
///   kFusedInferAttentionScore: E = exp(S - m) rounded to the query dtype before P·V, except on
///     the TND/NTD layouts ("split fuse"), where P stays f32 (inner_precise bit 0 = 0) or is
///     rounded to fp16 per 512-key tile against the running max (bit 0 = 1);
///   kIncreFlashAttention: P = E / l normalised in f32, then rounded to fp16 for an fp16 query;
///   kPromptFlashAttention: as FIA on non-token layouts, whatever the layout.
/// The C API and the Python functions set it from the entry point called; C++ callers of the FIA
/// operator keep the default.
enum class EntryPoint {
  kFusedInferAttentionScore,  ///< aclnnFusedInferAttentionScore V1-V4, npu_fused_infer_attention_score(_v2)
  kIncreFlashAttention,       ///< aclnnIncreFlashAttention V1-V4, npu_incre_flash_attention
  kPromptFlashAttention,      ///< aclnnPromptFlashAttention V1-V3, npu_prompt_flash_attention
};

/// All inputs of one FusedInferAttentionScore call (FIA-SPEC 2.1), named as the torch_npu v1
/// keyword arguments, with FIA's defaults. An optional tensor is absent when its view is not
/// `present()`; an optional int array is absent when the std::optional is empty.
///
/// Tensors are views: the data must stay alive and unchanged from `plan()` to `run()`.
struct FiaArgs {
  // --- tensors -------------------------------------------------------------------------
  TensorView query;               ///< Q: layout per `input_layout` (FIA-SPEC 3.1)
  std::vector<TensorView> key;    ///< K: one tensor, or B tensors of batch 1 (tensor list, 10)
  std::vector<TensorView> value;  ///< V: same structure as key
  TensorView pse_shift;           ///< additive position bias (8)
  TensorView atten_mask;          ///< BOOL/INT8/UINT8, nonzero = masked (6)
  std::optional<std::vector<std::int64_t>> actual_seq_lengths;     ///< per-batch query lengths (7)
  std::optional<std::vector<std::int64_t>> actual_seq_lengths_kv;  ///< per-batch KV lengths (7)
  TensorView dequant_scale1;      ///< full quant (13)
  TensorView quant_scale1;        ///< full quant (13)
  TensorView dequant_scale2;      ///< full quant (13)
  TensorView quant_scale2;        ///< post-quant scale (14)
  TensorView quant_offset2;       ///< post-quant offset (14)
  TensorView antiquant_scale;     ///< combined K/V antiquant scale (12)
  TensorView antiquant_offset;    ///< combined K/V antiquant offset (12)
  TensorView block_table;         ///< paged KV block map, INT32 [B, max_blocks] (9)
  TensorView query_padding_size;  ///< query left padding, INT64 [1] (7.4)
  TensorView kv_padding_size;     ///< KV left padding, INT64 [1] (7.4)
  TensorView key_antiquant_scale;     ///< (12)
  TensorView key_antiquant_offset;    ///< (12)
  TensorView value_antiquant_scale;   ///< (12)
  TensorView value_antiquant_offset;  ///< (12)
  TensorView key_shared_prefix;       ///< shared prefix keys, batch 1 (11)
  TensorView value_shared_prefix;     ///< shared prefix values, batch 1 (11)
  std::optional<std::vector<std::int64_t>> actual_shared_prefix_len;  ///< [P] (11)
  TensorView query_rope;                ///< MLA rope part of Q (15)
  TensorView key_rope;                  ///< MLA rope part of K (15)
  TensorView key_rope_antiquant_scale;  ///< reserved, no effect (15.2)
  TensorView dequant_scale_query;       ///< MLA full quant (13.3)
  TensorView learnable_sink;            ///< per-query-head sink logit [num_heads] (16)

  // --- attributes ----------------------------------------------------------------------
  std::int64_t num_heads = 1;            ///< Q_N
  double scale = 1.0;                    ///< multiplier of Q·Kᵀ (applied as float32)
  std::int64_t pre_tokens = kIntMax;     ///< band width before the diagonal (6.4)
  std::int64_t next_tokens = kIntMax;    ///< band width after the diagonal (6.4)
  std::string input_layout = "BSH";      ///< one of the strings of FIA-SPEC 3.1
  std::int64_t num_key_value_heads = 0;  ///< KV_N; 0 = num_heads
  std::int64_t sparse_mode = 0;          ///< 0..4 (9 = tree mask, not built yet)
  std::int64_t inner_precise = 0;        ///< 0..3 (18)
  std::int64_t block_size = 0;           ///< tokens per KV block (paged)
  std::int64_t antiquant_mode = 0;
  bool softmax_lse_flag = false;         ///< produce softmax_lse (17)
  std::int64_t key_antiquant_mode = 0;
  std::int64_t value_antiquant_mode = 0;
  std::int64_t query_quant_mode = 0;

  // --- the call itself -----------------------------------------------------------------
  EntryPoint entry_point = EntryPoint::kFusedInferAttentionScore;  ///< numerics per path (25.3)
};

/// Which implementation computes the result.
enum class Backend {
  kDefault,    ///< `FIA_BACKEND` from the environment ("cpu" or "reference"), else kCpu
  kCpu,        ///< flash-style kernels, f32 accumulation, multithreaded
  kReference,  ///< float64 transcription of FIA-SPEC 1 and 5
};

/// Which formula quantizes the attention output to int8 when quant_scale2 is given (FIA-SPEC 14.1).
enum class PostQuantRounding {
  /// The NPU kernel's (25.1 #3, the default): y = O * scale + offset in float32, rounded to fp16
  /// with ties away from zero, then to an integer with ties away from zero, saturated to int8.
  kDevice,
  /// The vendor's test golden: fp16 (round to nearest even) after each of O, O * scale and
  /// + offset, clamped to [-256, 255], rounded half to even, saturated. Differs from kDevice by 1
  /// at exact .5 ties and through fp16 double rounding; use it to compare with golden outputs.
  kGolden,
};

/// How a call is validated and run.
struct Options {
  /// Also enforce the Ascend hardware limits (FIA-SPEC 25.2), to learn what an NPU would reject.
  bool strict = false;
  Backend backend = Backend::kDefault;
  /// Worker threads for the cpu backend; 0 = FIA_NUM_THREADS, else OMP_NUM_THREADS, else all the
  /// CPUs the process may use. Results do not depend on it.
  int threads = 0;
  /// The post-quantization formula (FIA-SPEC 14.1); only used when quant_scale2 is given.
  PostQuantRounding post_quant_rounding = PostQuantRounding::kDevice;

  // --- partial attention: fia extensions, not FIA arguments ------------------------------
  // For attention over part of the keys, merged with the other parts by their LSEs (FIA-SPEC 17;
  // ring attention, fia.distributed, docs/distributed.md). Merging parts computed this way gives
  // the single call's result up to float32 rounding, P rounding included (25.3).

  /// attention_out in float32 whatever the query dtype (not with quant_scale2): the partial
  /// result before its rounding to 16 bits. P is still rounded as the call's path rounds it.
  bool float32_out = false;
  /// Absent, or F32 of softmax_lse's shape (FIA-SPEC 17; requires softmax_lse_flag): per query
  /// row a value m0, -inf or finite. A row that sees any key takes E = exp(S - m) against
  /// m = max(own row max, m0) instead of its own max, so parts given the whole row's max round E
  /// (25.3) as the single call does; l, the output and the LSE follow from that m. Only on paths
  /// that round E itself (not IncreFlashAttention, not the fp16 tiles of inner_precise 1 on token
  /// layouts, not full quant). Like the FiaArgs tensors, the view must stay alive and its shape
  /// unchanged from plan() to the last run() of the plan (run(plan, args, ...) included); its
  /// values are read, and checked again, by each run().
  TensorView softmax_max;
};

}  // namespace fia
