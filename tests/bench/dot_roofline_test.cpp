// fia bench's roofline for workloads whose Q·Kᵀ the kernels run as bf16 dot products
// (cpu/bf16_dots-inl.h) or on AMX tiles (cpu/amx.hpp): those FLOPs take their time at the bf16
// dot-product peak or the AMX one, which the workload probes besides the FMA peak. The dot-product
// tests forbid the tiles, which would take Q·Kᵀ of wide items from them.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "bench/runner.hpp"
#include "bench/workload.hpp"
#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "support/isa_params.hpp"

namespace fia::test {
namespace {

/// The one workload `name` of the project's shapes file.
bench::Workload shape(const std::string& name) {
  auto w = bench::load_shapes(FIA_SOURCE_DIR "/bench/shapes.json", {name});
  EXPECT_EQ(w.size(), 1u) << name;
  return w.empty() ? bench::Workload{} : std::move(w[0]);
}

/// Two calls of `w` on the cpu backend (2 workers) measured against `probes`.
bench::Measurement measured(bench::Workload& w, const bench::LimitProbes& probes) {
  Options opt;
  opt.threads = 2;
  opt.backend = Backend::kCpu;
  return bench::measure(w, opt, 2, probes, nullptr);
}

// FLOPs the kernels run as bf16 dot products take their time at the dot-product peak, the others
// at the FMA peak; without a dot-product peak every FLOP takes the FMA peak.
TEST(BenchRoofline, DotProductFlopsTakeTheDotProductPeak) {
  bool memory = true;
  EXPECT_DOUBLE_EQ(bench::roofline_seconds(40e6, 4e9, bench::MachineLimits{20e9, 400e9, 800e9}, &memory, 2e9), 0.0075);
  EXPECT_FALSE(memory);  // 2 ms of bytes, 5 + 2.5 ms of FLOPs
  EXPECT_DOUBLE_EQ(bench::roofline_seconds(40e6, 4e9, bench::MachineLimits{20e9, 400e9}, &memory, 2e9), 0.01);
}

// FLOPs on AMX tiles take their time at the AMX peak; without one, at the FMA peak.
TEST(BenchRoofline, TileFlopsTakeTheAmxPeak) {
  bool memory = true;
  EXPECT_NEAR(bench::roofline_seconds(40e6, 4e9, bench::MachineLimits{20e9, 400e9, 800e9, 4e12}, &memory, 1e9, 2e9),
              0.00425, 1e-15);  // 2.5 ms of fp32 FLOPs, 1.25 ms of dot products, 0.5 ms of tiles
  EXPECT_FALSE(memory);
  EXPECT_NEAR(bench::roofline_seconds(40e6, 4e9, bench::MachineLimits{20e9, 400e9, 800e9}, &memory, 1e9, 2e9),
              0.00875, 1e-15);  // the tiles' FLOPs at the FMA peak
}

// Decode MLA (D6: bf16, 16 rows per item, in place, P rounded to bf16) runs both products as bf16
// dot products where the CPU has them on AVX-512: all its FLOPs are judged against the dot-product
// peak, whose rounds the workload takes besides the FMA peak's. Forbidden, or on another
// instruction set, there are none; bf16 decode of one row per item (D4) never takes them.
TEST(BenchRoofline, DecodeMlaIsJudgedAgainstTheBf16DotProductPeak) {
  const ScopedAmx no_tiles(false);
  EXPECT_EQ(shape("D4").dot_flops_per_call, 0.0);
  {
    const ScopedBf16Dots off(false);
    EXPECT_EQ(shape("D6").dot_flops_per_call, 0.0);
  }
  const ScopedBf16Dots on(true);  // where the CPU has them, whether or not it takes them by default
  bench::Workload w = shape("D6");
  const bool dots = bf16_dots_run_here();
  EXPECT_DOUBLE_EQ(w.dot_flops_per_call, dots ? w.flops_per_call : 0.0);
  if (!dots) GTEST_SKIP() << "no bf16 dot products on this CPU";
  int dot_rounds = 0;
  const bench::Measurement m = measured(w, {[] { return 1e15; }, [] { return 1e12; }, 3, nullptr, nullptr,
                                            [&] { ++dot_rounds; return 2e12; }, nullptr, nullptr});
  ASSERT_TRUE(m.error.empty()) << m.error;
  EXPECT_EQ(dot_rounds, 3);
  EXPECT_EQ(m.bf16_dot_peak.median, 2e12);
  EXPECT_DOUBLE_EQ(m.roofline_s, (w.flops_per_call - w.dot_flops_per_call) / 1e12 + w.dot_flops_per_call / 2e12);
}

// bf16 prefill (P3: TND, P kept in f32) runs Q·Kᵀ as bf16 dot products and P·V as fp32
// multiply-adds: its Q·Kᵀ FLOPs (head dim 128 of 128 + 128) are judged against the dot-product
// peak. fp16 prefill (P1) takes none.
TEST(BenchRoofline, Bf16PrefillJudgesItsQkFlopsAgainstTheBf16DotProductPeak) {
  const ScopedAmx no_tiles(false);
  EXPECT_EQ(shape("P1").dot_flops_per_call, 0.0);
  {
    const ScopedBf16Dots off(false);
    EXPECT_EQ(shape("P3").dot_flops_per_call, 0.0);
  }
  const ScopedBf16Dots on(true);
  const bench::Workload w = shape("P3");
  EXPECT_DOUBLE_EQ(w.dot_flops_per_call, bf16_dots_run_here() ? w.flops_per_call / 2 : 0.0);
  EXPECT_EQ(w.tile_flops_per_call, 0.0);
}

// Where the CPU has AMX tiles, bf16 prefill (P3) runs both products on them (P·V, P kept in f32,
// in three pieces): all its FLOPs are judged against the AMX peak, whose rounds the workload takes
// besides the FMA peak's. fp16 prefill (P1) and bf16 decode (D4) take none, nor P3 with the tiles
// forbidden.
TEST(BenchRoofline, Bf16PrefillIsJudgedAgainstTheAmxPeak) {
  const ScopedBf16Dots no_dots(false);
  {
    const ScopedAmx off(false);
    EXPECT_EQ(shape("P3").tile_flops_per_call, 0.0);
  }
  const ScopedAmx on(true);
  EXPECT_EQ(shape("P1").tile_flops_per_call, 0.0);
  EXPECT_EQ(shape("D4").tile_flops_per_call, 0.0);
  bench::Workload w = shape("P3");
  const bool tiles = amx_runs_here();
  EXPECT_DOUBLE_EQ(w.tile_flops_per_call, tiles ? w.flops_per_call : 0.0);
  EXPECT_EQ(w.dot_flops_per_call, 0.0);
  if (!tiles) GTEST_SKIP() << "no AMX tiles for the kernels here";
  int amx_rounds = 0;
  const bench::Measurement m = measured(w, {[] { return 1e15; }, [] { return 1e12; }, 3, nullptr, nullptr, nullptr,
                                            [&] { ++amx_rounds; return 8e12; }, nullptr});
  ASSERT_TRUE(m.error.empty()) << m.error;
  EXPECT_EQ(amx_rounds, 3);
  EXPECT_EQ(m.amx_peak.median, 8e12);
  EXPECT_DOUBLE_EQ(m.roofline_s, (w.flops_per_call - w.tile_flops_per_call) / 1e12 + w.tile_flops_per_call / 8e12);
}

// Where a row may exclude keys (a full mask, pse), bf16 prefill still takes the dot products for
// both products, P being E rounded to bf16: all its FLOPs count against the dot-product peak.
TEST(BenchRoofline, MaskedBf16PrefillJudgesBothProductsAgainstTheBf16DotProductPeak) {
  const std::string file = testing::TempDir() + "masked_shapes.json";
  {
    std::ofstream f(file);
    f << R"({"shapes": [
      {"name": "M", "what": "full mask", "params": {"num_heads": 8, "num_key_value_heads": 2, "input_layout": "BSND", "scale": 0.1},
       "tensors": {"query": ["BF16", [1, 64, 8, 64]], "key": ["BF16", [1, 300, 2, 64]], "value": ["BF16", [1, 300, 2, 64]],
                   "atten_mask": ["BOOL", [1, 1, 64, 300]]}},
      {"name": "B", "what": "pse", "params": {"num_heads": 8, "num_key_value_heads": 2, "input_layout": "BSND", "scale": 0.1},
       "tensors": {"query": ["BF16", [1, 64, 8, 64]], "key": ["BF16", [1, 300, 2, 64]], "value": ["BF16", [1, 300, 2, 64]],
                   "pse_shift": ["BF16", [1, 8, 64, 300]]}}]})";
  }
  const ScopedBf16Dots on(true);
  const ScopedAmx no_tiles(false);
  const auto loaded = bench::load_shapes(file, {});
  ASSERT_EQ(loaded.size(), 2u);
  for (const bench::Workload& w : loaded) {
    ASSERT_TRUE(w.error.empty()) << w.name << ": " << w.error;
    EXPECT_DOUBLE_EQ(w.dot_flops_per_call, bf16_dots_run_here() ? w.flops_per_call : 0.0) << w.name;
  }
}

// Items of each kind count by their cells: 16 heads of one query row over bf16 rows run in place
// (both products on dot products, P rounded to bf16; on AMX tiles where those take both products
// of wide items), 4 query rows of 16 heads make a wide item of 64 rows (both products too), and
// narrow items (decode of 4 heads over a KV head of their own) take none.
TEST(BenchRoofline, ItemsOfEachKindCountByTheirCells) {
  const std::string file = testing::TempDir() + "mixed_shapes.json";
  {
    std::ofstream f(file);
    f << R"({"shapes": [{"name": "M", "what": "three kinds of items",
      "params": {"num_heads": 8, "num_key_value_heads": 2, "input_layout": "BSND", "scale": 0.1,
                 "actual_seq_lengths": [1, 4, 16]},
      "tensors": {"query": ["BF16", [3, 16, 8, 64]], "key": ["BF16", [3, 300, 2, 64]], "value": ["BF16", [3, 300, 2, 64]]}}]})";
  }
  const ScopedBf16Dots on(true);
  {
    const ScopedAmx no_tiles(false);
    auto loaded = bench::load_shapes(file, {});
    ASSERT_EQ(loaded.size(), 1u);
    if (!bf16_dots_run_here()) GTEST_SKIP() << "no bf16 dot products on this CPU";
    // Cells over 300 keys: one narrow item of 2 KV heads x 4 heads x 1 row (8), two in place of
    // 4 heads x 4 rows (16 each), two wide of 4 heads x 16 rows (64 each).
    EXPECT_DOUBLE_EQ(loaded[0].dot_flops_per_call,
                     loaded[0].flops_per_call * (2 * 16.0 + 2 * 64.0) / (8.0 + 2 * 16.0 + 2 * 64.0));
    EXPECT_EQ(loaded[0].tile_flops_per_call, 0.0);
  }
  // With AMX tiles both products of the wide items move to them, and those of the items of 16
  // rows, which then run as wide items, too.
  const ScopedAmx tiles(true);
  auto loaded = bench::load_shapes(file, {});
  ASSERT_EQ(loaded.size(), 1u);
  if (!amx_runs_here()) GTEST_SKIP() << "no AMX tiles for the kernels here";
  const double all = loaded[0].flops_per_call, cells = 8.0 + 2 * 16.0 + 2 * 64.0;
  EXPECT_DOUBLE_EQ(loaded[0].tile_flops_per_call, all * (2 * 16.0 + 2 * 64.0) / cells);
  EXPECT_EQ(loaded[0].dot_flops_per_call, 0.0);
}

}  // namespace
}  // namespace fia::test
