// One negative test per KV-antiquant rule (FIA-SPEC 12.2-12.4, 20.10, Appendix C): each breaks
// exactly one rule of a valid int8/int4 call and expects the status code and the torch_npu
// parameter. Strict rules are Ascend limits (25.2): the default mode must accept those calls.
// Only layer 2 runs here (build_problem), so these tests do not depend on the kernels.
#include <gtest/gtest.h>

#include <functional>

#include "validation/antiquant_calls.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

Status validate(const FiaArgs& a, bool strict) {
  detail::Problem p;
  return detail::build_problem(a, strict, &p);
}

struct AqRule {
  std::string name;
  AqSpec base;
  std::function<void(TestCall&)> mutate;
  std::string parameter;
  StatusCode code = StatusCode::kInvalidArgument;
  bool strict = false;  ///< an Ascend limit: rejected only in strict mode
};

void PrintTo(const AqRule& r, std::ostream* os) { *os << r.name; }

/// Decode (Q_S = 1), BSH, F16 query, INT8 K/V, split per-channel (N, D) F16 scales: valid in
/// strict mode too.
AqSpec decode() {
  AqSpec s;
  s.call.layout = "BSH";
  s.call.batch = 2;
  s.call.num_heads = 4;
  s.call.num_kv_heads = 2;
  s.call.q_seq = 1;
  s.call.kv_seq = 24;
  s.call.qk_dim = 64;
  return s;
}

/// Prefill (Q_S = 8), BNSD, BF16 query, split per-channel BF16 (the Ascend split-prefill path).
AqSpec prefill() {
  AqSpec s = decode();
  s.call.layout = "BNSD";
  s.call.dtype = DType::BF16;
  s.call.q_seq = 8;
  return s;
}

AqSpec int4() {
  AqSpec s = decode();
  s.kv = DType::I32;
  return s;
}

AqSpec paged() {
  AqSpec s = decode();
  s.call.storage = KvStorage::kPaged;
  s.call.block_size = 32;
  s.call.act_kv = std::vector<std::int64_t>{20, 40};
  return s;
}

AqSpec per_token() {
  AqSpec s = decode();
  s.key_mode = s.value_mode = 1;
  return s;
}

AqSpec combined() {
  AqSpec s = decode();
  s.combined = true;
  return s;
}

AqSpec with(AqSpec s, const std::function<void(AqSpec&)>& f) {
  f(s);
  return s;
}

OwnedTensor zeros(DType t, std::vector<std::int64_t> shape) { return OwnedTensor(t, std::move(shape)); }

std::vector<AqRule> rules() {
  using A = TestCall&;
  const auto kInvalid = StatusCode::kInvalidArgument;
  const auto kUnsup = StatusCode::kUnsupported;
  auto paged_mode = [](std::int64_t m) { return with(paged(), [m](AqSpec& s) { s.key_mode = s.value_mode = m; }); };
  std::vector<AqRule> r = {
      // Appendix C: rope x antiquant
      {"rope_with_int8", with(prefill(), [](AqSpec& s) { s.call.rope_dim = 16; }), nullptr, "key_rope", kInvalid},
      // 12.2 presence and pairing
      {"key_scale_only", decode(), [](A c) { c.args.value_antiquant_scale = {}; }, "value_antiquant_scale", kInvalid},
      {"value_scale_only", decode(), [](A c) { c.args.key_antiquant_scale = {}; }, "key_antiquant_scale", kInvalid},
      {"key_offset_only", with(decode(), [](AqSpec& s) { s.offsets = true; }), [](A c) { c.args.value_antiquant_offset = {}; }, "value_antiquant_offset", kInvalid},
      {"offsets_without_scales", with(decode(), [](AqSpec& s) { s.offsets = true; }), [](A c) { c.args.key_antiquant_scale = {}; c.args.value_antiquant_scale = {}; }, "key_antiquant_offset", kInvalid},
      {"combined_offset_without_scale", with(combined(), [](AqSpec& s) { s.offsets = true; }), [](A c) { c.args.antiquant_scale = {}; }, "antiquant_offset", kInvalid},
      {"int8_without_scale", decode(), [](A c) { c.args.key_antiquant_scale = {}; c.args.value_antiquant_scale = {}; }, "key_antiquant_scale", kInvalid},
      {"int4_without_scale", int4(), [](A c) { c.args.key_antiquant_scale = {}; c.args.value_antiquant_scale = {}; }, "key_antiquant_scale", kInvalid},
      // 12.2 / 20.10 mode values
      {"key_mode_6", decode(), [](A c) { c.args.key_antiquant_mode = 6; c.args.value_antiquant_mode = 6; }, "key_antiquant_mode", kInvalid},
      {"key_mode_7", decode(), [](A c) { c.args.key_antiquant_mode = 7; }, "key_antiquant_mode", kInvalid},
      {"value_mode_negative", decode(), [](A c) { c.args.value_antiquant_mode = -1; }, "value_antiquant_mode", kInvalid},
      {"mode_mismatch", decode(), [](A c) { c.args.key_antiquant_mode = 1; }, "value_antiquant_mode", kInvalid},
      {"mode_pair_reversed", with(decode(), [](AqSpec& s) { s.key_mode = 1; s.value_mode = 0; }), nullptr, "value_antiquant_mode", kInvalid},
      {"combined_mode_2", combined(), [](A c) { c.args.antiquant_mode = 2; }, "antiquant_mode", kInvalid},
      {"combined_mode_3", combined(), [](A c) { c.args.antiquant_mode = 3; }, "antiquant_mode", kInvalid},
      // 12.3 dtypes
      {"per_token_scale_f16", per_token(), [](A c) { c.args.key_antiquant_scale = c.keep(zeros(DType::F16, {2, 24})); c.args.value_antiquant_scale = c.args.key_antiquant_scale; }, "key_antiquant_scale", kInvalid},
      {"channel_scale_int8", decode(), [](A c) { c.args.key_antiquant_scale.dtype = DType::I8; }, "key_antiquant_scale", kInvalid},
      {"combined_per_token_f16", with(combined(), [](AqSpec& s) { s.key_mode = 1; }), [](A c) { c.args.antiquant_scale = c.keep(zeros(DType::F16, {2, 2, 24})); }, "antiquant_scale", kInvalid},
      {"offset_shape", with(decode(), [](AqSpec& s) { s.offsets = true; }), [](A c) { c.args.key_antiquant_offset = c.keep(zeros(DType::F16, {1, 128})); }, "key_antiquant_offset", kInvalid},
      {"offset_dtype", with(decode(), [](AqSpec& s) { s.offsets = true; }), [](A c) { c.args.value_antiquant_offset.dtype = DType::BF16; }, "value_antiquant_offset", kInvalid},
      // 12.3 shapes
      {"channel_shape", decode(), [](A c) { c.args.key_antiquant_scale.shape = {64}; }, "key_antiquant_scale", kInvalid},
      {"channel_heads", decode(), [](A c) { c.args.value_antiquant_scale.shape = {1, 64}; }, "value_antiquant_scale", kInvalid},
      {"head_mode_shape", with(decode(), [](AqSpec& s) { s.key_mode = s.value_mode = 2; }), [](A c) { c.args.key_antiquant_scale.shape = {4}; }, "key_antiquant_scale", kInvalid},
      {"token_batch", per_token(), [](A c) { c.args.key_antiquant_scale.shape = {1, 48}; }, "key_antiquant_scale", kInvalid},
      {"token_columns", per_token(), [](A c) { c.args.value_antiquant_scale.shape = {2, 23}; }, "value_antiquant_scale", kInvalid},
      {"token_columns_padding", with(per_token(), [](AqSpec& s) { s.call.act_kv = std::vector<std::int64_t>{10, 20}; s.call.kv_padding = 2; }),
       [](A c) { c.args.key_antiquant_scale.shape = {2, 21}; c.args.value_antiquant_scale.shape = {2, 21}; }, "key_antiquant_scale", kInvalid},
      {"token_head_shape", with(decode(), [](AqSpec& s) { s.key_mode = s.value_mode = 3; }), [](A c) { c.args.key_antiquant_scale.shape = {2, 1, 24}; }, "key_antiquant_scale", kInvalid},
      {"combined_leading_axis", combined(), [](A c) { c.args.antiquant_scale.shape = {1, 2, 64}; }, "antiquant_scale", kInvalid},
      {"paged_mode_contiguous", per_token(), [](A c) { c.args.key_antiquant_mode = 4; c.args.value_antiquant_mode = 4; }, "key_antiquant_mode", kInvalid},
      {"paged_mode_prefix", with(paged_mode(5), [](AqSpec& s) { s.call.prefix_seq = 3; }), nullptr, "key_shared_prefix", kInvalid},
      {"paged_mode_blocks", paged_mode(4), [](A c) { c.args.key_antiquant_scale.shape[0] += 1; }, "key_antiquant_scale", kInvalid},
      {"paged_mode_heads", paged_mode(5), [](A c) { c.args.value_antiquant_scale.shape[1] = 1; }, "value_antiquant_scale", kInvalid},
      {"token_offset_strides", with(per_token(), [](AqSpec& s) { s.offsets = true; }), [](A c) { c.args.key_antiquant_offset.strides = {48, 1}; }, "key_antiquant_offset", kUnsup},
      // 12.6 / 2.3 int4 packing, 11.2 prefix dtype
      {"int4_fused_head_words", with(int4(), [](AqSpec& s) { s.call.qk_dim = 12; }), nullptr, "key", kInvalid},
      {"prefix_dtype", with(decode(), [](AqSpec& s) { s.call.prefix_seq = 3; }), [](A c) { c.args.value_shared_prefix = c.keep(zeros(DType::F16, {1, 3, 128})); }, "value_shared_prefix", kInvalid},
      {"prefix_int4_width", with(int4(), [](AqSpec& s) { s.call.prefix_seq = 3; }), [](A c) { c.args.key_shared_prefix = c.keep(zeros(DType::I32, {1, 3, 8})); }, "key_shared_prefix", kInvalid},

      // 25.2: Ascend limits, strict mode only
      {"channel_dtype_f32", with(decode(), [](AqSpec& s) { s.channel_dtype = DType::F32; }), nullptr, "key_antiquant_scale", kInvalid, true},
      {"int4_per_tensor", with(int4(), [](AqSpec& s) { s.per_tensor = true; }), nullptr, "key_antiquant_scale", kInvalid, true},
      {"int4_head_mode", with(int4(), [](AqSpec& s) { s.key_mode = s.value_mode = 2; }), nullptr, "key_antiquant_mode", kInvalid, true},
      {"token_columns_kv_s", with(per_token(), [](AqSpec& s) { s.call.act_kv = std::vector<std::int64_t>{10, 20}; }),
       [](A c) { c.args.key_antiquant_scale.shape = {2, 20}; c.args.value_antiquant_scale.shape = {2, 20}; }, "key_antiquant_scale", kInvalid, true},
      {"pair_bf16_query", with(decode(), [](AqSpec& s) { s.call.dtype = DType::BF16; s.value_mode = 1; }), nullptr, "value_antiquant_mode", kInvalid, true},
      {"int4_head_dim_64", with(int4(), [](AqSpec& s) { s.call.qk_dim = 32; }), nullptr, "key", kInvalid, true},
      {"int4_paged", with(paged(), [](AqSpec& s) { s.kv = DType::I32; }), nullptr, "block_table", kInvalid, true},
      {"int4_kv_padding", with(int4(), [](AqSpec& s) { s.call.act_kv = std::vector<std::int64_t>{10, 20}; s.call.kv_padding = 2; }), nullptr, "kv_padding_size", kInvalid, true},
      {"int4_prefill", with(prefill(), [](AqSpec& s) { s.kv = DType::I32; }), nullptr, "key", kInvalid, true},
      {"decode_bnsd_bsnd", with(decode(), [](AqSpec& s) { s.call.layout = "BNSD_BSND"; }), nullptr, "input_layout", kInvalid, true},
      {"tnd_layout", with(prefill(), [](AqSpec& s) { s.call.layout = "TND"; s.call.act_q = std::vector<std::int64_t>{3, 5}; s.call.act_kv = std::vector<std::int64_t>{7, 9}; }), nullptr, "input_layout", kInvalid, true},
      {"paged_bnbsd_layout", with(paged(), [](AqSpec& s) { s.call.paged_bnbsd = true; }), nullptr, "input_layout", kInvalid, true},
      {"paged_block_size", with(paged(), [](AqSpec& s) { s.call.block_size = 16; }), nullptr, "block_size", kInvalid, true},
      {"prefill_head_dim_32", with(prefill(), [](AqSpec& s) { s.call.qk_dim = 16; }), nullptr, "key", kInvalid, true},
      {"prefill_tensor_list", with(prefill(), [](AqSpec& s) { s.call.storage = KvStorage::kTensorList; }), nullptr, "key", kInvalid, true},
      {"prefill_combined_bf16", with(prefill(), [](AqSpec& s) { s.combined = true; }), nullptr, "query", kInvalid, true},
      {"prefill_combined_per_token", with(prefill(), [](AqSpec& s) { s.combined = true; s.call.dtype = DType::F16; s.key_mode = 1; }), nullptr, "antiquant_mode", kInvalid, true},
      {"prefill_split_f16", with(prefill(), [](AqSpec& s) { s.call.dtype = DType::F16; }), nullptr, "query", kInvalid, true},
      {"prefill_q_s_16", with(prefill(), [](AqSpec& s) { s.call.q_seq = 17; }), nullptr, "query", kInvalid, true},
      {"prefill_mode_3", with(prefill(), [](AqSpec& s) { s.key_mode = s.value_mode = 3; }), nullptr, "key_antiquant_mode", kInvalid, true},
      {"prefill_padding", with(prefill(), [](AqSpec& s) { s.call.act_q = std::vector<std::int64_t>{4, 6}; s.call.query_padding = 1; }), nullptr, "query_padding_size", kInvalid, true},
      {"prefill_paged", with(prefill(), [](AqSpec& s) { s.call.storage = KvStorage::kPaged; s.call.block_size = 32; s.call.act_kv = std::vector<std::int64_t>{20, 24}; }), nullptr, "block_table", kInvalid, true},
      {"prefill_channel_form", prefill(), [](A c) { c.args.key_antiquant_scale.shape = {1, 2, 1, 64}; }, "key_antiquant_scale", kInvalid, true},
      {"prefill_token_form", with(prefill(), [](AqSpec& s) { s.key_mode = s.value_mode = 1; }), [](A c) { c.args.value_antiquant_scale.shape = {1, 2, 24}; }, "value_antiquant_scale", kInvalid, true},
      {"with_sink", with(decode(), [](AqSpec& s) { s.call.sink = true; }), nullptr, "learnable_sink", kInvalid, true},
  };
  return r;
}

class AntiquantRule : public ::testing::TestWithParam<AqRule> {};

TEST_P(AntiquantRule, RejectsNamingTheParameter) {
  const AqRule& rule = GetParam();
  TestCall call = build_aq(rule.base);
  if (rule.mutate) rule.mutate(call);
  const Status st = validate(call.args, rule.strict);
  EXPECT_EQ(st.code, rule.code) << st.to_string();
  EXPECT_EQ(st.parameter, rule.parameter) << st.to_string();
  EXPECT_NE(st.message.find(", got "), std::string::npos) << st.to_string();
  if (rule.strict) {
    const Status def = validate(call.args, false);
    EXPECT_TRUE(def.ok()) << "default mode rejected: " << def.to_string();
  } else {
    EXPECT_EQ(validate(call.args, true).parameter, rule.parameter) << "strict mode must reject it too";
  }
}

INSTANTIATE_TEST_SUITE_P(Fia, AntiquantRule, ::testing::ValuesIn(rules()), [](const auto& info) { return info.param.name; });

// The valid bases: every mode and storage, in default mode; the Ascend-shaped ones in strict too.
TEST(AntiquantRule, BaseCallsAreValid) {
  struct Base {
    const char* name;
    AqSpec spec;
    bool strict_ok;
  };
  const Base bases[] = {
      {"decode", decode(), true},
      {"prefill", prefill(), true},
      {"int4", int4(), true},
      {"paged", paged(), true},
      {"per_token", per_token(), true},
      {"combined", combined(), true},
      {"combined_per_token", with(combined(), [](AqSpec& s) { s.key_mode = 1; s.offsets = true; }), true},
      {"combined_per_tensor", with(combined(), [](AqSpec& s) { s.per_tensor = true; }), true},
      {"per_tensor", with(decode(), [](AqSpec& s) { s.per_tensor = true; s.offsets = true; }), true},
      {"head_mode", with(decode(), [](AqSpec& s) { s.key_mode = s.value_mode = 2; }), true},
      {"token_head_mode", with(decode(), [](AqSpec& s) { s.key_mode = s.value_mode = 3; s.offsets = true; }), true},
      {"pair", with(decode(), [](AqSpec& s) { s.value_mode = 1; }), true},
      {"paged_mode_4", with(paged(), [](AqSpec& s) { s.key_mode = s.value_mode = 4; }), true},
      {"paged_mode_5", with(paged(), [](AqSpec& s) { s.key_mode = s.value_mode = 5; s.offsets = true; }), true},
      {"paged_bnbsd_mode_5", with(paged(), [](AqSpec& s) { s.call.layout = "BNSD"; s.call.paged_bnbsd = true; s.key_mode = s.value_mode = 5; }), true},
      {"prefix", with(decode(), [](AqSpec& s) { s.call.prefix_seq = 3; s.key_mode = s.value_mode = 1; }), true},
      {"int4_bnsd_prefix", with(int4(), [](AqSpec& s) { s.call.layout = "BNSD"; s.call.prefix_seq = 3; }), true},
      {"int4_paged", with(paged(), [](AqSpec& s) { s.kv = DType::I32; }), false},
      {"int4_prefill", with(prefill(), [](AqSpec& s) { s.kv = DType::I32; }), false},
      {"f32_query", with(decode(), [](AqSpec& s) { s.call.dtype = DType::F32; }), false},
      {"tensor_list_per_token", with(per_token(), [](AqSpec& s) { s.call.storage = KvStorage::kTensorList; }), true},
      {"tnd_prefill", with(prefill(), [](AqSpec& s) { s.call.layout = "TND"; s.call.act_q = std::vector<std::int64_t>{3, 5}; s.call.act_kv = std::vector<std::int64_t>{7, 9}; }), false},
  };
  for (const Base& b : bases) {
    TestCall call = build_aq(b.spec);
    EXPECT_TRUE(validate(call.args, false).ok()) << b.name << ": " << validate(call.args, false).to_string();
    if (b.strict_ok) {
      EXPECT_TRUE(validate(call.args, true).ok()) << b.name << " (strict): " << validate(call.args, true).to_string();
    }
  }
}

// key_rope_antiquant_scale is reserved (15.2): accepted and ignored, with or without antiquant.
TEST(AntiquantRule, KeyRopeAntiquantScaleIsIgnored) {
  TestCall call = build_aq(decode());
  call.args.key_rope_antiquant_scale = call.keep(zeros(DType::F16, {3}));
  EXPECT_TRUE(validate(call.args, false).ok());
  EXPECT_TRUE(validate(call.args, true).ok());
}

// Split parameters win over combined ones (12.2): a malformed antiquant_scale is then ignored.
TEST(AntiquantRule, SplitParametersWin) {
  TestCall call = build_aq(decode());
  call.args.antiquant_scale = call.keep(zeros(DType::I8, {7}));
  call.args.antiquant_mode = 2;
  EXPECT_TRUE(validate(call.args, true).ok()) << validate(call.args, true).to_string();
}

}  // namespace
}  // namespace fia::test
