// The cpu backend against the float64 reference (FIA-SPEC 21.1 criterion A) over a seeded random
// sweep of the whole feature space, and over shapes straddling every tile boundary.
#include <gtest/gtest.h>

#include "support/call_builder.hpp"
#include "support/expectations.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

void expect_matches_reference(const CallSpec& spec, std::uint64_t seed, int threads = 2) {
  TestCall call = build_call(spec, seed);
  expect_cpu_matches_reference(call.args, spec.lse, describe(spec), threads);
}

class RandomSweep : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(RandomSweep, CpuMatchesReference) {
  const std::uint64_t seed = GetParam();
  expect_matches_reference(random_spec(seed), seed);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomSweep, ::testing::Range<std::uint64_t>(0, 400));

// Tiles are 64 packed rows (query rows x group) by 128 KV columns: straddle both.
struct Boundary {
  std::int64_t group, q_seq, kv_seq, sparse_mode;
};

class TileBoundary : public ::testing::TestWithParam<Boundary> {};

TEST_P(TileBoundary, CpuMatchesReference) {
  const Boundary b = GetParam();
  CallSpec s;
  s.layout = "BSND";
  s.dtype = DType::BF16;
  s.batch = 2;
  s.num_kv_heads = 2;
  s.num_heads = 2 * b.group;
  s.q_seq = b.q_seq;
  s.kv_seq = b.kv_seq;
  s.qk_dim = 32;
  s.sparse_mode = b.sparse_mode;
  s.mask = b.sparse_mode ? MaskKind::kCompressed : MaskKind::kNone;
  s.lse = true;
  expect_matches_reference(s, static_cast<std::uint64_t>(b.q_seq * 1000 + b.kv_seq));
}

std::vector<Boundary> boundaries() {
  std::vector<Boundary> v;
  for (std::int64_t g : {1, 3, 8})
    for (std::int64_t q : {1, 7, 8, 9, 63, 64, 65})
      for (std::int64_t kv : {1, 127, 128, 129, 257})
        for (std::int64_t mode : {0, 3})
          if (q > 1 || mode == 0) v.push_back({g, q, kv, mode});  // Q_S = 1 here is legacy decode
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, TileBoundary, ::testing::ValuesIn(boundaries()));

// Rows of few queries over long KV are split into 512-token chunks: straddle the split threshold
// (more than 1024 visible columns) and the chunk edges, with masks, sinks and GQA.
struct Split {
  std::int64_t q_seq, kv_seq;
  bool mask, sink;
};

class SplitBoundary : public ::testing::TestWithParam<Split> {};

TEST_P(SplitBoundary, CpuMatchesReference) {
  const Split sp = GetParam();
  CallSpec s;
  s.layout = "BNSD";
  s.dtype = DType::BF16;
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = sp.q_seq;
  s.kv_seq = sp.kv_seq;
  s.act_kv = std::vector<std::int64_t>{sp.kv_seq, sp.kv_seq - 600};
  s.qk_dim = 32;
  s.lse = true;
  s.sink = sp.sink;
  if (sp.mask) {
    s.mask = MaskKind::kFull;
    s.mask_density = 0.3;
  }
  if (sp.q_seq > 1) {
    s.mask = MaskKind::kCompressed;
    s.sparse_mode = 3;
  }
  expect_matches_reference(s, static_cast<std::uint64_t>(sp.q_seq * 7 + sp.kv_seq));
}

std::vector<Split> splits() {
  std::vector<Split> v;
  for (std::int64_t q : {1, 4, 16})
    for (std::int64_t kv : {1024, 1025, 1536, 1537, 2100})
      for (bool mask : {false, true}) v.push_back({q, kv, mask && q == 1, !mask});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, SplitBoundary, ::testing::ValuesIn(splits()));

}  // namespace
}  // namespace fia::test
