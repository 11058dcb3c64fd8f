// FIA-SPEC 19: a query of size 0 returns at once with an empty attention_out, every other check
// skipped (even key/value that do not match it); an empty KV gives zeros and +inf.
#include <gtest/gtest.h>

#include <cmath>

#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

TEST(EmptyTensors, AnEmptyQuerySkipsEveryCheck) {
  std::vector<std::uint16_t> kv(4 * 3 * 35 * 64);
  FiaArgs a;
  a.query = TensorView(nullptr, DType::F16, {0, 6, 13, 64});
  a.key = {TensorView(kv.data(), DType::F16, {4, 3, 35, 64})};  // batch 4 != 0, 3 heads: not checked
  a.value = {TensorView(kv.data(), DType::F16, {4, 3, 35, 64})};
  a.num_heads = 6;
  a.input_layout = "BNSD_BSND";
  a.softmax_lse_flag = true;
  for (Backend backend : {Backend::kCpu, Backend::kReference}) {
    Outputs out;
    const Status st = run_call(a, backend, 1, &out);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(out.attention_out.shape, (std::vector<std::int64_t>{0, 13, 6, 64}));  // the output layout
    EXPECT_EQ(out.attention_out.numel(), 0);
    EXPECT_EQ(out.softmax_lse.shape, (std::vector<std::int64_t>{0, 6, 13, 1}));
  }
  a.input_layout = "not a layout";  // not checked either: the output keeps the query's shape
  Plan plan;
  ASSERT_TRUE(fia::plan(a, Options{}, &plan).ok());
  EXPECT_EQ(plan.attention_out_shape(), a.query.shape);
}

TEST(EmptyTensors, AnEmptyQueryNeedsAnEmptyOutput) {
  std::vector<std::uint16_t> kv(2 * 16);
  FiaArgs a;
  a.query = TensorView(nullptr, DType::F16, {1, 0, 16});
  a.key = {TensorView(kv.data(), DType::F16, {1, 2, 16})};
  a.value = a.key;
  Plan plan;
  ASSERT_TRUE(fia::plan(a, Options{}, &plan).ok());
  OwnedTensor wrong(DType::F16, {1, 1, 16});
  const Status st = run(plan, wrong.mutable_view(), MutableTensorView{}, nullptr, 0);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(st.parameter, "attention_out");
  OwnedTensor empty(DType::F16, {0, 7});  // any empty tensor
  EXPECT_TRUE(run(plan, empty.mutable_view(), MutableTensorView{}, nullptr, 0).ok());
}

TEST(EmptyTensors, AMissingKeyIsStillAnError) {
  FiaArgs a;
  a.query = TensorView(nullptr, DType::F16, {0, 1, 16});
  Plan plan;
  const Status st = fia::plan(a, Options{}, &plan);
  EXPECT_EQ(st.code, StatusCode::kNullArgument);
  EXPECT_EQ(st.parameter, "key");
}

TEST(EmptyTensors, AnEmptyKvGivesZerosAndInfiniteLse) {
  CallSpec s;
  s.layout = "BSND";
  s.batch = 2;
  s.num_heads = 2;
  s.q_seq = 3;
  s.kv_seq = 4;
  s.lse = true;
  TestCall call = build_call(s, 1);
  for (auto* t : {&call.args.key[0], &call.args.value[0]}) t->shape[1] = 0;
  for (Backend backend : {Backend::kCpu, Backend::kReference}) {
    Outputs out;
    ASSERT_TRUE(run_call(call.args, backend, 1, &out).ok());
    for (double x : to_doubles(out.attention_out)) EXPECT_EQ(x, 0.0);
    for (double x : to_doubles(out.softmax_lse)) EXPECT_EQ(x, INFINITY);
  }
}

}  // namespace
}  // namespace fia::test
