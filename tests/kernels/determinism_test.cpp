// Results do not depend on the thread count (DESIGN.md; FIA-SPEC 21.1 C): bit-identical outputs.
#include <gtest/gtest.h>

#include "support/call_builder.hpp"
#include "support/expectations.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

class ThreadInvariance : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(ThreadInvariance, OneAndTwoThreadsAreBitIdentical) {
  const std::uint64_t seed = GetParam();
  CallSpec spec = random_spec(seed);
  spec.lse = true;
  TestCall call = build_call(spec, seed);
  expect_thread_invariant(call.args, describe(spec));
}

INSTANTIATE_TEST_SUITE_P(Seeds, ThreadInvariance, ::testing::Range<std::uint64_t>(1000, 1040));

}  // namespace
}  // namespace fia::test

namespace fia::test {
namespace {

// Long decode rows run as split groups (phase A and B of the chunks, then a merge).
TEST(ThreadInvariance, SplitDecodeIsBitIdentical) {
  CallSpec s;
  s.layout = "BSND";
  s.dtype = DType::F16;
  s.num_heads = 8;
  s.num_kv_heads = 1;
  s.q_seq = 1;
  s.kv_seq = 3000;
  s.qk_dim = 64;
  s.lse = true;
  s.sink = true;
  TestCall call = build_call(s, 5);
  Outputs one, two, many;
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 1, &one).ok());
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &two).ok());
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 7, &many).ok());
  EXPECT_EQ(one.attention_out.bytes, two.attention_out.bytes);
  EXPECT_EQ(one.attention_out.bytes, many.attention_out.bytes);
  EXPECT_EQ(one.softmax_lse.bytes, many.softmax_lse.bytes);
}

}  // namespace
}  // namespace fia::test
