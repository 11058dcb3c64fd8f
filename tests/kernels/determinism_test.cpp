// Results do not depend on the thread count (DESIGN.md; FIA-SPEC 21.1 C): bit-identical outputs.
#include <gtest/gtest.h>

#include <limits>

#include "plan/plan.hpp"
#include "support/call_builder.hpp"
#include "support/expectations.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"
#include "validate/build_problem.hpp"

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

/// A decode call of five requests over GQA rows, long enough to split (chunks of 64 tokens).
CallSpec five_requests(const std::string& layout) {
  CallSpec s;
  s.layout = layout;
  s.dtype = DType::F16;
  s.batch = 5;
  s.num_kv_heads = 4;
  s.num_heads = 16;
  s.q_seq = 1;
  s.kv_seq = 700;
  s.act_kv = std::vector<std::int64_t>{700, 650, 333, 700, 129};
  if (layout == "TND") s.act_q = std::vector<std::int64_t>{1, 1, 1, 1, 1};
  s.qk_dim = 64;
  s.lse = true;
  s.sink = true;
  return s;
}

// With enough split groups per worker (PlanLimits::whole_groups_from) each group runs whole on one
// worker, its scores and partials in that worker's scratch: the same bits as the chunks'
// schedule, at any thread count, for every P rule (FIA-SPEC 25.3) and KV storage.
TEST(ThreadInvariance, WholeGroupsGiveTheBitsOfTheChunkSchedule) {
  struct Case {
    const char* name;
    CallSpec spec;
    EntryPoint entry;
  };
  CallSpec paged = five_requests("BSND");
  paged.storage = KvStorage::kPaged;
  paged.block_size = 32;
  CallSpec running_max = five_requests("TND");  // token layout, inner_precise 1: kRunningMax
  running_max.inner_precise = 1;
  const Case cases[] = {{"BSND", five_requests("BSND"), EntryPoint::kFusedInferAttentionScore},
                        {"BNSD", five_requests("BNSD"), EntryPoint::kFusedInferAttentionScore},
                        {"paged", paged, EntryPoint::kFusedInferAttentionScore},
                        {"IFA", five_requests("BNSD"), EntryPoint::kIncreFlashAttention},
                        {"TND running max", running_max, EntryPoint::kFusedInferAttentionScore}};
  for (const Case& c : cases) {
    TestCall call = build_call(c.spec, 31);
    call.args.entry_point = c.entry;
    detail::PlanLimits limits;
    limits.serial_work = 0;
    limits.chunk_cols = 64;
    limits.chunk_bytes = 0;
    limits.whole_groups_from = std::numeric_limits<std::int64_t>::max() / 1024;
    detail::CpuPlan plan;
    const Outputs chunks = run_with_limits(call.args, limits, 2, &plan);
    ASSERT_FALSE(plan.splits.empty()) << c.name;
    EXPECT_FALSE(plan.whole_groups) << c.name;
    EXPECT_FALSE(plan.waves.empty()) << c.name;
    limits.whole_groups_from = 1;
    for (const int threads : {1, 2, 3}) {
      const Outputs whole = run_with_limits(call.args, limits, threads, &plan);
      // 5 groups (BNSD and IFA: 20, one per KV head), at least one per worker.
      EXPECT_TRUE(plan.whole_groups) << c.name << ", " << threads << " threads";
      EXPECT_TRUE(plan.waves.empty()) << c.name;
      EXPECT_EQ(whole.attention_out.bytes, chunks.attention_out.bytes) << c.name << ", " << threads << " threads";
      EXPECT_EQ(whole.softmax_lse.bytes, chunks.softmax_lse.bytes) << c.name << ", " << threads << " threads";
    }
  }
}

// The default: four groups per worker, each within PlanLimits::score_budget.
TEST(ThreadInvariance, GroupsRunWholeWithFourPerWorkerThatFitTheScoreBudget) {
  const TestCall call = build_call(five_requests("BNSD"), 32);  // 20 groups (one per KV head)
  detail::Problem p;
  ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
  detail::PlanLimits limits;
  limits.chunk_cols = 64;
  limits.chunk_bytes = 0;
  for (const int threads : {1, 5, 6}) {
    const detail::CpuPlan plan = detail::make_cpu_plan(p, threads, limits);
    ASSERT_EQ(plan.splits.size(), 20u);
    EXPECT_EQ(plan.whole_groups, threads <= 5) << threads;
  }
  limits.score_budget = 700 * 4;  // a group of 700 tokens: 2800 scores and its partials, beyond it
  EXPECT_FALSE(detail::make_cpu_plan(p, 1, limits).whole_groups);
}

}  // namespace
}  // namespace fia::test
