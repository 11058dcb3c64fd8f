// The NZ paged cache rules (FIA-SPEC 3.2, 9.1, 9.2, 12.4, 15.4, 25.2): one negative test per rule,
// each breaking one rule of a valid NZ call and expecting the torch_npu parameter name. The
// semantic rules (the NZ shape itself) hold in both modes; where the NPU reads an NZ cache at all
// (decode MLA, KV-NZ GQA antiquant) is a hardware limit, rejected only in strict mode.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "support/call_builder.hpp"
#include "support/nz_cache.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

/// A paged GQA prefill call over (block_num, N, block_size, D) caches; valid in default mode.
CallSpec gqa() {
  CallSpec s;
  s.layout = "BNSD";
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = 3;
  s.kv_seq = 40;
  s.qk_dim = 64;
  s.storage = KvStorage::kPaged;
  s.paged_bnbsd = true;
  s.block_size = 16;
  s.act_kv = std::vector<std::int64_t>{20, 37};
  return s;
}

/// Decode MLA with block_size 128 (15.4): valid in strict mode.
CallSpec mla() {
  CallSpec s = gqa();
  s.layout = "BSND";
  s.dtype = DType::BF16;
  s.q_seq = 1;
  s.num_heads = 16;
  s.num_kv_heads = 1;
  s.qk_dim = 512;
  s.rope_dim = 64;
  s.block_size = 128;
  s.act_kv = std::vector<std::int64_t>{130, 250};
  s.kv_seq = 256;
  return s;
}

/// KV-NZ GQA antiquant (12.4): BF16 query, INT8 K/V, D 128, split per-channel (N, D) scales
/// without offsets, block_size 128, inner_precise 1: valid in strict mode.
CallSpec antiquant() {
  CallSpec s = gqa();
  s.layout = "BSND";
  s.dtype = DType::BF16;
  s.q_seq = 1;
  s.qk_dim = 128;
  s.block_size = 128;
  s.kv_seq = 256;
  s.act_kv = std::vector<std::int64_t>{130, 200};
  s.inner_precise = 1;
  s.quant.format = KvQuant::kInt8;
  s.quant.channel_shape = "ND";
  return s;
}

CallSpec with(CallSpec s, const std::function<void(CallSpec&)>& f) {
  f(s);
  return s;
}

using A = TestCall&;

struct Rule {
  std::string name;
  CallSpec base;
  std::function<void(TestCall&)> mutate;  ///< applied to the NZ call
  std::string parameter;
  bool strict = false;  ///< a hardware limit: rejected only in strict mode
};

void PrintTo(const Rule& r, std::ostream* os) { *os << r.name; }

/// Shape {a, b, c, d, e} of the same number of elements.
std::vector<std::int64_t> reshaped(const TensorView& t, std::int64_t axis2, std::int64_t axis3, std::int64_t axis4) {
  return {t.shape[0], t.shape[1], axis2, axis3, axis4};
}

std::vector<Rule> rules() {
  return {
      {"piece_width", gqa(), [](A c) { auto& k = c.args.key[0]; k.shape = reshaped(k, k.shape[2] / 2, k.shape[3], 32); },
       "key"},
      {"value_piece_width", gqa(),
       [](A c) { auto& v = c.args.value[0]; v.shape = reshaped(v, v.shape[2] / 2, v.shape[3], 32); }, "value"},
      {"value_block_axis", gqa(),
       [](A c) { auto& v = c.args.value[0]; v.shape = reshaped(v, v.shape[2] * 2, v.shape[3] / 2, v.shape[4]); },
       "value"},
      {"value_not_nz", gqa(), [](A c) { c.args.value[0].shape = {1, 2, 16, 64}; }, "value"},
      {"head_count", gqa(), [](A c) { c.args.num_key_value_heads = 1; c.args.num_heads = 4; }, "key"},
      {"head_dim", gqa(), [](A c) { auto& k = c.args.key[0]; k.shape[2] /= 2; }, "key"},
      {"block_size", gqa(), [](A c) { c.args.block_size = 32; }, "key"},
      {"key_rope_not_nz", mla(), [](A c) { c.args.key_rope.shape = {c.args.key_rope.shape[0], 1, 128, 64}; }, "key_rope"},
      {"key_rope_blocks", mla(), [](A c) { c.args.key_rope.shape[0] -= 1; }, "key_rope"},
      {"int4_elements", with(antiquant(), [](CallSpec& s) { s.quant.format = KvQuant::kInt4; s.quant.channel_shape = "ND"; }),
       nullptr, "key"},
      {"float_without_mla", gqa(), nullptr, "key", true},
      {"mla_block_size", with(mla(), [](CallSpec& s) { s.block_size = 64; }), nullptr, "block_size", true},
      {"antiquant_fp16_query", with(antiquant(), [](CallSpec& s) { s.dtype = DType::F16; }), nullptr, "query", true},
      {"antiquant_head_dim", with(antiquant(), [](CallSpec& s) { s.qk_dim = 64; }), nullptr, "key", true},
      {"antiquant_block_size", with(antiquant(), [](CallSpec& s) { s.block_size = 256; s.kv_seq = 512; }), nullptr,
       "block_size", true},
      {"antiquant_inner_precise", with(antiquant(), [](CallSpec& s) { s.inner_precise = 0; }), nullptr, "inner_precise",
       true},
      {"antiquant_offsets", with(antiquant(), [](CallSpec& s) { s.quant.offsets = true; }), nullptr,
       "key_antiquant_offset", true},
      {"antiquant_combined", with(antiquant(), [](CallSpec& s) { s.quant.combined = true; }), nullptr, "antiquant_scale",
       true},
      {"antiquant_scale_form", with(antiquant(), [](CallSpec& s) { s.quant.channel_shape = "H"; }), nullptr,
       "key_antiquant_scale", true},
      {"antiquant_layout", with(antiquant(), [](CallSpec& s) { s.layout = "BNSD_BSND"; s.q_seq = 2; s.sparse_mode = 3;
                                                                 s.mask = MaskKind::kCompressed; }),
       nullptr, "input_layout", true},
      {"antiquant_decode_mask", with(antiquant(), [](CallSpec& s) { s.sparse_mode = 2; s.mask = MaskKind::kCompressed; }),
       nullptr, "sparse_mode", true},
      {"antiquant_prefill_sparse", with(antiquant(), [](CallSpec& s) { s.q_seq = 4; }), nullptr, "sparse_mode", true},
      {"antiquant_q_seq", with(antiquant(), [](CallSpec& s) { s.q_seq = 17; s.sparse_mode = 3;
                                                                s.mask = MaskKind::kCompressed; }),
       nullptr, "query", true},
  };
}

class NzRule : public ::testing::TestWithParam<Rule> {};

TEST_P(NzRule, RejectsNamingTheParameter) {
  const Rule& rule = GetParam();
  const TestCall nd = build_call(rule.base, 5);
  ASSERT_TRUE(plan_status(nd.args).ok()) << plan_status(nd.args).to_string();
  TestCall nz = as_nz(nd.args);
  if (rule.mutate) rule.mutate(nz);
  const Status st = plan_status(nz.args, rule.strict);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_EQ(st.parameter, rule.parameter) << st.to_string();
  EXPECT_FALSE(st.message.empty());
  if (rule.strict) {
    Outputs out;
    const Status def = run_call(nz.args, Backend::kCpu, 1, &out);
    EXPECT_TRUE(def.ok()) << "default mode rejected: " << def.to_string();
  } else {
    EXPECT_EQ(plan_status(nz.args, true).parameter, rule.parameter) << "strict mode must reject it too";
  }
}

INSTANTIATE_TEST_SUITE_P(Nz, NzRule, ::testing::ValuesIn(rules()), [](const auto& info) { return info.param.name; });

// Decode MLA and KV-NZ GQA antiquant are where the NPU reads an NZ cache: strict mode accepts them.
TEST(NzRule, NpuPathsAreValidInStrictMode) {
  for (const CallSpec& s : {mla(), antiquant(), with(antiquant(), [](CallSpec& x) {
                              x.q_seq = 16;
                              x.sparse_mode = 3;
                              x.mask = MaskKind::kCompressed;
                            })}) {
    const TestCall nd = build_call(s, 9);
    const TestCall nz = as_nz(nd.args);
    const Status st = plan_status(nz.args, true);
    EXPECT_TRUE(st.ok()) << st.to_string() << "\n" << describe(s);
  }
}

}  // namespace
}  // namespace fia::test
