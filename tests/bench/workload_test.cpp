// The benchmark workloads are the calls shapes.json describes (bytes and FLOPs as the issue defines
// them). Nothing here is timed.
#include <gtest/gtest.h>

#include "bench/workload.hpp"
#include "support/criterion.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

const char* kShapes = FIA_SOURCE_DIR "/bench/shapes.json";

TEST(BenchWorkload, ShapesBecomeValidCallsWithTheirWork) {
  auto w = bench::load_shapes(kShapes, {"D1", "D3", "P1", "P3"});
  ASSERT_EQ(w.size(), 4u);
  EXPECT_TRUE(w[0].error.empty()) << w[0].error;
  EXPECT_TRUE(w[0].decode);
  EXPECT_DOUBLE_EQ(w[0].bytes_per_call, 2.0 * 8 * 4096 * 128 * 2);  // K + V, fp16
  EXPECT_NE(w[1].error.find("not supported"), std::string::npos) << w[1].error;  // int8 KV
  EXPECT_FALSE(w[2].decode);
  EXPECT_DOUBLE_EQ(w[2].flops_per_call, 4.0 * 32 * 2048 * 2048 * 128 / 2);  // causal halves
  const double cells = 300.0 * 300 + 800.0 * 800 + 300.0 * 300 + 600.0 * 600;  // TND lengths
  EXPECT_DOUBLE_EQ(w[3].flops_per_call, 4.0 * 16 * cells * 128 / 2);
}

TEST(BenchWorkload, ColdCopiesHoldDifferentKvAndGiveResultsOfTheSameCall) {
  auto w = bench::load_shapes(kShapes, {"D1"});
  bench::add_cold_copies(w[0], 3.0 * w[0].bytes_per_call);
  ASSERT_EQ(w[0].copies.size(), 3u);
  EXPECT_NE(w[0].copies[0]->args.key[0].data, w[0].copies[1]->args.key[0].data);
  for (const auto& c : w[0].copies) {
    detail::ReferenceResult exact;
    ASSERT_TRUE(reference_exact(c->args, &exact).ok());
    Outputs out;
    ASSERT_TRUE(run_call(c->args, Backend::kCpu, 2, &out).ok());
    EXPECT_TRUE(criterion_a(out.attention_out, exact.out).pass);
  }
}

}  // namespace
}  // namespace fia::test
