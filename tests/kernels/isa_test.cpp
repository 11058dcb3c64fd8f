// The kernels on every instruction set this build compiles and this CPU supports (Highway
// dynamic dispatch): each one against the float64 reference, over random calls and over head
// dims and KV lengths that straddle every vector, tile and chunk boundary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "support/antiquant_builder.hpp"
#include "support/call_builder.hpp"
#include "support/expectations.hpp"
#include "support/isa_params.hpp"
#include "support/paged_cache.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"
#include "support/scoped_env.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

class PerIsa : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(detail::force_isa(GetParam())) << GetParam(); }
  void TearDown() override { detail::force_isa(""); }

  void check(const CallSpec& spec, std::uint64_t seed) {
    TestCall call = build_call(spec, seed);
    expect_cpu_matches_reference(call.args, spec.lse, describe(spec), 2, GetParam());
  }
};

TEST_P(PerIsa, RandomCalls) {
  for (std::uint64_t seed = 2000; seed < 2060; ++seed) check(random_spec(seed), seed);
}

TEST_P(PerIsa, HeadDimsAndKvLengthsAroundEveryBoundary) {
  for (std::int64_t d : {16, 24, 64, 100, 128, 256}) {
    for (std::int64_t kv : {1, 511, 512, 513, 1025, 1537, 2500}) {
      for (std::int64_t q : {1, 3, 40}) {
        if (q == 40 && kv > 600) continue;  // prefill lengths are covered by the tile tests
        CallSpec s;
        s.layout = "BNSD";
        s.dtype = d % 3 ? DType::BF16 : DType::F16;
        s.num_heads = 4;
        s.num_kv_heads = 2;
        s.q_seq = q;
        s.kv_seq = kv;
        s.qk_dim = d;
        s.lse = true;
        s.sink = kv % 2 == 1;
        if (q > 1) {
          s.mask = MaskKind::kCompressed;
          s.sparse_mode = 3;
        }
        check(s, static_cast<std::uint64_t>(d * 10000 + kv * 10 + q));
      }
    }
  }
}

// Decode Q·Kᵀ goes 3 tokens at a time against 3-4 query rows on targets without the 4-token
// kernel (cpu/decode-inl.h): runs of every length mod 3 and mod 4, in a contiguous cache and in
// paged blocks (whose runs end at every block, and whose BSH rows take the interleaved-head walk),
// with a rope part and a head dim that leaves a scalar tail.
TEST_P(PerIsa, DecodeRunsOfEveryLengthAgainstThreeAndFourRows) {
  for (std::int64_t group : {3, 4})
    for (std::int64_t kv : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 22, 23}) {
      CallSpec s;
      s.layout = kv % 2 ? "BNSD" : "BSH";
      s.num_heads = 2 * group;
      s.num_kv_heads = 2;
      s.batch = 2;
      s.kv_seq = kv;
      s.qk_dim = kv % 3 ? 64 : 100;
      s.rope_dim = kv == 7 ? 16 : 0;
      s.storage = kv > 8 ? KvStorage::kPaged : KvStorage::kContiguous;
      s.block_size = 16;
      s.act_kv = std::vector<std::int64_t>{kv, std::max<std::int64_t>(1, kv - 2)};
      check(s, static_cast<std::uint64_t>(group * 1000 + kv));
    }
}

// Decode items of one query row (MHA) score rows of floats 16 tokens at a time on AVX-512 (one
// sum tree for 16 scores, cpu/reductions-inl.h dots16_store) and 4 at a time elsewhere and after
// the last 16 of a run: a token's score must be the same bits in either. Runs around 16 and its
// multiples, contiguous and in paged blocks of 5, 16 and 24 tokens (whose runs end elsewhere), in
// fp16, bf16 and f32, with a rope part and a head dim that leaves a scalar tail: the same bits
// both ways, and the reference matched.
TEST_P(PerIsa, OneRowDecodeScoresAreTheSameBitsInAnyGroupOfTokens) {
  int i = 0;
  for (const DType dtype : {DType::F16, DType::BF16, DType::F32})
    for (std::int64_t kv : {15, 16, 17, 31, 33, 48, 50, 97})
      for (std::int64_t block : {5, 16, 24}) {
        CallSpec s;
        s.layout = "BNSD";
        s.dtype = dtype;
        s.batch = 2;
        s.num_heads = 3;
        s.num_kv_heads = 3;
        s.kv_seq = kv;
        s.act_kv = std::vector<std::int64_t>{kv, std::max<std::int64_t>(1, kv - 7)};
        s.qk_dim = i % 4 == 3 ? 100 : 64;
        s.rope_dim = i % 5 == 2 ? 16 : 0;
        s.lse = true;
        s.storage = KvStorage::kPaged;
        s.block_size = block;
        const TestCall paged = build_call(s, static_cast<std::uint64_t>(9100 + i++));
        const TestCall flat = as_contiguous(paged.args);
        expect_same_bits(paged.args, "paged", flat.args, "contiguous", describe(s));
        expect_cpu_matches_reference(flat.args, true, describe(s), 2, GetParam());
      }
}

// Decode items spanning several KV heads of interleaved rows (BSH, BSND; contiguous and paged)
// walk blocks of 8 tokens of K rows and 16 of V rows, one kernel call covering every KV head of a
// block (cpu/decode_rows-inl.h): 2, 3, 5 and 9 KV heads (with 8 query heads per KV head, items of
// 8 and of 1 KV heads, which do not fill the token rows), 1 to 8 query heads per KV head (past the
// 4 rows one product covers), runs around both blocks and twice the V block (the two act_kv
// differ by 3, so the second sequence ends elsewhere again), one and two query rows, a rope part,
// a head dim with a scalar tail.
TEST_P(PerIsa, InterleavedHeadsOneCallPerBlock) {
  int i = 0;
  for (std::int64_t kv_heads : {2, 3, 5, 9})
    for (std::int64_t group : {1, 2, 4, 5, 8})
      for (std::int64_t kv : {7, 8, 9, 16, 17, 33, 40}) {
        CallSpec s;
        s.layout = i % 2 ? "BSND" : "BSH";
        s.dtype = i % 3 ? DType::F16 : DType::BF16;
        s.batch = 2;
        s.num_heads = kv_heads * group;
        s.num_kv_heads = kv_heads;
        s.q_seq = i % 4 == 3 ? 2 : 1;
        s.kv_seq = kv;
        s.act_kv = std::vector<std::int64_t>{kv, std::max<std::int64_t>(1, kv - 3)};
        s.qk_dim = i % 5 == 4 ? 100 : 64;
        s.rope_dim = i % 7 == 3 ? 16 : 0;
        s.lse = true;
        if (i % 3 == 1) {
          s.storage = KvStorage::kPaged;
          s.block_size = 16;
        }
        check(s, static_cast<std::uint64_t>(7000 + i));
        ++i;
      }
}

// Decode P·V goes in blocks of V rows (cpu/decode-inl.h, run_pv): where a pass covers fewer than
// 64 floats (AVX2, NEON, SSE4) 2 KiB for one or two query rows and 4 KiB for three or four, 4 KiB
// and 16 to 32 tokens on AVX-512, whose second pass over a row of 128 reads the block from L1; a
// block whose every token is weighted skips the per-token tests. Runs ending at and around those
// edges, in fp16, bf16, int8 and int4 rows (8, 8, 16 and 16 tokens per 2 KiB, twice as many per
// 4 KiB, int4 unpacked to int8 rows; on AVX-512 16, 16, 32 and 32 tokens, int4 read in place),
// with offsets or without (dequantized rows go unblocked), one to four query rows, with no key
// masked and with a few (so that some blocks are whole and others are not).
TEST_P(PerIsa, DecodeValueBlocksAroundEveryEdge) {
  int i = 0;
  for (int format = 0; format < 4; ++format)
    for (std::int64_t kv : {7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 200})
      for (bool masked : {false, true}) {
        CallSpec s;
        s.layout = "BNSD";
        s.dtype = format == 1 ? DType::BF16 : DType::F16;
        s.num_kv_heads = 2;
        s.num_heads = 2 * (1 + i % 4);
        s.kv_seq = kv;
        s.qk_dim = 128;
        s.lse = true;
        if (masked) {
          s.mask = MaskKind::kFull;
          s.mask_density = 0.02;
        }
        if (format >= 2)
          set_antiquant(s, format == 2 ? KvQuant::kInt8 : KvQuant::kInt4, AntiquantKind::kChannel,
                        static_cast<std::uint64_t>(i));
        check(s, static_cast<std::uint64_t>(9000 + i));
        ++i;
      }
}

// Narrow (decode) items walk their columns in tiles as wide as keep P within 16 KiB
// (cpu/decode-inl.h, narrow_tile_columns): 512 columns for items of 1 to 8 packed rows, 384 for 9
// or 10, 256 for 11 to 16, 128 beyond. Items of 1, 4, 10, 12, 16 and 32 rows (the last two
// spanning several KV heads of a BSH cache), unsplit, over KV lengths at and around each tile
// edge, with no key masked, with a few keys masked (each tile then checks visibility per element)
// and with a position bias.
TEST_P(PerIsa, DecodeTilesAroundEveryEdge) {
  struct Rows {
    const char* layout;
    std::int64_t heads, kv_heads;
  };
  const Rows rows[] = {{"BNSD", 2, 2}, {"BNSD", 8, 2}, {"BNSD", 20, 2}, {"BNSD", 24, 2}, {"BSH", 16, 4}, {"BSH", 32, 8}};
  int i = 0;
  for (const Rows& r : rows)
    for (std::int64_t kv : {127, 128, 129, 255, 256, 257, 383, 384, 385, 511, 512, 513, 700})
      for (int variant = 0; variant < 3; ++variant) {
        CallSpec s;
        s.layout = r.layout;
        s.dtype = i % 2 ? DType::BF16 : DType::F16;
        s.num_heads = r.heads;
        s.num_kv_heads = r.kv_heads;
        s.kv_seq = kv;
        s.qk_dim = 64;
        s.lse = true;
        if (variant == 1) {
          s.mask = MaskKind::kFull;
          s.mask_density = 0.02;
        }
        s.pse = variant == 2;
        check(s, static_cast<std::uint64_t>(11000 + i));
        ++i;
      }
}

INSTANTIATE_TEST_SUITE_P(Compiled, PerIsa, ::testing::ValuesIn(detail::available_isas()),
                         [](const auto& info) { return info.param; });

TEST(Isa, EnvironmentCapIsHonoured) {
  const auto isas = detail::available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_FALSE(detail::force_isa("NOT_AN_ISA"));
  ASSERT_TRUE(detail::force_isa(isas.back()));
  EXPECT_STREQ(detail::kernel_isa(), isas.back().c_str());
  detail::force_isa("");
  EXPECT_STREQ(detail::kernel_isa(), isas.front().c_str());
}

/// The target the kernels dispatch to, when FIA_EXPECT_ISA names it: scripts/cross-aarch64.sh
/// checks that each emulated CPU reaches the Highway target it is meant to test.
TEST(Isa, DispatchesToTheExpectedTarget) {
  const char* want = std::getenv("FIA_EXPECT_ISA");
  if (want == nullptr || *want == '\0') GTEST_SKIP() << "FIA_EXPECT_ISA is not set";
  ASSERT_TRUE(detail::apply_isa_cap_from_env());
  EXPECT_STREQ(detail::kernel_isa(), want);
}

// The bf16 dot-product setting (cpu/isa.hpp): by default the kernels take them only where the CPU
// runs them faster than fp32 FMAs; FIA_BF16_DOTS=1 (or set_bf16_dots(true)) wherever the CPU has
// them, FIA_BF16_DOTS=0 (or set_bf16_dots(false)) nowhere; reset_bf16_dots reads the environment
// again.
TEST(Isa, Bf16DotsFollowTheCpuTheEnvironmentAndTheSetting) {
  {  // FIA_BF16_DOTS back as it was at the end of the block, then read again
    const ScopedEnv env("FIA_BF16_DOTS");
    EXPECT_TRUE(!detail::bf16_dots_faster() || detail::bf16_dots_supported());
    env.unset();
    detail::reset_bf16_dots();
    EXPECT_EQ(detail::bf16_dots_enabled(), detail::bf16_dots_faster());
    detail::set_bf16_dots(true);
    EXPECT_EQ(detail::bf16_dots_enabled(), detail::bf16_dots_supported());
    detail::set_bf16_dots(false);
    EXPECT_FALSE(detail::bf16_dots_enabled());
    env.set("1");
    detail::reset_bf16_dots();
    EXPECT_EQ(detail::bf16_dots_enabled(), detail::bf16_dots_supported());
    env.set("0");
    detail::reset_bf16_dots();
    EXPECT_FALSE(detail::bf16_dots_enabled());
    env.set("");
    detail::reset_bf16_dots();
    EXPECT_EQ(detail::bf16_dots_enabled(), detail::bf16_dots_faster());
    EXPECT_TRUE(detail::bf16_dots_setting_valid());
    // Any other value is an error plan() reports, naming the variable; set_bf16_dots overrides it.
    env.set("off");
    detail::reset_bf16_dots();
    EXPECT_FALSE(detail::bf16_dots_setting_valid());
    EXPECT_EQ(detail::bf16_dots_enabled(), detail::bf16_dots_faster());
    const TestCall call = build_call(CallSpec{}, 3);
    Plan plan_out;
    const Status st = plan(call.args, Options{}, &plan_out);
    EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
    EXPECT_EQ(st.parameter, "FIA_BF16_DOTS") << st.to_string();
    EXPECT_NE(st.message.find("'off'"), std::string::npos) << st.to_string();
    detail::set_bf16_dots(false);
    EXPECT_TRUE(detail::bf16_dots_setting_valid());
    EXPECT_TRUE(plan(call.args, Options{}, &plan_out).ok());
  }
  detail::reset_bf16_dots();
}

// A plan says what its kernels do (cpu/isa.hpp read_kernel_settings): asked for on a CPU that has
// them, bf16 dot products are planned on the kernels built with them (the AVX-512 targets) and on
// no other (FIA_ISA=AVX2 and below, Arm), where the kernels could not take them.
TEST(Isa, Bf16DotsArePlannedOnlyOnKernelsThatHaveThem) {
  if (!detail::bf16_dots_supported()) GTEST_SKIP() << "no bf16 dot products on this CPU";
  CallSpec spec;
  spec.dtype = DType::BF16;
  const TestCall call = build_call(spec, 5);
  detail::Problem p;
  ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
  const ScopedBf16Dots asked(true);
  struct DefaultIsaAfterwards {
    ~DefaultIsaAfterwards() { detail::force_isa(""); }
  } restore;
  for (const std::string& isa : detail::available_isas()) {
    ASSERT_TRUE(detail::force_isa(isa)) << isa;
    detail::read_kernel_settings(&p);
    EXPECT_EQ(p.bf16_dots, detail::kernel_isa_has_bf16_dots()) << isa;
    if (isa.rfind("AVX3", 0) != 0) EXPECT_FALSE(p.bf16_dots) << isa;
  }
}

}  // namespace
}  // namespace fia::test
