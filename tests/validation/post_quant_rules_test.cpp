// One negative test per post-quant rule (FIA-SPEC 14.2-14.4, 13.2's float rows, 20.11 #27): each
// breaks exactly one rule of a valid call with quant_scale2 and expects the status code and the
// torch_npu parameter. Strict rules are Ascend limits (25.2): the default mode must accept them.
#include <gtest/gtest.h>

#include <functional>

#include "support/call_builder.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

Status validate(const FiaArgs& a, bool strict, detail::Problem* p = nullptr) {
  detail::Problem local;
  return detail::build_problem(a, strict, p ? p : &local);
}

OwnedTensor filled(DType dtype, std::vector<std::int64_t> shape, float v) {
  OwnedTensor t(dtype, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) set_value(t, i, v);
  return t;
}

/// BNSD prefill, BF16 query, 4 heads of 32, per-channel (Q_N, V_D) FP32 scale and offset: valid
/// in strict mode too.
CallSpec base_spec() {
  CallSpec s;
  s.layout = "BNSD";
  s.dtype = DType::BF16;
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = 8;
  s.kv_seq = 24;
  s.qk_dim = 32;
  return s;
}

TestCall base_call(const CallSpec& spec = base_spec()) {
  TestCall c = build_call(spec, 5);
  const std::int64_t vd = spec.v_dim ? spec.v_dim : spec.qk_dim;
  c.args.quant_scale2 = c.keep(filled(DType::F32, {spec.num_heads, vd}, 50.0f));
  c.args.quant_offset2 = c.keep(filled(DType::F32, {spec.num_heads, vd}, 1.0f));
  return c;
}

struct PqRule {
  std::string name;
  std::function<void(TestCall&)> mutate;
  std::string parameter;
  bool strict = false;
  CallSpec spec = base_spec();
  bool base_post_quant = true;  ///< false: the base call has no quant_scale2 (mutate adds it)
};

void PrintTo(const PqRule& r, std::ostream* os) { *os << r.name; }

class PostQuantRule : public ::testing::TestWithParam<PqRule> {};

TEST(PostQuantRules, TheBaseCallIsValidAndGivesInt8) {
  TestCall c = base_call();
  detail::Problem p;
  ASSERT_TRUE(validate(c.args, true, &p).ok()) << validate(c.args, true).to_string();
  EXPECT_EQ(p.out_dtype, DType::I8);
  EXPECT_EQ(p.post_quant.scale.size(), 128u);
  EXPECT_EQ(p.post_quant.offset.size(), 128u);
  // per-tensor, any layout; BSH per-channel of any shape with Q_N * V_D elements
  c.args.quant_scale2 = c.keep(filled(DType::F32, {1}, 3.0f));
  c.args.quant_offset2 = c.keep(filled(DType::F32, {1}, 0.5f));
  EXPECT_TRUE(validate(c.args, true).ok());
  c.args.quant_scale2 = c.keep(filled(DType::BF16, {1, 4, 1, 32}, 3.0f));
  c.args.quant_offset2 = c.keep(filled(DType::BF16, {1, 4, 1, 32}, 0.5f));
  EXPECT_TRUE(validate(c.args, true).ok());
}

TEST_P(PostQuantRule, IsRejectedNamingTheParameter) {
  const PqRule& r = GetParam();
  TestCall c = r.base_post_quant ? base_call(r.spec) : build_call(r.spec, 5);
  ASSERT_TRUE(validate(c.args, false).ok()) << r.name << ": base call " << validate(c.args, false).to_string();
  r.mutate(c);
  const Status st = validate(c.args, true);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument) << r.name << ": " << st.to_string();
  EXPECT_EQ(st.parameter, r.parameter) << r.name << ": " << st.to_string();
  EXPECT_NE(st.message.find("got"), std::string::npos) << st.message;
  const Status lax = validate(c.args, false);
  if (r.strict) EXPECT_TRUE(lax.ok()) << r.name << " is a hardware limit: " << lax.to_string();
  else EXPECT_EQ(lax.parameter, r.parameter) << r.name;
}

CallSpec with(std::function<void(CallSpec&)> f) {
  CallSpec s = base_spec();
  f(s);
  return s;
}

std::vector<PqRule> rules() {
  return {
      {"fp16 query with a BF16 scale",
       [](TestCall& c) {
         c.args.quant_scale2 = c.keep(filled(DType::BF16, {1}, 2.0f));
         c.args.quant_offset2 = TensorView{};
       },
       "quant_scale2", false, with([](CallSpec& s) { s.dtype = DType::F16; })},
      {"F16 scale", [](TestCall& c) { c.args.quant_scale2 = c.keep(filled(DType::F16, {4, 32}, 2.0f)); }, "quant_scale2"},
      {"offset dtype", [](TestCall& c) { c.args.quant_offset2 = c.keep(filled(DType::BF16, {4, 32}, 1.0f)); },
       "quant_offset2"},
      {"offset shape", [](TestCall& c) { c.args.quant_offset2 = c.keep(filled(DType::F32, {1, 128}, 1.0f)); },
       "quant_offset2"},
      {"offset alone", [](TestCall& c) { c.args.quant_scale2 = TensorView{}; }, "quant_offset2"},
      {"per-channel count",
       [](TestCall& c) {
         c.args.quant_scale2 = c.keep(filled(DType::F32, {4, 31}, 2.0f));
         c.args.quant_offset2 = TensorView{};
       },
       "quant_scale2"},
      {"TND needs exactly (Q_N, V_D)",
       [](TestCall& c) {
         c.args.quant_scale2 = c.keep(filled(DType::F32, {128}, 2.0f));
         c.args.quant_offset2 = TensorView{};
       },
       "quant_scale2", false, with([](CallSpec& s) {
         s.layout = "TND";
         s.act_q = std::vector<std::int64_t>{8, 8};
         s.act_kv = std::vector<std::int64_t>{24, 24};
       })},
      {"learnable sink", [](TestCall& c) { c.args.learnable_sink = c.keep(filled(DType::BF16, {4}, 0.5f)); },
       "learnable_sink"},
      {"QK_D != V_D",
       [](TestCall& c) {
         c.args.quant_scale2 = c.keep(filled(DType::F32, {1}, 2.0f));
         c.args.quant_offset2 = TensorView{};
       },
       "quant_scale2", false, with([](CallSpec& s) { s.v_dim = 16; }), false},
      {"full quant scales with a float query",
       [](TestCall& c) { c.args.dequant_scale1 = c.keep(filled(DType::F32, {1}, 1.0f)); }, "dequant_scale1"},
      {"band mode with negative pre_tokens",
       [](TestCall& c) {
         c.args.sparse_mode = 4;
         c.args.pre_tokens = -1;
         c.args.next_tokens = 100;
         OwnedTensor m(DType::Bool, {2048, 2048});
         for (std::int64_t x = 0; x < 2048; ++x)
           for (std::int64_t y = x + 1; y < 2048; ++y) m.as<std::uint8_t>()[x * 2048 + y] = 1;
         c.args.atten_mask = c.keep(std::move(m));
       },
       "pre_tokens"},
      {"offset with rows skipped: mode 0 mask, next_tokens < 0",
       [](TestCall& c) {
         c.args.next_tokens = -1;
         c.args.atten_mask = c.keep(OwnedTensor(DType::Bool, {8, 24}));
       },
       "quant_offset2"},
      {"offset with rows skipped: mode 3 with act_kv < act_q",
       [](TestCall& c) {
         c.args.sparse_mode = 3;
         c.args.actual_seq_lengths_kv = std::vector<std::int64_t>{24, 5};
         OwnedTensor m(DType::Bool, {2048, 2048});
         for (std::int64_t x = 0; x < 2048; ++x)
           for (std::int64_t y = x + 1; y < 2048; ++y) m.as<std::uint8_t>()[x * 2048 + y] = 1;
         c.args.atten_mask = c.keep(std::move(m));
       },
       "quant_offset2"},
      {"per-channel with the LSE (hardware)", [](TestCall& c) { c.args.softmax_lse_flag = true; }, "quant_scale2",
       true},
      {"per-channel with left padding (hardware)",
       [](TestCall& c) {
         c.args.kv_padding_size = c.keep([] {
           OwnedTensor t(DType::I64, {1});
           t.as<std::int64_t>()[0] = 2;
           return t;
         }());
         c.args.actual_seq_lengths_kv = std::vector<std::int64_t>{20, 20};
       },
       "quant_scale2", true},
      {"head dim not a multiple of 32 (hardware)",
       [](TestCall& c) {
         c.args.quant_scale2 = c.keep(filled(DType::F32, {1}, 2.0f));
         c.args.quant_offset2 = TensorView{};
       },
       "quant_scale2", true, with([](CallSpec& s) { s.qk_dim = 48; })},
  };
}

INSTANTIATE_TEST_SUITE_P(Rules, PostQuantRule, ::testing::ValuesIn(rules()),
                         [](const ::testing::TestParamInfo<PqRule>& info) {
                           std::string n = info.param.name;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace fia::test
