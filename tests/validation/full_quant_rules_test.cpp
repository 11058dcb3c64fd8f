// The INT8 rows of FIA-SPEC 13.2 and the full-quant rules of 13.1 / 20.11 #25: every allowed
// combination plans with the right output dtype, every forbidden or missing scale is rejected
// naming its torch_npu parameter; Ascend-only limits only in strict mode (25.2).
#include <gtest/gtest.h>

#include <functional>

#include "support/full_quant_builder.hpp"
#include "numeric/full_quant.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

FullQuantSpec base_spec(bool int8_out = false) {
  FullQuantSpec fs;
  fs.spec.layout = "BSND";
  fs.spec.batch = 2;
  fs.spec.num_heads = 4;
  fs.spec.num_kv_heads = 2;
  fs.spec.q_seq = 8;
  fs.spec.kv_seq = 40;
  fs.spec.qk_dim = 64;
  fs.int8_out = int8_out;
  return fs;
}

Status validate(const FiaArgs& a, bool strict, detail::Problem* p = nullptr) {
  detail::Problem local;
  return detail::build_problem(a, strict, p ? p : &local);
}

TEST(FullQuantRules, AllowedRowsOf13_2) {
  detail::Problem p;
  FullQuantCall fp16_out = build_full_quant_call(base_spec(), 2);  // INT8 -> FP16 (U64 dequant scales)
  ASSERT_TRUE(validate(fp16_out.call.args, true, &p).ok()) << validate(fp16_out.call.args, true).to_string();
  EXPECT_EQ(p.out_dtype, DType::F16);
  EXPECT_TRUE(p.full_quant.on);
  EXPECT_EQ(p.full_quant.quant1, 127.0f);
  EXPECT_EQ(p.full_quant.dequant1, detail::truncate_to_19_bits(p.full_quant.dequant1));
  FullQuantCall int8_out = build_full_quant_call(base_spec(true), 3);  // INT8 -> INT8
  ASSERT_TRUE(validate(int8_out.call.args, true, &p).ok());
  EXPECT_EQ(p.out_dtype, DType::I8);
  EXPECT_TRUE(p.post_quant.on);
}

TEST(FullQuantRules, Uint64ScalesCarryTheFloatBitsAndAreCutTo19Bits) {
  FullQuantCall c = build_full_quant_call(base_spec(), 5);  // odd seed: UINT64 scales
  auto* bits = const_cast<std::uint64_t*>(static_cast<const std::uint64_t*>(c.call.args.dequant_scale1.data));
  ASSERT_EQ(c.call.args.dequant_scale1.dtype, DType::U64);
  *bits = 0x3DCCCCCDu;  // 0.1f (22.14)
  detail::Problem p;
  ASSERT_TRUE(validate(c.call.args, false, &p).ok());
  EXPECT_EQ(p.full_quant.dequant1, 0.0999755859375f);
  *bits |= std::uint64_t{1} << 40;  // high bits must be 0
  const Status st = validate(c.call.args, false);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(st.parameter, "dequant_scale1");
}

struct Rule {
  std::string name;
  std::function<void(FullQuantCall&)> mutate;
  std::string parameter;
  bool strict = false;
  bool int8_out = false;
};

void PrintTo(const Rule& r, std::ostream* os) { *os << r.name; }

class FullQuantRule : public ::testing::TestWithParam<Rule> {};

TEST_P(FullQuantRule, IsRejectedNamingTheParameter) {
  const Rule& r = GetParam();
  FullQuantCall c = build_full_quant_call(base_spec(r.int8_out), 4);
  ASSERT_TRUE(validate(c.call.args, true).ok()) << validate(c.call.args, true).to_string();
  r.mutate(c);
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

OwnedTensor with_dtype(DType dtype, std::vector<std::int64_t> shape) { return OwnedTensor(dtype, std::move(shape)); }

INSTANTIATE_TEST_SUITE_P(
    All, FullQuantRule,
    ::testing::Values(
        Rule{"float_kv", [](FullQuantCall& c) {
               c.call.args.key[0] = c.call.keep(with_dtype(DType::F16, c.call.args.key[0].shape));
               c.call.args.value[0] = c.call.keep(with_dtype(DType::F16, c.call.args.value[0].shape));
             }, "key"},
        Rule{"missing_dequant_scale1", [](FullQuantCall& c) { c.call.args.dequant_scale1 = {}; }, "dequant_scale1"},
        Rule{"missing_quant_scale1", [](FullQuantCall& c) { c.call.args.quant_scale1 = {}; }, "quant_scale1"},
        Rule{"missing_dequant_scale2", [](FullQuantCall& c) { c.call.args.dequant_scale2 = {}; }, "dequant_scale2"},
        Rule{"dequant_scale1_f16", [](FullQuantCall& c) {
               c.call.args.dequant_scale1 = c.call.keep(with_dtype(DType::F16, {1}));
             }, "dequant_scale1"},
        Rule{"quant_scale1_u64", [](FullQuantCall& c) {
               c.call.args.quant_scale1 = c.call.keep(with_dtype(DType::U64, {1}));
             }, "quant_scale1"},
        Rule{"dequant_scale2_per_channel", [](FullQuantCall& c) {
               c.call.args.dequant_scale2 = c.call.keep(f32({4}, 0.01f));
             }, "dequant_scale2"},
        Rule{"antiquant_scale", [](FullQuantCall& c) {
               c.call.args.key_antiquant_scale = c.call.keep(f32({1}, 1.0f));
             }, "key_antiquant_scale"},
        Rule{"learnable_sink", [](FullQuantCall& c) {
               c.call.args.learnable_sink = c.call.keep(with_dtype(DType::BF16, {4}));
             }, "learnable_sink"},
        Rule{"offset_without_scale", [](FullQuantCall& c) {
               c.call.args.quant_offset2 = c.call.keep(f32({1}, 1.0f));
             }, "quant_offset2"},
        Rule{"quant_scale2_bf16", [](FullQuantCall& c) {
               c.call.args.quant_scale2 = c.call.keep(with_dtype(DType::BF16, {1}));
             }, "quant_scale2", false, true},
        Rule{"decode_strict", [](FullQuantCall& c) {
               auto& q = c.call.args.query;
               q.shape[1] = 1;
               q.strides.clear();
             }, "query", true},
        Rule{"head_dim_strict", [](FullQuantCall& c) {
               for (TensorView* t : {&c.call.args.query, &c.call.args.key[0], &c.call.args.value[0]}) {
                 t->shape[3] = 48;
                 t->strides.clear();
               }
             }, "query", true}));

}  // namespace
}  // namespace fia::test
