// MLA full quantization (FIA-SPEC 13.3, the MLA row of 13.2, 15.2, 20.11 #26): the call plans with
// a BF16 output; every missing, forbidden or misshapen parameter is rejected naming its torch_npu
// parameter, one rule per case; the Ascend kernel's limits only in strict mode (25.2).
#include <gtest/gtest.h>

#include <functional>

#include "support/mla_full_quant_builder.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

/// A valid call in the default mode: BSND, Q_N 4, Q_S 1, a paged (block_num, 1, 128, D) cache.
CallSpec base_spec() {
  CallSpec s;
  s.layout = "BSND";
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 1;
  s.q_seq = 1;
  s.kv_seq = 200;
  s.act_kv = std::vector<std::int64_t>{200, 150};
  s.qk_dim = 512;
  s.rope_dim = 64;
  s.storage = KvStorage::kPaged;
  s.block_size = 128;
  s.paged_bnbsd = true;
  return s;
}

Status validate(const FiaArgs& a, bool strict, detail::Problem* p = nullptr) {
  detail::Problem local;
  return detail::build_problem(a, strict, p ? p : &local);
}

TEST(MlaFullQuantRules, PlansWithABf16Output) {
  MlaFullQuantCall c = build_mla_full_quant_call(base_spec(), 1);
  detail::Problem p;
  ASSERT_TRUE(validate(c.call.args, false, &p).ok()) << validate(c.call.args, false).to_string();
  EXPECT_TRUE(p.mla_full_quant.on);
  EXPECT_FALSE(p.full_quant.on);
  EXPECT_EQ(p.out_dtype, DType::BF16);
  EXPECT_EQ(p.rope_dtype, DType::BF16);
  EXPECT_EQ(p.mla_full_quant.key_scale, 1.0f / 64.0f);
  EXPECT_EQ(p.mla_full_quant.value_scale, 1.0f / 50.0f);
  EXPECT_EQ(p.v_dim, 512);  // V := K (25.1 #11)
}

TEST(MlaFullQuantRules, EveryLayoutOfTheDequantScale) {
  // 13.3: dequant_scale_query is the query shape without D in BSH, BSND, BNSD and TND.
  for (const char* layout : {"BSH", "BSND", "BNSD", "TND", "BSH_NBSD", "TND_NTD"}) {
    CallSpec s = base_spec();
    s.layout = layout;
    s.q_seq = 3;
    if (std::string(layout).rfind("TND", 0) == 0) s.act_q = std::vector<std::int64_t>{3, 2};
    MlaFullQuantCall c = build_mla_full_quant_call(s, 2);
    EXPECT_TRUE(validate(c.call.args, false).ok()) << layout << ": " << validate(c.call.args, false).to_string();
  }
}

struct Rule {
  std::string name;
  std::function<void(CallSpec&)> spec;
  std::function<void(MlaFullQuantCall&)> mutate;
  std::string parameter;
  bool strict = false;
};

void PrintTo(const Rule& r, std::ostream* os) { *os << r.name; }

class MlaFullQuantRule : public ::testing::TestWithParam<Rule> {};

TEST_P(MlaFullQuantRule, IsRejectedNamingTheParameter) {
  const Rule& r = GetParam();
  CallSpec s = base_spec();
  if (r.spec) r.spec(s);
  MlaFullQuantCall c = build_mla_full_quant_call(s, 3);
  if (r.mutate) r.mutate(c);
  const Status st = validate(c.call.args, r.strict);
  ASSERT_FALSE(st.ok()) << r.name;
  EXPECT_EQ(st.parameter, r.parameter) << st.to_string();
  if (r.strict) {
    EXPECT_TRUE(validate(c.call.args, false).ok()) << r.name << ": " << validate(c.call.args, false).to_string();
  }
}

OwnedTensor f32(std::vector<std::int64_t> shape, float v) {
  OwnedTensor t(DType::F32, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = v;
  return t;
}

OwnedTensor of(DType dtype, std::vector<std::int64_t> shape) { return OwnedTensor(dtype, std::move(shape)); }

void set(MlaFullQuantCall& c, TensorView FiaArgs::*slot, OwnedTensor t) {
  c.call.args.*slot = c.call.keep(std::move(t));
}

INSTANTIATE_TEST_SUITE_P(
    Semantic, MlaFullQuantRule,
    ::testing::Values(
        Rule{"key_not_int8", nullptr, [](MlaFullQuantCall& c) {
               c.call.args.key[0] = c.call.keep(of(DType::BF16, c.call.args.key[0].shape));
               c.call.args.value[0] = c.call.keep(of(DType::BF16, c.call.args.value[0].shape));
             }, "key"},
        Rule{"no_rope", nullptr, [](MlaFullQuantCall& c) { c.call.args.query_rope = c.call.args.key_rope = {}; },
             "query_rope"},
        Rule{"no_key_rope", nullptr, [](MlaFullQuantCall& c) { c.call.args.key_rope = {}; }, "key_rope"},
        Rule{"query_quant_mode_0", nullptr, [](MlaFullQuantCall& c) { c.call.args.query_quant_mode = 0; },
             "query_quant_mode"},
        Rule{"no_dequant_scale_query", nullptr, [](MlaFullQuantCall& c) { c.call.args.dequant_scale_query = {}; },
             "dequant_scale_query"},
        Rule{"dequant_scale_query_f16", nullptr, [](MlaFullQuantCall& c) {
               set(c, &FiaArgs::dequant_scale_query, of(DType::F16, c.call.args.dequant_scale_query.shape));
             }, "dequant_scale_query"},
        Rule{"dequant_scale_query_shape", nullptr, [](MlaFullQuantCall& c) {
               set(c, &FiaArgs::dequant_scale_query, f32({2, 4, 1}, 1.0f));  // BNSD's order in a BSND call
             }, "dequant_scale_query"},
        Rule{"no_key_antiquant_scale", nullptr, [](MlaFullQuantCall& c) { c.call.args.key_antiquant_scale = {}; },
             "key_antiquant_scale"},
        Rule{"key_antiquant_scale_bf16", nullptr,
             [](MlaFullQuantCall& c) { set(c, &FiaArgs::key_antiquant_scale, of(DType::BF16, {1})); },
             "key_antiquant_scale"},
        Rule{"value_antiquant_scale_per_channel", nullptr,
             [](MlaFullQuantCall& c) { set(c, &FiaArgs::value_antiquant_scale, f32({2}, 1.0f)); },
             "value_antiquant_scale"},
        Rule{"key_antiquant_mode_1", nullptr, [](MlaFullQuantCall& c) { c.call.args.key_antiquant_mode = 1; },
             "key_antiquant_mode"},
        Rule{"value_antiquant_mode_1", nullptr, [](MlaFullQuantCall& c) { c.call.args.value_antiquant_mode = 1; },
             "value_antiquant_mode"},
        Rule{"value_antiquant_offset", nullptr,
             [](MlaFullQuantCall& c) { set(c, &FiaArgs::value_antiquant_offset, f32({1}, 0.0f)); },
             "value_antiquant_offset"},
        Rule{"key_rope_antiquant_scale", nullptr,
             [](MlaFullQuantCall& c) { set(c, &FiaArgs::key_rope_antiquant_scale, f32({1}, 1.0f)); },
             "key_rope_antiquant_scale"},
        Rule{"dequant_scale1", nullptr, [](MlaFullQuantCall& c) { set(c, &FiaArgs::dequant_scale1, f32({1}, 1.0f)); },
             "dequant_scale1"},
        Rule{"quant_scale2", nullptr, [](MlaFullQuantCall& c) { set(c, &FiaArgs::quant_scale2, f32({1}, 1.0f)); },
             "quant_scale2"},
        Rule{"learnable_sink", nullptr,
             [](MlaFullQuantCall& c) { set(c, &FiaArgs::learnable_sink, of(DType::BF16, {4})); }, "learnable_sink"},
        Rule{"query_rope_f16", nullptr, [](MlaFullQuantCall& c) {
               set(c, &FiaArgs::query_rope, of(DType::F16, c.call.args.query_rope.shape));
             }, "query_rope"},
        Rule{"key_rope_f16", nullptr, [](MlaFullQuantCall& c) {
               set(c, &FiaArgs::key_rope, of(DType::F16, c.call.args.key_rope.shape));
             }, "key_rope"}),
    [](const ::testing::TestParamInfo<Rule>& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Strict, MlaFullQuantRule,
    ::testing::Values(
        Rule{"nd_cache", nullptr, nullptr, "key", true},  // 13.3: the NZ cache
        Rule{"pse_shift", nullptr,  // 15.1: no pse with rope
             [](MlaFullQuantCall& c) { set(c, &FiaArgs::pse_shift, of(DType::F16, {2, 4, 1, 384})); }, "pse_shift",
             true},
        Rule{"head_dim_128", [](CallSpec& s) { s.qk_dim = 128; }, nullptr, "query", true},
        Rule{"layout_bnsd", [](CallSpec& s) { s.layout = "BNSD"; }, nullptr, "input_layout", true},
        Rule{"q_seq_17", [](CallSpec& s) { s.q_seq = 17, s.sparse_mode = 3, s.mask = MaskKind::kCompressed; }, nullptr,
             "query", true},
        Rule{"decode_sparse_3", [](CallSpec& s) { s.sparse_mode = 3, s.mask = MaskKind::kCompressed; }, nullptr,
             "sparse_mode", true},
        Rule{"prefill_sparse_0", [](CallSpec& s) { s.q_seq = 4; }, nullptr, "sparse_mode", true},
        Rule{"decode_mask", [](CallSpec& s) { s.mask = MaskKind::kFull; }, nullptr, "atten_mask", true},
        Rule{"block_size_64", [](CallSpec& s) { s.block_size = 64; }, nullptr, "block_size", true},
        Rule{"num_heads_3", [](CallSpec& s) { s.num_heads = 3; }, nullptr, "num_heads", true},
        Rule{"contiguous_kv", [](CallSpec& s) { s.storage = KvStorage::kContiguous; }, nullptr, "block_table", true}),
    [](const ::testing::TestParamInfo<Rule>& info) { return info.param.name; });

}  // namespace
}  // namespace fia::test
