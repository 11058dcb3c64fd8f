// The in-place wide kernels (cpu/wide_inplace-inl.h): wide items of exactly 16 packed rows over
// fp16/bf16/f32 K and V rows read where they are stored (decode MLA, multi-token GQA decode), on
// every instruction set this build compiles and this CPU supports: against the float64 reference
// (FIA-SPEC 21.1 criterion A) over head dims and KV lengths around every pair-block, Q·Kᵀ block
// (16 tokens on AVX-512, 6 on AVX2, 4 on NEON), P·V-block, tile, chunk and split boundary; paged and
// contiguous caches and any thread count give the same bits; a key some rows exclude never
// reaches them through its V row (25.1 #24). With the AVX3_AMX_TILES parameter the bf16 shapes
// whose dims fill the tiles' chunks run on AMX tiles instead (cpu/prefill_tiles-inl.h), through
// the same checks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "fia/half.hpp"
#include "plan/plan.hpp"
#include "support/call_builder.hpp"
#include "support/expectations.hpp"
#include "support/isa_params.hpp"
#include "support/paged_cache.hpp"
#include "support/run_helpers.hpp"
#include "support/subnormal_weight.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

/// A 16-row shape: `heads` query heads over `kv_heads` KV heads, q_seq query rows (G * Q_S = 16).
struct Shape {
  const char* what;
  std::int64_t heads, kv_heads, q_seq, qk_dim, rope_dim;
  DType dtype;
};

const Shape kShapes[] = {
    {"decode MLA", 16, 1, 1, 512, 64, DType::BF16},
    {"4 draft tokens x 4 GQA heads", 8, 2, 4, 128, 0, DType::F16},
    {"16 GQA heads", 16, 1, 1, 64, 0, DType::BF16},
    {"2 tokens x 8 heads", 16, 2, 2, 96, 0, DType::F32},
    {"16 query rows, MHA", 2, 2, 16, 32, 0, DType::F16},
    {"16 GQA heads, head dim 24", 16, 1, 1, 24, 0, DType::F16},  // whole pair blocks on 128-bit targets only
};

/// The call of shape s over kv keys: causal for several query rows, a full mask, pse or a sink
/// in turn (by `variant`), paged in blocks of 16 for odd variants.
CallSpec spec_of(const Shape& s, std::int64_t kv, int variant) {
  CallSpec c;
  c.layout = variant % 3 == 0 ? "BNSD" : "BSND";
  c.dtype = s.dtype;
  c.batch = 2;
  c.num_heads = s.heads;
  c.num_kv_heads = s.kv_heads;
  c.q_seq = s.q_seq;
  c.kv_seq = kv;
  c.act_kv = std::vector<std::int64_t>{kv, std::max<std::int64_t>(1, kv - 5)};
  c.qk_dim = s.qk_dim;
  c.rope_dim = s.rope_dim;
  c.lse = true;
  if (s.q_seq > 1) {
    c.sparse_mode = 3;
    c.mask = MaskKind::kCompressed;
  } else if (variant % 4 == 1) {
    c.mask = MaskKind::kFull;
    c.mask_density = 0.3;
  }
  c.pse = variant % 4 == 2 && s.rope_dim == 0;
  c.sink = variant % 4 == 3 && s.rope_dim == 0;
  if (variant % 2 == 1) {
    c.storage = KvStorage::kPaged;
    c.block_size = 16;
  }
  return c;
}

/// The call's problem with the kernels' settings as plan() reads them.
detail::Problem problem_of(const FiaArgs& args) {
  detail::Problem p;
  EXPECT_TRUE(detail::build_problem(args, false, &p).ok());
  detail::read_kernel_settings(&p);
  return p;
}

/// True when the call runs on the in-place kernels on the instruction set forced now.
bool in_place_kernels(const FiaArgs& args) {
  return detail::select_item_kernels(problem_of(args)).inplace_scores != nullptr;
}

/// True when `isa` has in-place kernels (AVX-512 and NEON: 32 vector registers of a fixed width)
/// for head dim d: a whole number of pair blocks (2 vectors of f32).
bool has_in_place_kernels(const std::string& isa, std::int64_t d) {
  if (isa.rfind("AVX3", 0) == 0) return d % 32 == 0;
  if (isa == "AVX2") return d % 16 == 0;
  return isa.rfind("NEON", 0) == 0 && d % 8 == 0;
}

using InplacePerIsa = PerIsaAndProducts;

// Except where AMX tiles take both products of bf16 items (key and rope dims in chunks of 32):
// there 16-row items take them too (cpu/prefill_tiles-inl.h).
TEST_P(InplacePerIsa, SixteenRowItemsRunInPlace) {
  const bool tiles = GetParam().find(kAmxTiles) != std::string::npos;
  for (const Shape& s : kShapes) {
    const TestCall call = build_call(spec_of(s, 40, 0), 1);
    const detail::Problem p = problem_of(call.args);
    const bool on_tiles = s.dtype == DType::BF16 && detail::amx_wide_keys(p) && detail::amx_wide_values(p);
    EXPECT_EQ(on_tiles, tiles && s.dtype == DType::BF16 && s.qk_dim % 32 == 0) << s.what;
    EXPECT_EQ(in_place_kernels(call.args), has_in_place_kernels(isa(), s.qk_dim) && !on_tiles) << s.what;
  }
}

TEST_P(InplacePerIsa, MatchesTheReferenceAroundEveryBoundary) {
  int variant = 0;
  for (const Shape& s : kShapes)
    for (const std::int64_t kv : {1, 2, 3, 16, 17, 33, 127, 129, 513, 1030, 1537}) {
      if (s.qk_dim == 512 && kv > 600 && kv != 1030) continue;  // the split is covered once
      const CallSpec spec = spec_of(s, kv, variant++);
      const TestCall call = build_call(spec, static_cast<std::uint64_t>(kv * 31 + variant));
      expect_cpu_matches_reference(call.args, spec.lse, std::string(s.what) + ": " + describe(spec), 2, isa());
    }
}

TEST_P(InplacePerIsa, PagedAndContiguousCachesGiveTheSameBits) {
  for (const Shape& s : kShapes)
    for (const std::int64_t block : {16, 128}) {
      CallSpec spec = spec_of(s, 300, 0);  // BNSD
      spec.storage = KvStorage::kPaged;
      spec.block_size = block;
      spec.paged_bnbsd = block == 128;
      const TestCall paged = build_call(spec, 5);
      const TestCall flat = as_contiguous(paged.args);
      Outputs x, y;
      ASSERT_TRUE(run_call(paged.args, Backend::kCpu, 2, &x).ok()) << s.what;
      ASSERT_TRUE(run_call(flat.args, Backend::kCpu, 2, &y).ok()) << s.what;
      EXPECT_EQ(x.attention_out.bytes, y.attention_out.bytes) << s.what << ", block " << block;
      EXPECT_EQ(x.softmax_lse.bytes, y.softmax_lse.bytes) << s.what << ", block " << block;
    }
}

// Causal decode of 4 draft tokens: the last keys are visible to some rows only. A NaN, inf or huge
// value in such a key's V row reaches exactly the rows that see the key; the others keep their
// bits. The key falls in a P·V block of its own tile (checked tiles: tokens_left_out).
TEST_P(InplacePerIsa, AKeySomeRowsExcludeNeverReachesThemThroughItsValues) {
  for (const DType dtype : {DType::F16, DType::BF16}) {
    CallSpec spec = spec_of(kShapes[1], 150, 0);
    spec.dtype = dtype;
    spec.batch = 1;
    spec.act_kv.reset();
    TestCall call = build_call(spec, 9);
    Outputs clean;
    ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &clean).ok());
    detail::Problem p;
    ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
    const std::int64_t key = spec.kv_seq - 2;  // visible to the last two query rows only
    for (const float poison : {std::nanf(""), INFINITY, 6.0e4f}) {
      for (std::int64_t h = 0; h < p.num_kv_heads; ++h)
        set_stored_value(p.locate(0, h, key).value, p.kv_dtype, 7, poison);
      Outputs out;
      ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &out).ok());
      const auto* a = reinterpret_cast<const std::uint16_t*>(clean.attention_out.bytes.data());
      const auto* b = reinterpret_cast<const std::uint16_t*>(out.attention_out.bytes.data());
      const auto* lse_a = reinterpret_cast<const std::uint32_t*>(clean.softmax_lse.bytes.data());
      const auto* lse_b = reinterpret_cast<const std::uint32_t*>(out.softmax_lse.bytes.data());
      const std::int64_t d = spec.qk_dim;
      for (std::int64_t n = 0; n < spec.num_heads; ++n)
        for (std::int64_t i = 0; i < spec.q_seq; ++i) {
          const std::int64_t row = (n * spec.q_seq + i) * d;  // BNSD
          const bool sees = i >= spec.q_seq - 2;
          // (a row whose P·V went non-finite would be recomputed in float64: its LSE would change)
          if (!sees) {
            ASSERT_EQ(lse_a[n * spec.q_seq + i], lse_b[n * spec.q_seq + i]) << "head " << n << " row " << i;
          }
          for (std::int64_t x = 0; x < d; ++x) {
            if (!sees) {
              ASSERT_EQ(a[row + x], b[row + x]) << "head " << n << " row " << i << " element " << x;
            } else if (x == 7 && poison != 6.0e4f) {
              const float v = dtype == DType::F16 ? f16_to_f32(b[row + x]) : bf16_to_f32(b[row + x]);
              EXPECT_FALSE(std::isfinite(v)) << dtype_name(dtype) << " poison " << poison << " head " << n << " row " << i << ": " << v;
            }
          }
        }
    }
  }
}

TEST_P(InplacePerIsa, ResultsDoNotDependOnTheThreadCount) {
  for (const Shape& s : kShapes) {
    const CallSpec spec = spec_of(s, 1100, 1);
    expect_thread_invariant(build_call(spec, 3).args, s.what);
  }
}

// bf16 dot products read subnormal inputs as 0 (cpu/bf16_dots-inl.h), so a query with a value
// whose products that would change keeps the fp32 products: a subnormal query element (2^-127)
// against keys of 2^127 to 1.875 x 2^127 in that dim, and a query element of 2^127 against
// subnormal key elements (1 to 1.875 x 2^-127), each product between 1 and 1.875 and different
// for every token. Read as 0, the scores would all be equal.
TEST_P(InplacePerIsa, QueriesWhoseProductsBf16DotsWouldDropMatchTheReference) {
  for (const bool subnormal_query : {true, false}) {
    CallSpec spec = spec_of(kShapes[2], 40, 0);  // 16 GQA heads, bf16, head dim 64
    TestCall call = build_call(spec, 17);
    detail::Problem p;
    ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
    for (std::int64_t b = 0; b < spec.batch; ++b) {
      for (std::int64_t n = 0; n < spec.num_heads; ++n)
        set_stored_value(p.query.base, p.dtype, p.query.offset(b, n, 0) + 5,
                         subnormal_query ? std::ldexp(1.0f, -127) : std::ldexp(1.0f, 127));
      for (std::int64_t j = 0; j < p.kv_len(b); ++j) {
        const float m = 1.0f + static_cast<float>(j % 7) / 8.0f;
        set_stored_value(p.locate(b, 0, j).key, p.kv_dtype, 5,
                         subnormal_query ? std::ldexp(m, 127) : std::ldexp(m, -127));
      }
    }
    expect_cpu_matches_reference(call.args, spec.lse, subnormal_query ? "subnormal query" : "query of 2^127", 2, isa());
  }
}

// P·V by bf16 dot products reads a subnormal P as 0 (cpu/bf16_dots-inl.h), so a token with one
// goes through fp32 multiply-adds instead (plant_subnormal_weight: key 7's E about 2^-128 against
// a V row of 2^126).
TEST_P(InplacePerIsa, SubnormalWeightsOfHugeValuesCountAsTheReferenceCountsThem) {
  CallSpec spec = spec_of(kShapes[2], 40, 0);  // 16 GQA heads, bf16, head dim 64, BNSD
  spec.batch = 1;
  spec.act_kv.reset();
  TestCall call = build_call(spec, 23);
  detail::Problem p;
  ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
  plant_subnormal_weight(p, 7);
  expect_cpu_matches_reference(call.args, spec.lse, "subnormal P against V of 2^126", 2, isa());
}

// Where the CPU has bf16 dot products, the bf16 kernels take them when asked for: the two ways
// give other bits for a decode MLA call's LSE (sums in another order), and the same when
// forbidden.
TEST(InplaceBf16Dots, TakenWhenAskedForAndNotWhenForbidden) {
  if (!bf16_dots_possible_here()) GTEST_SKIP() << "the kernels cannot take bf16 dot products here (" << detail::kernel_isa() << ")";
  const CallSpec spec = spec_of(kShapes[0], 300, 0);
  ASSERT_TRUE(spec.lse);
  const TestCall call = build_call(spec, 21);
  EXPECT_NE(run_with_bf16_dots(call.args, true).softmax_lse.bytes, run_with_bf16_dots(call.args, false).softmax_lse.bytes);
  EXPECT_EQ(run_with_bf16_dots(call.args, false).softmax_lse.bytes, run_with_bf16_dots(call.args, false).softmax_lse.bytes);
}

INSTANTIATE_TEST_SUITE_P(Compiled, InplacePerIsa, ::testing::ValuesIn(isa_params()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fia::test
