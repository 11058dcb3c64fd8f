// One negative test per validation rule (FIA-SPEC 20, 25.2): each mutates a valid call so that
// exactly one rule breaks and expects the status code and the torch_npu parameter name. Rules
// marked strict are Ascend hardware limits: the default mode must accept those calls.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "support/call_builder.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

struct Rule {
  std::string name;
  CallSpec base;
  std::function<void(TestCall&)> mutate;
  std::string parameter;
  StatusCode code = StatusCode::kInvalidArgument;
  bool strict = false;  ///< a hardware limit: rejected only in strict mode
};

void PrintTo(const Rule& r, std::ostream* os) { *os << r.name; }

CallSpec prefill() {
  CallSpec s;
  s.layout = "BNSD";
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = 8;
  s.kv_seq = 24;
  s.qk_dim = 64;
  return s;
}

CallSpec decode() {
  CallSpec s = prefill();
  s.layout = "BSH";
  s.q_seq = 1;
  return s;
}

CallSpec tnd() {
  CallSpec s = prefill();
  s.layout = "TND";
  s.act_q = std::vector<std::int64_t>{3, 5};
  s.act_kv = std::vector<std::int64_t>{7, 9};
  return s;
}

CallSpec paged() {
  CallSpec s = prefill();
  s.storage = KvStorage::kPaged;
  s.block_size = 16;
  s.act_kv = std::vector<std::int64_t>{20, 24};
  return s;
}

CallSpec tensor_list() {
  CallSpec s = prefill();
  s.storage = KvStorage::kTensorList;
  return s;
}

CallSpec with_prefix() {
  CallSpec s = prefill();
  s.prefix_seq = 5;
  return s;
}

CallSpec padded() {
  CallSpec s = prefill();
  s.act_q = std::vector<std::int64_t>{4, 6};
  s.act_kv = std::vector<std::int64_t>{10, 20};
  s.query_padding = 1;
  s.kv_padding = 2;
  return s;
}

CallSpec with(CallSpec s, const std::function<void(CallSpec&)>& f) {
  f(s);
  return s;
}

OwnedTensor zeros(DType t, std::vector<std::int64_t> shape) { return OwnedTensor(t, std::move(shape)); }

std::vector<Rule> rules() {
  using A = TestCall&;
  const auto kInvalid = StatusCode::kInvalidArgument;
  const auto kNull = StatusCode::kNullArgument;
  const auto kUnsup = StatusCode::kUnsupported;
  std::vector<Rule> r = {
      // 20.1 presence, sizes, dtypes, quantization parameters
      {"query_missing", prefill(), [](A c) { c.args.query = {}; }, "query", kNull},
      {"key_missing", prefill(), [](A c) { c.args.key.clear(); }, "key", kNull},
      {"value_missing", prefill(), [](A c) { c.args.value.clear(); }, "value", kNull},
      {"value_count", tensor_list(), [](A c) { c.args.value.pop_back(); }, "value", kInvalid},
      {"negative_dim", prefill(), [](A c) { c.args.query.shape[2] = -1; }, "query", kInvalid},
      {"null_data", prefill(), [](A c) { c.args.query.data = nullptr; }, "query", kNull},
      {"strides_count", prefill(), [](A c) { c.args.query.strides = {1, 2}; }, "query", kInvalid},
      {"inner_stride", prefill(), [](A c) { c.args.key[0].strides = {24 * 64 * 2, 24 * 64, 64, 2}; }, "key", kUnsup},
      {"query_dtype", prefill(), [](A c) { c.args.query.dtype = DType::I32; }, "query", kInvalid},
      {"query_f32_strict", with(prefill(), [](CallSpec& s) { s.dtype = DType::F32; }), nullptr, "query", kInvalid, true},
      {"key_dtype", prefill(), [](A c) { c.args.key[0].dtype = DType::U8; c.args.value[0].dtype = DType::U8; }, "key", kInvalid},
      {"key_value_dtype_differ", prefill(), [](A c) { c.args.value[0].dtype = DType::BF16; }, "value", kInvalid},
      {"list_dtype", tensor_list(), [](A c) { c.args.key[1].dtype = DType::BF16; }, "key", kInvalid},
      {"int8_query_float_kv", prefill(), [](A c) { c.args.query.dtype = DType::I8; }, "key", kInvalid},
      {"int8_kv_needs_scale", prefill(), [](A c) { c.args.key[0].dtype = DType::I8; c.args.value[0].dtype = DType::I8; }, "key_antiquant_scale", kInvalid},
      {"kv_dtype_ne_query", prefill(), [](A c) { c.args.key[0].dtype = DType::BF16; c.args.value[0].dtype = DType::BF16; }, "key", kInvalid},
      {"antiquant_scale_unused", prefill(), [](A c) { c.args.antiquant_scale = c.keep(zeros(DType::F16, {1})); }, "antiquant_scale", kInvalid},
      {"key_antiquant_scale_unused", prefill(), [](A c) { c.args.key_antiquant_scale = c.keep(zeros(DType::F16, {1})); }, "key_antiquant_scale", kInvalid},
      {"value_antiquant_offset_unused", prefill(), [](A c) { c.args.value_antiquant_offset = c.keep(zeros(DType::F16, {1})); }, "value_antiquant_offset", kInvalid},
      {"dequant_scale1_unused", prefill(), [](A c) { c.args.dequant_scale1 = c.keep(zeros(DType::F32, {1})); }, "dequant_scale1", kInvalid},
      {"dequant_scale_query_unused", prefill(), [](A c) { c.args.dequant_scale_query = c.keep(zeros(DType::F32, {1})); }, "dequant_scale_query", kInvalid},
      {"quant_offset2_alone", prefill(), [](A c) { c.args.quant_offset2 = c.keep(zeros(DType::F32, {1})); }, "quant_offset2", kInvalid},
      {"post_quant_scale_dtype", prefill(), [](A c) { c.args.quant_scale2 = c.keep(zeros(DType::F16, {1})); }, "quant_scale2", kInvalid},
      {"scale_not_float32", prefill(), [](A c) { c.args.scale = 1e39; }, "scale", kInvalid},
      {"scale_nan", prefill(), [](A c) { c.args.scale = std::nan(""); }, "scale", kInvalid},
      // 20.2 layout, ranks, heads, head dims
      {"value_head_dim_zero", prefill(), [](A c) { c.args.value[0].shape[3] = 0; }, "value", kInvalid},
      {"batch_cap", decode(), [](A c) { c.args.query.shape[0] = (1 << 24) + 1; }, "query", kInvalid},
      {"num_heads_zero", prefill(), [](A c) { c.args.num_heads = 0; }, "num_heads", kInvalid},
      {"bad_layout", prefill(), [](A c) { c.args.input_layout = "BSND_TND"; }, "input_layout", kInvalid},
      {"query_rank", prefill(), [](A c) { c.args.query.shape.push_back(1); }, "query", kInvalid},
      {"bsh_heads_divide_h", decode(), [](A c) { c.args.num_heads = 3; c.args.num_key_value_heads = 1; }, "num_heads", kInvalid},
      {"query_heads_axis", prefill(), [](A c) { c.args.num_heads = 2; }, "num_heads", kInvalid},
      {"tnd_needs_lengths", tnd(), [](A c) { c.args.actual_seq_lengths.reset(); }, "actual_seq_lengths", kInvalid},
      {"kv_heads_negative", prefill(), [](A c) { c.args.num_key_value_heads = -1; }, "num_key_value_heads", kInvalid},
      {"kv_heads_not_dividing", prefill(), [](A c) { c.args.num_key_value_heads = 3; }, "num_key_value_heads", kInvalid},
      {"key_rank", prefill(), [](A c) { c.args.key[0].shape = {2, 48, 64}; }, "key", kInvalid},
      {"value_rank", prefill(), [](A c) { c.args.value[0].shape = {2, 48, 64}; }, "value", kInvalid},
      {"key_hidden_not_divisible", decode(), [](A c) { c.args.key[0].shape[2] = 127; c.args.value[0].shape[2] = 127; }, "key", kInvalid},
      {"key_heads_axis", prefill(), [](A c) { c.args.num_key_value_heads = 1; }, "key", kInvalid},
      {"value_seq_mismatch", prefill(), [](A c) { c.args.value[0].shape[2] = 20; }, "value", kInvalid},
      {"key_head_dim", prefill(), [](A c) { c.args.key[0].shape[3] = 32; }, "key", kInvalid},
      {"key_batch", prefill(), [](A c) { c.args.key[0].shape[0] = 1; c.args.value[0].shape[0] = 1; }, "key", kInvalid},
      {"list_layout", tensor_list(), [](A c) { c.args.input_layout = "TND"; c.args.query.shape = {16, 4, 64}; c.args.actual_seq_lengths = {{8, 16}}; }, "key", kInvalid},
      {"list_count", with(tensor_list(), [](CallSpec& s) { s.batch = 3; }), [](A c) { c.args.key.pop_back(); c.args.value.pop_back(); }, "key", kInvalid},
      {"list_member_batch", tensor_list(), [](A c) { c.args.key[1].shape[0] = 2; c.args.value[1].shape[0] = 2; }, "key", kInvalid},
      {"list_value_dim", tensor_list(), [](A c) { c.args.value[1].shape[3] = 32; }, "value", kInvalid},
      // 20.6 paged attention
      {"paged_rank", paged(), [](A c) { c.args.key[0].shape = {64, 16}; }, "key", kInvalid},
      {"block_size_zero", paged(), [](A c) { c.args.block_size = 0; }, "block_size", kInvalid},
      {"block_axis", paged(), [](A c) { c.args.block_size = 8; }, "key", kInvalid},
      {"block_table_dtype", paged(), [](A c) { c.args.block_table.dtype = DType::I64; }, "block_table", kInvalid},
      {"block_table_rank", paged(), [](A c) { c.args.block_table.shape = {c.args.block_table.numel()}; }, "block_table", kInvalid},
      {"block_table_batch", paged(), [](A c) { c.args.block_table.shape = {1, c.args.block_table.numel()}; }, "block_table", kInvalid},
      {"paged_needs_lengths", paged(), [](A c) { c.args.actual_seq_lengths_kv.reset(); }, "actual_seq_lengths_kv", kInvalid},
      {"paged_length_cap", paged(), [](A c) { (*c.args.actual_seq_lengths_kv)[0] = 1000; }, "actual_seq_lengths_kv", kInvalid},
      {"block_id_out_of_range", paged(), [](A c) { const_cast<std::int32_t*>(static_cast<const std::int32_t*>(c.args.block_table.data))[0] = 99; }, "block_table", kInvalid},
      {"block_id_negative", paged(), [](A c) { const_cast<std::int32_t*>(static_cast<const std::int32_t*>(c.args.block_table.data))[1] = -1; }, "block_table", kInvalid},
      // 15 rope
      {"rope_pair", with(prefill(), [](CallSpec& s) { s.rope_dim = 16; }), [](A c) { c.args.key_rope = {}; }, "key_rope", kInvalid},
      {"rope_with_list", with(tensor_list(), [](CallSpec& s) { s.rope_dim = 0; }), [](A c) { c.args.query_rope = c.args.query; c.args.key_rope = c.args.key[0]; }, "key_rope", kInvalid},
      {"query_rope_dtype", with(prefill(), [](CallSpec& s) { s.rope_dim = 16; }), [](A c) { c.args.query_rope.dtype = DType::BF16; }, "query_rope", kInvalid},
      {"query_rope_shape", with(prefill(), [](CallSpec& s) { s.rope_dim = 16; }), [](A c) { c.args.query_rope.shape[2] = 3; }, "query_rope", kInvalid},
      {"key_rope_dim", with(prefill(), [](CallSpec& s) { s.rope_dim = 16; }), [](A c) { c.args.key_rope.shape[3] = 8; }, "key_rope", kInvalid},
      // 20.3 sequence lengths
      {"asl_length", with(prefill(), [](CallSpec& s) { s.batch = 3; }), [](A c) { c.args.actual_seq_lengths = {{2, 3}}; }, "actual_seq_lengths", kInvalid},
      {"asl_range", prefill(), [](A c) { c.args.actual_seq_lengths = {{9}}; }, "actual_seq_lengths", kInvalid},
      {"asl_negative", prefill(), [](A c) { c.args.actual_seq_lengths = {{-1}}; }, "actual_seq_lengths", kInvalid},
      {"askv_length", with(prefill(), [](CallSpec& s) { s.batch = 3; }), [](A c) { c.args.actual_seq_lengths_kv = {{2, 3}}; }, "actual_seq_lengths_kv", kInvalid},
      {"askv_range", prefill(), [](A c) { c.args.actual_seq_lengths_kv = {{40}}; }, "actual_seq_lengths_kv", kInvalid},
      {"tnd_not_cumulative", tnd(), [](A c) { c.args.actual_seq_lengths = {{5, 3}}; }, "actual_seq_lengths", kInvalid},
      {"tnd_last_ne_t", tnd(), [](A c) { c.args.actual_seq_lengths = {{3, 7}}; }, "actual_seq_lengths", kInvalid},
      {"tnd_kv_needs_lengths", tnd(), [](A c) { c.args.actual_seq_lengths_kv.reset(); }, "actual_seq_lengths_kv", kInvalid},
      {"tnd_kv_count", tnd(), [](A c) { c.args.actual_seq_lengths_kv = {{16}}; }, "actual_seq_lengths_kv", kInvalid},
      {"tnd_kv_last", tnd(), [](A c) { c.args.actual_seq_lengths_kv = {{7, 15}}; }, "actual_seq_lengths_kv", kInvalid},
      {"list_length_over_tensor", tensor_list(), [](A c) { c.args.actual_seq_lengths_kv = {{24, 1000}}; }, "actual_seq_lengths_kv", kInvalid},
      // 20.8 left padding
      {"padding_tnd", tnd(), [](A c) { c.args.query_padding_size = c.keep(zeros(DType::I64, {1})); }, "query_padding_size", kInvalid},
      {"padding_paged", paged(), [](A c) { c.args.kv_padding_size = c.keep(zeros(DType::I64, {1})); }, "kv_padding_size", kInvalid},
      {"padding_list", tensor_list(), [](A c) { c.args.kv_padding_size = c.keep(zeros(DType::I64, {1})); }, "kv_padding_size", kInvalid},
      {"padding_prefix", with_prefix(), [](A c) { c.args.actual_seq_lengths_kv = {{3}}; c.args.kv_padding_size = c.keep(zeros(DType::I64, {1})); }, "kv_padding_size", kInvalid},
      {"padding_rope", with(prefill(), [](CallSpec& s) { s.rope_dim = 16; s.act_q = std::vector<std::int64_t>{2, 2}; }), [](A c) { c.args.query_padding_size = c.keep(zeros(DType::I64, {1})); }, "query_padding_size", kInvalid},
      {"padding_shape", padded(), [](A c) { c.args.query_padding_size = c.keep(zeros(DType::I64, {2})); }, "query_padding_size", kInvalid},
      {"padding_dtype", padded(), [](A c) { c.args.kv_padding_size = c.keep(zeros(DType::F32, {1})); }, "kv_padding_size", kInvalid},
      {"query_padding_needs_lengths", padded(), [](A c) { c.args.actual_seq_lengths.reset(); }, "query_padding_size", kInvalid},
      {"kv_padding_needs_lengths", padded(), [](A c) { c.args.actual_seq_lengths_kv.reset(); }, "kv_padding_size", kInvalid},
      {"query_window_negative", padded(), [](A c) { const_cast<std::int64_t*>(static_cast<const std::int64_t*>(c.args.query_padding_size.data))[0] = 3; }, "query_padding_size", kInvalid},
      {"kv_window_negative", padded(), [](A c) { const_cast<std::int64_t*>(static_cast<const std::int64_t*>(c.args.kv_padding_size.data))[0] = 5; }, "kv_padding_size", kInvalid},
      // 20.9 shared prefix
      {"prefix_pair", with_prefix(), [](A c) { c.args.value_shared_prefix = {}; }, "value_shared_prefix", kInvalid},
      {"prefix_len_without_prefix", prefill(), [](A c) { c.args.actual_shared_prefix_len = {{1}}; }, "actual_shared_prefix_len", kInvalid},
      {"prefix_tnd", tnd(), [](A c) { c.args.key_shared_prefix = c.args.key[0]; c.args.value_shared_prefix = c.args.value[0]; }, "key_shared_prefix", kInvalid},
      {"prefix_dtype", with_prefix(), [](A c) { c.args.key_shared_prefix.dtype = DType::BF16; }, "key_shared_prefix", kInvalid},
      {"prefix_rank", with_prefix(), [](A c) { c.args.value_shared_prefix.shape.pop_back(); }, "value_shared_prefix", kInvalid},
      {"prefix_batch", with_prefix(), [](A c) { c.args.key_shared_prefix.shape[0] = 2; }, "key_shared_prefix", kInvalid},
      {"prefix_heads", with_prefix(), [](A c) { c.args.key_shared_prefix.shape[1] = 1; }, "key_shared_prefix", kInvalid},
      {"prefix_head_dim", with_prefix(), [](A c) { c.args.value_shared_prefix.shape[3] = 32; }, "value_shared_prefix", kInvalid},
      {"prefix_seq_mismatch", with_prefix(), [](A c) { c.args.value_shared_prefix.shape[2] = 4; }, "value_shared_prefix", kInvalid},
      {"prefix_len_count", with_prefix(), [](A c) { c.args.actual_shared_prefix_len = {{1, 2}}; }, "actual_shared_prefix_len", kInvalid},
      {"prefix_len_range", with_prefix(), [](A c) { c.args.actual_shared_prefix_len = {{6}}; }, "actual_shared_prefix_len", kInvalid},
      // 20.4 mask / sparse mode
      {"mask_dtype", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; }), [](A c) { c.args.atten_mask.dtype = DType::F16; }, "atten_mask", kInvalid},
      {"sparse_tree_mask_shape", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; }), [](A c) { c.args.sparse_mode = 9; }, "atten_mask", kInvalid},
      {"sparse_mode_5", prefill(), [](A c) { c.args.sparse_mode = 5; }, "sparse_mode", kInvalid},
      {"sparse_mode_negative", prefill(), [](A c) { c.args.sparse_mode = -1; }, "sparse_mode", kInvalid},
      {"mask_required", prefill(), [](A c) { c.args.sparse_mode = 3; }, "atten_mask", kInvalid},
      {"compressed_shape", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; }), [](A c) { c.args.sparse_mode = 2; }, "atten_mask", kInvalid},
      {"full_mask_2d_small", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.mask_rank = 2; }), [](A c) { c.args.atten_mask.shape = {8, 20}; }, "atten_mask", kInvalid},
      {"full_mask_row_form", with(decode(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.mask_rank = 2; }), [](A c) { c.args.atten_mask.shape = {3, 16}; }, "atten_mask", kInvalid},
      {"full_mask_3d_batch", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.mask_rank = 3; }), [](A c) { c.args.atten_mask.shape = {3, 8, 8}; }, "atten_mask", kInvalid},
      {"full_mask_4d_heads", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.mask_rank = 4; }), [](A c) { c.args.atten_mask.shape = {2, 2, 8, 12}; }, "atten_mask", kInvalid},
      {"full_mask_rank5", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.mask_rank = 4; }), [](A c) { c.args.atten_mask.shape = {1, 2, 1, 8, 24}; }, "atten_mask", kInvalid},
      {"full_mask_prefix_width", with(with_prefix(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.mask_rank = 3; }), [](A c) { c.args.atten_mask.shape = {2, 8, 24}; }, "atten_mask", kInvalid},
      // 20.5 pse
      {"pse_tnd", tnd(), [](A c) { c.args.pse_shift = c.keep(zeros(DType::F16, {1, 4, 5, 9})); }, "pse_shift", kInvalid},
      {"pse_dtype", with(prefill(), [](CallSpec& s) { s.pse = true; }), [](A c) { c.args.pse_shift.dtype = DType::I8; }, "pse_shift", kInvalid},
      {"pse_rank", with(prefill(), [](CallSpec& s) { s.pse = true; }), [](A c) { c.args.pse_shift.shape = {2, 4, 192}; }, "pse_shift", kInvalid},
      {"pse_heads", with(prefill(), [](CallSpec& s) { s.pse = true; }), [](A c) { c.args.pse_shift.shape = {2, 2, 16, 24}; }, "pse_shift", kInvalid},
      {"pse_rows", with(prefill(), [](CallSpec& s) { s.pse = true; }), [](A c) { c.args.pse_shift.shape = {2, 4, 1, 192}; }, "pse_shift", kInvalid},
      {"pse_cols", with(with_prefix(), [](CallSpec& s) { s.pse = true; }), [](A c) { c.args.pse_shift.shape = {2, 4, 8, 24}; }, "pse_shift", kInvalid},
      // 20.12 inner_precise, sink
      {"inner_precise_range", prefill(), [](A c) { c.args.inner_precise = 4; }, "inner_precise", kInvalid},
      {"inner_precise_legacy_decode", decode(), [](A c) { c.args.inner_precise = 2; }, "inner_precise", kInvalid},
      {"sink_dtype", with(prefill(), [](CallSpec& s) { s.sink = true; }), [](A c) { c.args.learnable_sink.dtype = DType::I32; c.args.learnable_sink.shape = {2}; }, "learnable_sink", kInvalid},
      {"sink_shape", with(prefill(), [](CallSpec& s) { s.sink = true; }), [](A c) { c.args.learnable_sink.shape = {2}; }, "learnable_sink", kInvalid},
      // 25.2 hardware limits (strict mode only)
      {"batch_max", with(decode(), [](CallSpec& s) { s.batch = 65537; s.kv_seq = 1; s.num_heads = 1; s.num_kv_heads = 1; s.qk_dim = 16; }), nullptr, "query", kInvalid, true},
      {"num_heads_max", with(decode(), [](CallSpec& s) { s.num_heads = 260; s.num_kv_heads = 1; s.qk_dim = 16; s.kv_seq = 2; }), nullptr, "num_heads", kInvalid, true},
      {"head_dim_max", with(prefill(), [](CallSpec& s) { s.qk_dim = 576; s.q_seq = 2; s.kv_seq = 2; }), nullptr, "query", kInvalid, true},
      {"value_head_dim_max", with(prefill(), [](CallSpec& s) { s.v_dim = 528; s.q_seq = 2; s.kv_seq = 2; }), nullptr, "value", kInvalid, true},
      {"head_dim_align", with(prefill(), [](CallSpec& s) { s.qk_dim = 24; }), nullptr, "query", kInvalid, true},
      {"unaligned_batch", with(decode(), [](CallSpec& s) { s.qk_dim = 8; s.batch = 129; s.kv_seq = 2; }), nullptr, "query", kInvalid, true},
      {"nbsd_not_mla", with(prefill(), [](CallSpec& s) { s.layout = "BNSD_NBSD"; }), nullptr, "input_layout", kInvalid, true},
      {"ntd_head_dim", with(tnd(), [](CallSpec& s) { s.layout = "NTD"; s.qk_dim = 16; }), nullptr, "query", kInvalid, true},
      {"tnd_head_dim", with(tnd(), [](CallSpec& s) { s.num_kv_heads = 4; s.qk_dim = 32; }), nullptr, "query", kInvalid, true},
      {"bnsd_bsnd_decode_dim", with(prefill(), [](CallSpec& s) { s.layout = "BNSD_BSND"; s.q_seq = 1; s.qk_dim = 32; }), nullptr, "query", kInvalid, true},
      {"qk_ne_v_layout", with(prefill(), [](CallSpec& s) { s.layout = "BNSD_BSND"; s.v_dim = 32; }), nullptr, "value", kInvalid, true},
      {"qk_ne_v_large", with(prefill(), [](CallSpec& s) { s.qk_dim = 256; s.v_dim = 128; s.q_seq = 2; s.kv_seq = 2; }), nullptr, "value", kInvalid, true},
      {"rope_dim", with(prefill(), [](CallSpec& s) { s.qk_dim = 128; s.rope_dim = 32; }), nullptr, "query_rope", kInvalid, true},
      {"rope_query_dim", with(prefill(), [](CallSpec& s) { s.rope_dim = 64; }), nullptr, "query", kInvalid, true},
      {"mask_2d_layout", with(tnd(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.mask_rank = 2; s.sparse_mode = 1; }), nullptr, "atten_mask", kInvalid, true},
      {"qk_ne_v_sparse", with(prefill(), [](CallSpec& s) { s.v_dim = 32; s.mask = MaskKind::kFull; s.sparse_mode = 1; }), nullptr, "sparse_mode", kInvalid, true},
      {"pre_next_both_negative", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.pre_tokens = -1; s.next_tokens = -1; }), nullptr, "pre_tokens", kInvalid, true},
      {"next_below_pre", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kCompressed; s.sparse_mode = 4; s.pre_tokens = 2; s.next_tokens = -5; }), nullptr, "next_tokens", kInvalid, true},
      {"mode0_next_magnitude", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.pre_tokens = 100; s.next_tokens = -8; }), nullptr, "next_tokens", kInvalid, true},
      {"mode0_pre_magnitude", with(prefill(), [](CallSpec& s) { s.mask = MaskKind::kFull; s.pre_tokens = -24; s.next_tokens = 100; }), nullptr, "pre_tokens", kInvalid, true},
      {"mode4_tnd_pre", with(tnd(), [](CallSpec& s) { s.mask = MaskKind::kCompressed; s.sparse_mode = 4; s.pre_tokens = -4; s.next_tokens = 100; }), nullptr, "pre_tokens", kInvalid, true},
      {"pse_dtype_strict", with(prefill(), [](CallSpec& s) { s.pse = true; }), [](A c) { c.args.pse_shift = c.keep(zeros(DType::F32, {2, 4, 8, 24})); }, "pse_shift", kInvalid, true},
      {"pse_with_rope", with(prefill(), [](CallSpec& s) { s.pse = true; s.qk_dim = 128; s.rope_dim = 64; }), nullptr, "pse_shift", kInvalid, true},
      {"pse_qk_ne_v", with(prefill(), [](CallSpec& s) { s.pse = true; s.v_dim = 32; }), nullptr, "pse_shift", kInvalid, true},
      {"pse_decode_rows", with(decode(), [](CallSpec& s) { s.pse = true; }), [](A c) { c.args.pse_shift = c.keep(zeros(DType::F16, {2, 4, 2, 24})); }, "pse_shift", kInvalid, true},
      {"sink_dtype_strict", with(prefill(), [](CallSpec& s) { s.sink = true; }), [](A c) { c.args.learnable_sink = c.keep(zeros(DType::F32, {4})); }, "learnable_sink", kInvalid, true},
      {"sink_with_pse", with(prefill(), [](CallSpec& s) { s.sink = true; s.pse = true; }), nullptr, "learnable_sink", kInvalid, true},
      {"sink_with_padding", with(padded(), [](CallSpec& s) { s.sink = true; }), nullptr, "learnable_sink", kInvalid, true},
      {"sink_with_prefix", with(with_prefix(), [](CallSpec& s) { s.sink = true; }), nullptr, "learnable_sink", kInvalid, true},
      {"sink_inner_precise", with(prefill(), [](CallSpec& s) { s.sink = true; s.inner_precise = 2; }), nullptr, "inner_precise", kInvalid, true},
      {"sink_head_dim", with(prefill(), [](CallSpec& s) { s.sink = true; s.qk_dim = 32; }), nullptr, "learnable_sink", kInvalid, true},
      {"tnd_gqa_inner_precise", with(tnd(), [](CallSpec& s) { s.inner_precise = 1; }), nullptr, "inner_precise", kInvalid, true},
      {"block_size_align", with(paged(), [](CallSpec& s) { s.block_size = 8; }), nullptr, "block_size", kInvalid, true},
      {"block_size_prefill_multiple", with(paged(), [](CallSpec& s) { s.qk_dim = 32; s.block_size = 48; }), nullptr, "block_size", kInvalid, true},
      {"block_size_decode_max", with(paged(), [](CallSpec& s) { s.layout = "BSH"; s.q_seq = 1; s.block_size = 1024; }), nullptr, "block_size", kInvalid, true},
      {"paged_qk_ne_v", with(paged(), [](CallSpec& s) { s.v_dim = 32; s.block_size = 128; }), nullptr, "block_table", kInvalid, true},
      {"paged_with_prefix", with(paged(), [](CallSpec& s) { s.prefix_seq = 3; }), nullptr, "key_shared_prefix", kInvalid, true},
      {"list_with_prefix_prefill", with(tensor_list(), [](CallSpec& s) { s.prefix_seq = 3; }), nullptr, "key_shared_prefix", kInvalid, true},
      {"padding_layout", with(padded(), [](CallSpec& s) { s.layout = "BSND_BNSD"; }), nullptr, "query_padding_size", kInvalid, true},
  };
  return r;
}

class ValidationRule : public ::testing::TestWithParam<Rule> {};

TEST_P(ValidationRule, RejectsNamingTheParameter) {
  const Rule& rule = GetParam();
  TestCall call = build_call(rule.base, 7);
  if (rule.mutate) rule.mutate(call);
  const Status st = plan_status(call.args, rule.strict);
  EXPECT_EQ(st.code, rule.code) << st.to_string();
  EXPECT_EQ(st.parameter, rule.parameter) << st.to_string();
  EXPECT_FALSE(st.message.empty());
  if (rule.strict) {
    // A hardware limit, not a semantic rule: the default mode computes the call.
    Outputs out;
    const Status def = run_call(call.args, Backend::kCpu, 1, &out);
    EXPECT_TRUE(def.ok()) << "default mode rejected: " << def.to_string();
  } else if (rule.code == StatusCode::kInvalidArgument) {
    EXPECT_EQ(plan_status(call.args, true).code, rule.code) << "strict mode must reject it too";
  }
}

INSTANTIATE_TEST_SUITE_P(Fia, ValidationRule, ::testing::ValuesIn(rules()),
                         [](const auto& info) { return info.param.name; });

// Decode MLA (rope, head dim 512): value is ignored (V := K), so a dummy value is fine (25.1 #11).
TEST(ValidationRule, DecodeMlaIgnoresValue) {
  CallSpec s = paged();
  s.layout = "BSND";
  s.q_seq = 1;
  s.num_heads = 2;
  s.num_kv_heads = 1;
  s.qk_dim = 512;
  s.rope_dim = 64;
  TestCall call = build_call(s, 3);
  Outputs with_value;
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 1, &with_value).ok());
  call.args.value = {call.keep(OwnedTensor(DType::F16, {1, 1, 512}))};
  Outputs dummy;
  const Status st = run_call(call.args, Backend::kCpu, 1, &dummy);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(with_value.attention_out.bytes, dummy.attention_out.bytes);
}

// Legacy decode ignores sparse_mode (3.3), and with it the compressed tile of modes 2-4 (6.2).
TEST(ValidationRule, LegacyDecodeIgnoresTheCompressedMask) {
  CallSpec s = decode();
  TestCall call = build_call(s, 4);
  Outputs plain;
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 1, &plain).ok());
  CallSpec m = s;
  m.mask = MaskKind::kCompressed;
  const TensorView tile = build_call(m, 1).args.atten_mask;
  for (std::int64_t mode : {2, 3, 4}) {
    call.args.sparse_mode = mode;
    call.args.atten_mask = tile;
    Outputs masked;
    const Status st = run_call(call.args, Backend::kCpu, 1, &masked);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(plain.attention_out.bytes, masked.attention_out.bytes) << "sparse_mode " << mode;
  }
}

// The valid base calls themselves pass, in both modes where they respect the hardware limits.
TEST(ValidationRule, BaseCallsAreValid) {
  for (const CallSpec& s : {prefill(), decode(), tnd(), paged(), tensor_list(), with_prefix(), padded()}) {
    TestCall call = build_call(s, 7);
    const Status st = plan_status(call.args);
    EXPECT_TRUE(st.ok()) << st.to_string() << "\n" << describe(s);
  }
}

}  // namespace
}  // namespace fia::test
