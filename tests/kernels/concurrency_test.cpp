// One fia::Plan run from several std::threads at once, each with its own outputs and workspace,
// gives the bits of a lone run (fia.hpp, "Thread safety").
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "api/plan_state.hpp"
#include "support/call_builder.hpp"

namespace fia::test {
namespace {

/// Runs `plan` once into fresh outputs and a fresh workspace, followed by guard bytes that must
/// stay untouched (a run writing past plan.workspace_bytes() fails the test).
Outputs run_once(const Plan& plan) {
  Outputs o;
  o.attention_out = OwnedTensor(plan.attention_out_dtype(), plan.attention_out_shape());
  o.softmax_lse = OwnedTensor(DType::F32, plan.softmax_lse_shape());
  constexpr std::size_t kGuard = 4096;
  std::vector<std::byte> workspace(plan.workspace_bytes() + kGuard, std::byte{0xA5});
  const Status st = run(plan, o.attention_out.mutable_view(), o.softmax_lse.mutable_view(), workspace.data(),
                        plan.workspace_bytes());
  EXPECT_TRUE(st.ok()) << st.to_string();
  const auto guard_intact = std::all_of(workspace.end() - kGuard, workspace.end(),
                                        [](std::byte b) { return b == std::byte{0xA5}; });
  EXPECT_TRUE(guard_intact) << "the run wrote past its workspace";
  return o;
}

CallSpec split_decode() {  // long rows: split groups, the wave buffer in the workspace
  CallSpec s;
  s.layout = "BSND";
  s.batch = 2;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.q_seq = 1;
  s.kv_seq = 3000;
  s.qk_dim = 64;
  s.lse = true;
  return s;
}

CallSpec causal_prefill() {  // many work items over the worker threads
  CallSpec s;
  s.layout = "BNSD";
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = 96;
  s.kv_seq = 160;
  s.qk_dim = 64;
  s.sparse_mode = 3;
  s.mask = MaskKind::kCompressed;
  s.lse = true;
  return s;
}

class ConcurrentRuns : public ::testing::TestWithParam<int> {};

TEST_P(ConcurrentRuns, OnePlanFromSeveralThreadsGivesTheLoneRunsBits) {
  // Two plans of one shape with different inputs, each run by two threads at once (one through
  // the object, one through a copy: copies share the state), three times each: any state shared
  // between concurrent runs would mix the two calls' values. With one worker per call, the calls
  // share a oneTBB arena whose slot count (two) exceeds the call's scratch (one slot): each call
  // must keep to its own.
  const int workers = GetParam();
  constexpr int kThreads = 4, kRunsEach = 3;
  for (const auto& [name, spec, backend] : {std::tuple{"split decode", split_decode(), Backend::kCpu},
                                            std::tuple{"causal prefill", causal_prefill(), Backend::kCpu},
                                            std::tuple{"reference", causal_prefill(), Backend::kReference}}) {
    const TestCall calls[2] = {build_call(spec, 17), build_call(spec, 18)};
    Options options;
    options.backend = backend;
    options.threads = workers;
    Plan plans[2];
    Outputs lone[2];
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(fia::plan(calls[i].args, options, &plans[i]).ok()) << name;
      if (backend == Backend::kCpu) {
        ASSERT_EQ(plans[i].state().cpu.threads, workers) << name << ": the calls must be large enough for two workers";
        ASSERT_EQ(plans[i].state().cpu.splits.empty(), name != std::string("split decode")) << name;
      }
      lone[i] = run_once(plans[i]);
    }
    ASSERT_NE(lone[0].attention_out.bytes, lone[1].attention_out.bytes) << name;
    std::vector<std::vector<Outputs>> got(kThreads);
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t, copy = plans[t / 2]] {
        while (!go.load()) std::this_thread::yield();
        for (int r = 0; r < kRunsEach; ++r) got[t].push_back(run_once(t % 2 ? copy : plans[t / 2]));
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(got[t].size(), static_cast<std::size_t>(kRunsEach)) << name;
      for (const Outputs& o : got[t]) {
        EXPECT_EQ(o.attention_out.bytes, lone[t / 2].attention_out.bytes) << name << ", thread " << t;
        EXPECT_EQ(o.softmax_lse.bytes, lone[t / 2].softmax_lse.bytes) << name << ", thread " << t;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, ConcurrentRuns, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param); });

}  // namespace
}  // namespace fia::test
