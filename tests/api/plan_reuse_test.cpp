// Plan reuse (fia::run with new FiaArgs): one plan serves calls that differ only in their data,
// bit for bit as fresh plans; a call that needs another schedule is refused naming a parameter.
#include <gtest/gtest.h>

#include "support/call_builder.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

Outputs run_with_plan(const Plan& plan, const FiaArgs& args) {
  Outputs o;
  o.attention_out = OwnedTensor(plan.attention_out_dtype(), plan.attention_out_shape());
  o.softmax_lse = OwnedTensor(DType::F32, plan.softmax_lse_shape());
  std::vector<std::byte> ws(plan.workspace_bytes());
  const Status st = run(plan, args, o.attention_out.mutable_view(), o.softmax_lse.mutable_view(), ws.data(), ws.size());
  EXPECT_TRUE(st.ok()) << st.to_string();
  return o;
}

// "Layers": the same spec with other random data (another seed gives other values, same shapes).
TEST(PlanReuse, OnePlanRunsEveryLayerBitForBit) {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const CallSpec spec = random_spec(seed);
    TestCall first = build_call(spec, seed);
    for (Backend backend : {Backend::kCpu, Backend::kReference}) {
      Options opt;
      opt.backend = backend;
      Plan plan;
      if (!fia::plan(first.args, opt, &plan).ok()) break;
      for (std::uint64_t layer = 1; layer <= 2; ++layer) {
        TestCall next = build_call(spec, seed);  // same shapes, lengths and block tables
        std::mt19937_64 rng(layer);
        next.args.query = next.keep(random_tensor(spec.dtype, next.args.query.shape, rng, spec.value_range));
        Outputs fresh;
        ASSERT_TRUE(run_call(next.args, backend, 0, &fresh).ok());
        const Outputs reused = run_with_plan(plan, next.args);
        EXPECT_EQ(reused.attention_out.bytes, fresh.attention_out.bytes) << describe(spec);
        EXPECT_EQ(reused.softmax_lse.bytes, fresh.softmax_lse.bytes) << describe(spec);
      }
    }
  }
}

TEST(PlanReuse, ACallNeedingAnotherScheduleIsRefused) {
  CallSpec spec;
  spec.layout = "BNSD";
  spec.batch = 2;
  spec.num_heads = 2;
  spec.q_seq = 4;
  spec.kv_seq = 30;
  spec.act_kv = std::vector<std::int64_t>{30, 20};
  TestCall call = build_call(spec, 1);
  Plan plan;
  ASSERT_TRUE(fia::plan(call.args, Options{}, &plan).ok());
  call.args.actual_seq_lengths_kv = std::vector<std::int64_t>{30, 21};
  OwnedTensor out(plan.attention_out_dtype(), plan.attention_out_shape());
  Status st = run(plan, call.args, out.mutable_view(), MutableTensorView{}, nullptr, 0);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(st.parameter, "actual_seq_lengths_kv") << st.to_string();
  call.args.actual_seq_lengths_kv = std::vector<std::int64_t>{30, 20};
  call.args.num_heads = 3;  // invalid for the query shape: plan()'s own error
  st = run(plan, call.args, out.mutable_view(), MutableTensorView{}, nullptr, 0);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(st.parameter, "num_heads") << st.to_string();
}

}  // namespace
}  // namespace fia::test
