// Forced schedules (FIA-SPEC 21.1 A): other chunk sizes, scores recomputed instead of stored, many
// waves — results change only within tolerance, and the plans really take those paths.
#include <gtest/gtest.h>

#include <utility>

#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/run_helpers.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

CallSpec long_rows(std::int64_t q_seq, std::int64_t group) {
  CallSpec s;
  s.layout = "BSND";
  s.dtype = DType::BF16;
  s.batch = 2;
  s.num_kv_heads = 2;
  s.num_heads = 2 * group;
  s.q_seq = q_seq;
  s.kv_seq = 1300;
  s.act_kv = std::vector<std::int64_t>{1300, 777};
  s.qk_dim = 32;
  s.lse = true;
  s.sink = true;
  if (q_seq > 1) {
    s.mask = MaskKind::kCompressed;
    s.sparse_mode = 3;
  }
  return s;
}

/// Limits with chunks of `chunk` tokens (not widened to PlanLimits::chunk_bytes), `scores` floats of
/// stored scores per item and `wave` floats per wave.
detail::PlanLimits forced(std::int64_t chunk, std::int64_t scores, std::int64_t wave) {
  detail::PlanLimits l;
  l.chunk_cols = chunk;
  l.score_budget = scores;
  l.wave_budget = wave;
  l.chunk_bytes = 0;
  return l;
}

struct Forced {
  const char* name;
  detail::PlanLimits limits;
};

class ForcedSchedule : public ::testing::TestWithParam<Forced> {};

TEST_P(ForcedSchedule, WithinToleranceOfTheReference) {
  for (std::int64_t q : {1, 5, 40}) {
    for (std::int64_t g : {1, 4, 20}) {
      const CallSpec spec = long_rows(q, g);
      TestCall call = build_call(spec, static_cast<std::uint64_t>(q * 100 + g));
      detail::ReferenceResult exact;
      ASSERT_TRUE(reference_exact(call.args, &exact).ok());
      detail::CpuPlan plan;
      const Outputs o = run_with_limits(call.args, GetParam().limits, 2, &plan);
      const Verdict v = criterion_a(o.attention_out, exact.out);
      EXPECT_TRUE(v.pass) << GetParam().name << ": " << v.detail << "\n" << describe(spec);
      const Verdict l = lse_match(o.softmax_lse, exact.lse);
      EXPECT_TRUE(l.pass) << GetParam().name << ": " << l.detail;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Limits, ForcedSchedule,
                         ::testing::Values(Forced{"default", {}}, Forced{"chunk100", forced(100, 1 << 18, 1 << 24)},
                                           Forced{"chunk7", forced(7, 1 << 18, 1 << 24)},
                                           Forced{"small_items", forced(64, 2000, 1 << 24)},
                                           Forced{"recompute", forced(64, 2000, 3000)},
                                           Forced{"tiny_waves", forced(300, 4000, 60000)}),
                         [](const auto& info) { return std::string(info.param.name); });

// Decode rows longer than two chunks split for parallelism only in a call of few items
// (PlanLimits::split_items_below); a call of many items keeps each item whole. Both schedules are
// within tolerance of the reference.
TEST(ForcedSchedule, LongDecodeRowsSplitOnlyInACallOfFewItems) {
  CallSpec spec = long_rows(1, 4);
  spec.layout = "BNSD";  // KV heads not interleaved: an item per (batch, KV head)
  spec.batch = 8;
  spec.num_kv_heads = 8;
  spec.num_heads = 32;
  spec.act_kv = std::vector<std::int64_t>{1300, 1100, 1300, 1200, 1300, 1050, 1299, 1030};
  const TestCall call = build_call(spec, 77);
  detail::ReferenceResult exact;
  ASSERT_TRUE(reference_exact(call.args, &exact).ok());
  for (const std::int64_t below : {std::int64_t{64}, std::int64_t{65}}) {
    detail::PlanLimits limits;
    limits.split_items_below = below;
    detail::CpuPlan plan;
    const Outputs o = run_with_limits(call.args, limits, 2, &plan);
    EXPECT_EQ(plan.splits.empty(), below <= 64) << below;  // 8 batches x 8 KV heads: 64 items
    EXPECT_EQ(plan.items.size(), below <= 64 ? 64u : 0u) << below;
    const Verdict v = criterion_a(o.attention_out, exact.out);
    EXPECT_TRUE(v.pass) << below << ": " << v.detail;
    EXPECT_TRUE(lse_match(o.softmax_lse, exact.lse).pass) << below;
  }
  spec.batch = 2;  // 16 items: split
  spec.act_kv = std::vector<std::int64_t>{1300, 1100};
  detail::CpuPlan plan;
  run_with_limits(build_call(spec, 78).args, {}, 2, &plan);
  EXPECT_FALSE(plan.splits.empty());
}

TEST(ForcedSchedule, PlansTakeTheForcedPaths) {
  TestCall call = build_call(long_rows(40, 4), 1);
  detail::CpuPlan plan;
  run_with_limits(call.args, forced(64, 2000, 3000), 2, &plan);
  ASSERT_FALSE(plan.splits.empty());
  bool recomputed = false;
  for (const auto& g : plan.splits) recomputed = recomputed || !g.stored;
  EXPECT_TRUE(recomputed);
  EXPECT_GT(plan.waves.size(), 1u);
  run_with_limits(call.args, forced(300, 4000, 60000), 2, &plan);
  bool stored = false;
  for (const auto& g : plan.splits) stored = stored || g.stored;
  EXPECT_TRUE(stored);
  EXPECT_GT(plan.waves.size(), 1u);
}

// A split group's chunks hold PlanLimits::chunk_bytes of K and V rows (here 256 KiB: 512 fp16
// tokens at head dim 128, 1024 int8, 2048 int4), at least chunk_cols tokens; with chunk_bytes 0,
// chunk_cols tokens whatever the format. Results stay within tolerance of the reference.
TEST(ForcedSchedule, ChunksHoldChunkBytesOfKAndV) {
  const std::pair<KvQuant, std::int64_t> formats[] = {{KvQuant::kNone, 512}, {KvQuant::kInt8, 1024}, {KvQuant::kInt4, 2048}};
  for (const auto& [format, tokens] : formats) {
    CallSpec spec;
    spec.layout = "BNSD";
    spec.dtype = DType::F16;
    spec.num_kv_heads = 2;
    spec.num_heads = 8;
    spec.kv_seq = 5000;
    spec.qk_dim = 128;
    spec.quant.format = format;
    const TestCall call = build_call(spec, 40 + static_cast<std::uint64_t>(tokens));
    detail::ReferenceResult exact;
    ASSERT_TRUE(reference_exact(call.args, &exact).ok());
    detail::CpuPlan plan;
    const Outputs o = run_with_limits(call.args, {}, 2, &plan);
    ASSERT_FALSE(plan.splits.empty()) << tokens;
    EXPECT_EQ(plan.splits.front().chunk_cols, tokens);
    EXPECT_EQ(plan.splits.front().chunks, (5000 + tokens - 1) / tokens);
    const Verdict v = criterion_a(o.attention_out, exact.out);
    EXPECT_TRUE(v.pass) << tokens << ": " << v.detail;
    detail::PlanLimits by_tokens;
    by_tokens.chunk_bytes = 0;
    run_with_limits(call.args, by_tokens, 2, &plan);
    ASSERT_FALSE(plan.splits.empty()) << tokens;
    EXPECT_EQ(plan.splits.front().chunk_cols, 512);
  }
}

TEST(ForcedSchedule, ChunkSizesChangeResultsOnlyWithinTolerance) {
  TestCall call = build_call(long_rows(1, 8), 9);
  detail::CpuPlan plan;
  const Outputs a = run_with_limits(call.args, forced(512, 1 << 18, 1 << 24), 2, &plan);
  const Outputs b = run_with_limits(call.args, forced(33, 1 << 18, 1 << 24), 2, &plan);
  const Verdict v = criterion_a(b.attention_out, to_doubles(a.attention_out));
  EXPECT_TRUE(v.pass) << v.detail;
}

}  // namespace
}  // namespace fia::test

namespace fia::test {
namespace {

TEST(ForcedSchedule, SmallCallsRunOnTheCallingThread) {
  CallSpec small;
  small.kv_seq = 10;
  CallSpec large = long_rows(40, 4);
  for (const auto& [spec, serial] : {std::pair{small, true}, std::pair{large, false}}) {
    TestCall call = build_call(spec, 3);
    detail::Problem p;
    ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
    EXPECT_EQ(detail::make_cpu_plan(p, 4).threads == 1, serial) << describe(spec);
  }
}

/// The packed rows of an item (the query heads that share a KV head packed together, FIA-SPEC 4:
/// query row, then KV head, then query head within it) as for_each_row walks them, against
/// query_head and query_row, for items of one or several KV heads and query heads, starting past
/// row 0, head 0 and KV head 0.
TEST(ForcedSchedule, ItemRowsWalkThePackedRowsInOrder) {
  for (const std::int64_t kv_heads : {1, 3})
    for (const std::int64_t heads : {1, 2, 5}) {
      detail::WorkItem it;
      it.h = 2;
      it.kv_heads = kv_heads;
      it.head0 = 1;
      it.heads = heads;
      it.row_begin = 7;
      it.row_end = 11;
      const std::int64_t group = 8;
      std::int64_t next = 0;
      it.for_each_row(group, [&](std::int64_t r, std::int64_t n, std::int64_t i) {
        EXPECT_EQ(r, next++);
        EXPECT_EQ(n, it.query_head(group, r)) << "row " << r;
        EXPECT_EQ(i, it.query_row(r)) << "row " << r;
      });
      EXPECT_EQ(next, detail::packed_rows(it)) << kv_heads << " KV heads, " << heads << " heads";
    }
}

}  // namespace
}  // namespace fia::test
