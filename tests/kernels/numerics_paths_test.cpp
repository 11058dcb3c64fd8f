// FIA-SPEC 25.3: P is formed per code path. For each row of its table, a call where that path's
// rounding and another one differ by more than criterion A: the cpu backend and the reference
// agree with the path's rounding, and the reference computing the other rounding is rejected (so
// each test can fail).
#include <gtest/gtest.h>

#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/expectations.hpp"
#include "support/run_helpers.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

using detail::PRule;
using Kind = PRule::Kind;

/// The problem of a valid call.
detail::Problem problem_of(const FiaArgs& args) {
  detail::Problem p;
  const Status st = detail::build_problem(args, false, &p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return p;
}

/// The exact answer when P is formed by `rule` instead of the call's own.
std::vector<double> reference_with(const FiaArgs& args, PRule rule) {
  detail::Problem p = problem_of(args);
  p.p_rule = rule;
  return detail::reference_compute(p).out;
}

PRule rule(Kind kind, DType round_to) {
  PRule r;
  r.kind = kind;
  r.round_to = round_to;
  return r;
}

/// Long rows of near-equal scores (a small scale over large values), whose outputs sum many
/// terms with cancellation: where roundings of P differ, criterion A sees it.
CallSpec near_equal_scores(std::string layout, DType dtype, std::int64_t q_seq, std::int64_t kv_seq) {
  CallSpec s;
  s.layout = std::move(layout);
  s.dtype = dtype;
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = q_seq;
  s.kv_seq = kv_seq;
  s.qk_dim = 64;
  s.value_range = 16.0f;
  s.scale = 1e-3;
  s.lse = true;
  if (s.layout == "TND") {
    s.act_q = std::vector<std::int64_t>{q_seq, q_seq - 3};
    s.act_kv = std::vector<std::int64_t>{kv_seq, kv_seq - 100};
  }
  return s;
}

/// The cpu result meets criterion A against the path's exact answer `path` and fails it against
/// `other`, which the exact answers also tell apart.
void expect_path(const FiaArgs& args, const std::vector<double>& path, const std::vector<double>& other,
                 const std::string& what) {
  Outputs out;
  const Status st = run_call(args, Backend::kCpu, 2, &out);
  ASSERT_TRUE(st.ok()) << st.to_string();
  const Verdict cpu = criterion_a(out.attention_out, path);
  EXPECT_TRUE(cpu.pass) << what << ": cpu vs the path's rounding: " << cpu.detail;
  const Verdict cpu_other = criterion_a(out.attention_out, other);
  EXPECT_FALSE(cpu_other.pass) << what << ": the cpu result also meets the other rounding (pass fraction "
                               << cpu_other.fraction << ")";
  // The reference itself: its answer under the path's rule, cast to the output dtype, is told
  // apart from the other rounding's.
  Outputs ref;
  ASSERT_TRUE(run_call(args, Backend::kReference, 1, &ref).ok());
  EXPECT_TRUE(criterion_a(ref.attention_out, path).pass) << what;
  EXPECT_FALSE(criterion_a(ref.attention_out, other).pass) << what;
}

/// A call of `spec` through `entry` takes the rule `expected`, and its results follow it, not
/// `other`.
void expect_rule(const CallSpec& spec, std::uint64_t seed, EntryPoint entry, PRule expected, PRule other,
                 const std::string& what) {
  TestCall call = build_call(spec, seed);
  call.args.entry_point = entry;
  const detail::Problem p = problem_of(call.args);
  ASSERT_EQ(p.p_rule.kind, expected.kind) << what;
  ASSERT_EQ(p.p_rule.round_to, expected.round_to) << what;
  expect_path(call.args, reference_with(call.args, p.p_rule), reference_with(call.args, other), what);
}

TEST(NumericsPaths, TndHighPrecisionKeepsPInF32) {
  for (DType t : {DType::BF16, DType::F16})
    expect_rule(near_equal_scores("TND", t, 24, 1500), 91, EntryPoint::kFusedInferAttentionScore,
                rule(Kind::kRoundE, DType::F32), rule(Kind::kRoundE, t), "TND inner_precise 0");
}

TEST(NumericsPaths, TndHighPerformanceRoundsFp16TilesAgainstTheRunningMax) {
  CallSpec s = near_equal_scores("TND", DType::BF16, 24, 1500);
  s.inner_precise = 1;
  expect_rule(s, 92, EntryPoint::kFusedInferAttentionScore, rule(Kind::kRunningMax, DType::F16),
              rule(Kind::kRoundE, DType::BF16), "TND inner_precise 1 vs bf16 E");
  // Against fp16 rounding at the exact max: the running max alone makes the difference; prefill
  // rows (wide items) and decode rows (narrow items split into chunks).
  for (const std::int64_t rows : {24, 3}) {
    CallSpec f = near_equal_scores("TND", DType::F16, rows, 3000);
    f.inner_precise = 1;
    f.value_range = 64.0f;
    f.scale = 1e-4;
    expect_rule(f, 93, EntryPoint::kFusedInferAttentionScore, rule(Kind::kRunningMax, DType::F16),
                rule(Kind::kRoundE, DType::F16), "TND inner_precise 1 vs fp16 E");
  }
}

TEST(NumericsPaths, IncreFlashAttentionNormalisesThenRoundsFp16) {
  expect_rule(near_equal_scores("BSND", DType::F16, 1, 700), 94, EntryPoint::kIncreFlashAttention,
              rule(Kind::kNormalizeFirst, DType::F16), rule(Kind::kRoundE, DType::F16), "IFA fp16");
}

TEST(NumericsPaths, IncreFlashAttentionKeepsBf16PInF32) {
  expect_rule(near_equal_scores("BSND", DType::BF16, 1, 700), 95, EntryPoint::kIncreFlashAttention,
              rule(Kind::kNormalizeFirst, DType::F32), rule(Kind::kRoundE, DType::BF16), "IFA bf16");
}

TEST(NumericsPaths, PromptFlashAttentionRoundsEOnTokenLayoutsToo) {
  expect_rule(near_equal_scores("TND", DType::BF16, 24, 1500), 96, EntryPoint::kPromptFlashAttention,
              rule(Kind::kRoundE, DType::BF16), rule(Kind::kRoundE, DType::F32), "PFA on TND");
}

TEST(NumericsPaths, NonTokenFiaRoundsEToTheQueryDtype) {
  expect_rule(near_equal_scores("BNSD", DType::BF16, 24, 1500), 97, EntryPoint::kFusedInferAttentionScore,
              rule(Kind::kRoundE, DType::BF16), rule(Kind::kRoundE, DType::F32), "FIA BNSD");
}

// Rows split into chunks (few query rows over long KV): IFA's row sums come before any P·V, and
// the split-fuse chunks sit on the 512-key grid of the running max, entered with the maxima of
// the chunks before. Forced small chunks, stored and recomputed scores, a sink; any thread count.
TEST(NumericsPaths, SplitRowsFollowThePathRule) {
  struct Case {
    EntryPoint entry;
    const char* layout;
    DType dtype;
    std::int64_t inner_precise, q_seq;
    bool sink;
  };
  const Case cases[] = {
      {EntryPoint::kIncreFlashAttention, "BSND", DType::F16, 0, 1, true},
      {EntryPoint::kIncreFlashAttention, "BNSD", DType::F16, 0, 2, false},
      {EntryPoint::kFusedInferAttentionScore, "TND", DType::BF16, 1, 3, true},
      {EntryPoint::kFusedInferAttentionScore, "TND", DType::F16, 1, 2, false},
  };
  for (const Case& c : cases) {
    CallSpec s = near_equal_scores(c.layout, c.dtype, c.q_seq, 2100);
    s.inner_precise = c.inner_precise;
    s.sink = c.sink;
    if (s.layout == "TND") s.act_q = std::vector<std::int64_t>{c.q_seq, c.q_seq - 1};
    TestCall call = build_call(s, 98);
    call.args.entry_point = c.entry;
    detail::ReferenceResult exact;
    ASSERT_TRUE(reference_exact(call.args, &exact).ok());
    for (const std::int64_t wave_budget : {std::int64_t{1} << 24, std::int64_t{4096}}) {
      detail::PlanLimits limits;
      limits.chunk_cols = 100;
      limits.chunk_bytes = 0;
      limits.serial_work = 0;
      limits.wave_budget = wave_budget;
      detail::CpuPlan plan;
      const Outputs out = run_with_limits(call.args, limits, 2, &plan);
      ASSERT_FALSE(plan.splits.empty()) << describe(s);
      const detail::SplitGroup& g = plan.splits.front();
      EXPECT_EQ(g.stored, wave_budget > 4096) << describe(s);
      if (problem_of(call.args).p_rule.kind == Kind::kRunningMax) {
        EXPECT_EQ(g.chunk_cols % 512, 0);
        EXPECT_EQ(g.chunk_origin % 512, 0);
      }
      const Verdict v = criterion_a(out.attention_out, exact.out);
      EXPECT_TRUE(v.pass) << v.detail << "\n" << describe(s) << " wave budget " << wave_budget;
      const Verdict l = lse_match(out.softmax_lse, exact.lse);
      EXPECT_TRUE(l.pass) << l.detail << "\n" << describe(s);
    }
    expect_thread_invariant(call.args, describe(s));
  }
}

// The rule each path gets (25.3).
TEST(NumericsPaths, RuleFollowsEntryPointLayoutAndInnerPrecise) {
  struct Row {
    EntryPoint entry;
    const char* layout;
    DType dtype;
    std::int64_t inner_precise;
    Kind kind;
    DType round_to;
  };
  const Row rows[] = {
      {EntryPoint::kFusedInferAttentionScore, "BSND", DType::F16, 0, Kind::kRoundE, DType::F16},
      {EntryPoint::kFusedInferAttentionScore, "BSND", DType::F16, 1, Kind::kRoundE, DType::F16},
      {EntryPoint::kFusedInferAttentionScore, "BNSD", DType::F32, 0, Kind::kRoundE, DType::F32},
      {EntryPoint::kFusedInferAttentionScore, "TND", DType::F16, 0, Kind::kRoundE, DType::F32},
      {EntryPoint::kFusedInferAttentionScore, "NTD", DType::BF16, 2, Kind::kRoundE, DType::F32},
      {EntryPoint::kFusedInferAttentionScore, "TND", DType::F16, 1, Kind::kRunningMax, DType::F16},
      {EntryPoint::kFusedInferAttentionScore, "NTD_TND", DType::BF16, 3, Kind::kRunningMax, DType::F16},
      {EntryPoint::kFusedInferAttentionScore, "TND", DType::F32, 1, Kind::kRoundE, DType::F32},
      {EntryPoint::kIncreFlashAttention, "BSH", DType::F16, 0, Kind::kNormalizeFirst, DType::F16},
      {EntryPoint::kIncreFlashAttention, "BNSD", DType::BF16, 1, Kind::kNormalizeFirst, DType::F32},
      {EntryPoint::kPromptFlashAttention, "BSND", DType::BF16, 0, Kind::kRoundE, DType::BF16},
      {EntryPoint::kPromptFlashAttention, "TND", DType::F16, 1, Kind::kRoundE, DType::F16},
  };
  for (const Row& r : rows) {
    CallSpec s;
    s.layout = r.layout;
    s.dtype = r.dtype;
    s.q_seq = 3;
    s.kv_seq = 5;
    s.inner_precise = r.inner_precise;
    const bool token = s.layout.find('T') != std::string::npos;
    if (token) {
      s.act_q = std::vector<std::int64_t>{3};
      s.act_kv = std::vector<std::int64_t>{5};
    }
    TestCall call = build_call(s, 5);
    call.args.entry_point = r.entry;
    const detail::Problem p = problem_of(call.args);
    EXPECT_EQ(p.entry_point, r.entry) << r.layout;
    EXPECT_EQ(p.p_rule.kind, r.kind) << r.layout << " inner_precise " << r.inner_precise;
    EXPECT_EQ(p.p_rule.round_to, r.round_to) << r.layout << " inner_precise " << r.inner_precise;
  }
}

}  // namespace
}  // namespace fia::test
