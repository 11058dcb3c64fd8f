// KV antiquantization (FIA-SPEC 12): the cpu backend on every instruction set this build compiles
// and this CPU supports, against the float64 reference (which dequantizes exactly), over every
// mode x int8/int4 x storage form x layout x GQA x decode/prefill x lengths around every block,
// tile and chunk boundary x offsets x masks / sparse modes / pse / sink / LSE; and bit-identical
// results for any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "support/call_builder.hpp"
#include "support/expectations.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

bool chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }

using Kind = AntiquantKind;

/// A random valid antiquant call: random_spec's feature space (without MLA rope, which does not
/// combine with antiquant) with int8 or int4 K/V in a random mode.
CallSpec random_quant_spec(std::uint64_t seed) {
  SpecAxes axes;
  axes.max_kv_seq = 200;
  CallSpec s;
  for (std::uint64_t k = 0;; ++k) {  // reroll until no rope
    s = random_spec(seed * 131 + k, axes);
    if (s.rope_dim == 0) break;
  }
  std::mt19937_64 rng(seed);
  const std::vector<Kind> kinds = antiquant_kinds(s);
  set_antiquant(s, chance(rng, 0.5) ? KvQuant::kInt8 : KvQuant::kInt4, kinds[rng() % kinds.size()], rng());
  return s;
}

/// The cpu backend (2 threads) against the exact reference: criterion A and the LSE.
void expect_matches_reference(const CallSpec& spec, std::uint64_t seed, const std::string& isa) {
  TestCall call = build_call(spec, seed);
  expect_cpu_matches_reference(call.args, spec.lse, describe(spec) + " seed " + std::to_string(seed), 2, isa);
}

/// The storage forms of the systematic sweep.
enum class Form { kContiguous, kPagedBnBsH, kPagedBnNBsD, kTensorList, kPrefix, kLeftPadding, kPagedPrefix };
constexpr Form kForms[] = {Form::kContiguous,  Form::kPagedBnBsH, Form::kPagedBnNBsD, Form::kTensorList,
                           Form::kPrefix,      Form::kLeftPadding, Form::kPagedPrefix};

/// A spec of `form` with B = 3 and uneven lengths (one batch empty for odd i); layouts, GQA,
/// dtypes, Q_S and visibility features vary with i.
CallSpec form_spec(Form form, int i) {
  static const char* kLayouts[] = {"BNSD", "BSH", "BSND", "BNSD_BSND", "BSH_BNSD", "BSND_BNSD"};
  static const char* kTokenLayouts[] = {"TND", "NTD", "TND_NTD", "NTD_TND"};
  static const std::pair<int, int> kHeads[] = {{1, 1}, {4, 2}, {6, 3}, {8, 1}, {4, 4}};
  CallSpec s;
  const bool token_ok = form == Form::kContiguous || form == Form::kPagedBnBsH || form == Form::kPagedBnNBsD;
  s.layout = token_ok && i % 3 == 2 ? kTokenLayouts[i % 4] : kLayouts[i % 6];
  const bool token = s.layout.find('T') != std::string::npos;
  s.dtype = i % 5 == 4 ? DType::F32 : i % 2 ? DType::BF16 : DType::F16;
  s.batch = 3;
  s.num_heads = kHeads[i % 5].first;
  s.num_kv_heads = kHeads[i % 5].second;
  s.qk_dim = i % 4 == 3 ? 128 : 64;
  s.v_dim = i % 7 == 5 ? 32 : 0;
  s.q_seq = i % 2 ? 1 + (i % 3) * 9 : 1;  // decode, and prefill of 10 or 19 rows
  s.kv_seq = 70 + 13 * (i % 5);
  s.act_kv = std::vector<std::int64_t>{s.kv_seq, i % 2 ? 0 : s.kv_seq - 31, s.kv_seq - 5};
  if (token) s.act_q = std::vector<std::int64_t>{s.q_seq, std::max<std::int64_t>(s.q_seq - 1, 1), s.q_seq};
  s.lse = true;
  s.sink = i % 4 == 1;
  s.pse = !token && i % 5 == 2;
  switch (i % 4) {
    case 0: break;
    case 1:
      s.mask = MaskKind::kFull;
      s.mask_rank = 4;
      s.sparse_mode = 1;
      break;
    case 2:
      s.mask = MaskKind::kCompressed;
      s.sparse_mode = 3;
      break;
    default:
      s.mask = MaskKind::kCompressed;
      s.sparse_mode = 4;
      s.pre_tokens = 40;
      s.next_tokens = 2;
      break;
  }
  if (s.q_seq == 1 && s.mask == MaskKind::kCompressed) {
    s.mask = MaskKind::kNone;
    s.sparse_mode = 0;
  }
  switch (form) {
    case Form::kContiguous: break;
    case Form::kPagedBnBsH:
    case Form::kPagedBnNBsD:
    case Form::kPagedPrefix:
      s.storage = KvStorage::kPaged;
      s.block_size = i % 3 == 0 ? 16 : 32;
      s.paged_bnbsd = form == Form::kPagedBnNBsD || (form == Form::kPagedPrefix && i % 2);
      if (form == Form::kPagedPrefix) {
        s.prefix_seq = 20;
        s.prefix_len = 17;
      }
      break;
    case Form::kTensorList: s.storage = KvStorage::kTensorList; break;
    case Form::kPrefix:
      s.prefix_seq = 24;
      if (i % 2) s.prefix_len = 9;
      break;
    case Form::kLeftPadding:
      s.kv_padding = 4;
      s.kv_seq += 4 + 6;  // 6 tokens before the longest window
      if (s.q_seq > 1) {
        s.act_q = std::vector<std::int64_t>{s.q_seq, s.q_seq - 3, s.q_seq - 1};
        s.query_padding = 2;
        s.q_seq += 2 + 1;
      }
      break;
  }
  return s;
}

class AntiquantPerIsa : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(detail::force_isa(GetParam())) << GetParam(); }
  void TearDown() override { detail::force_isa(""); }
};

// Every kind of parameters x int8/int4 x every storage form (layouts, GQA, Q_S, masks rotate).
TEST_P(AntiquantPerIsa, ModesByStorageForms) {
  int i = 0;
  for (Form form : kForms) {
    for (KvQuant format : {KvQuant::kInt8, KvQuant::kInt4}) {
      CallSpec base = form_spec(form, i);
      for (Kind kind : antiquant_kinds(base)) {
        CallSpec s = form_spec(form, i++);
        set_antiquant(s, format, kind, static_cast<std::uint64_t>(i) * 7 + 1);
        SCOPED_TRACE(antiquant_kind_name(kind));
        expect_matches_reference(s, static_cast<std::uint64_t>(i), GetParam());
      }
    }
  }
}

// The random sweep: random_spec's whole feature space with random antiquant parameters.
TEST_P(AntiquantPerIsa, RandomCalls) {
  for (std::uint64_t seed = 3000; seed < 3150; ++seed) expect_matches_reference(random_quant_spec(seed), seed, GetParam());
}

// KV lengths around blocks (32), tiles (128 columns), the split threshold (> 1024 visible
// columns, decode rows <= 16) and chunks (512); Q_S around the wide-kernel (16 packed rows) and
// tile (64 packed rows) limits; narrow and wide items; length 0.
TEST_P(AntiquantPerIsa, LengthsAroundEveryBoundary) {
  int i = 0;
  for (std::int64_t kv : {1, 31, 32, 33, 127, 128, 129, 511, 512, 513, 1025, 1536, 1537}) {
    for (std::int64_t q : {1, 4, 16, 17, 65}) {
      if (q >= 16 && kv > 600) continue;  // long prefill rows: covered by the chunk tests above
      if (q == 65 && kv > 200) continue;
      CallSpec s;
      s.layout = i % 2 ? "BSND" : "BNSD";
      s.dtype = i % 3 ? DType::BF16 : DType::F16;
      s.batch = 2;
      s.num_heads = q == 1 ? 8 : 4;
      s.num_kv_heads = q == 1 && i % 2 ? 1 : 2;
      s.q_seq = q;
      s.kv_seq = kv;
      s.act_kv = std::vector<std::int64_t>{kv, i % 3 == 0 ? 0 : std::max<std::int64_t>(kv - 40, 1)};
      s.qk_dim = i % 4 == 1 ? 128 : 64;
      s.lse = true;
      s.sink = kv % 2 == 1;
      if (q > 1) {
        s.mask = MaskKind::kCompressed;
        s.sparse_mode = 3;
      }
      if (i % 3 == 1) {
        s.storage = KvStorage::kPaged;
        s.block_size = 32;
        s.paged_bnbsd = i % 2;
      }
      const std::vector<Kind> kinds = antiquant_kinds(s);
      const Kind kind = kinds[static_cast<std::size_t>(i) % kinds.size()];
      set_antiquant(s, i % 2 ? KvQuant::kInt4 : KvQuant::kInt8, kind, static_cast<std::uint64_t>(i));
      SCOPED_TRACE(antiquant_kind_name(kind));
      expect_matches_reference(s, static_cast<std::uint64_t>(kv * 100 + q), GetParam());
      ++i;
    }
  }
}

// int8 and int4 K/V in the interleaved-head decode walk (BSH, BSND): rows read in place (int8
// without offsets, int4 in lane order on AVX-512) take one kernel call per block for every KV
// head, the others a call per head over their unpacked or dequantized rows; 2, 3 and 5 KV heads,
// 4 and 8 query heads per KV head, runs around the 8-token block of K rows and the 16-token block
// of V rows, contiguous and paged.
TEST_P(AntiquantPerIsa, InterleavedHeadsInPlaceAndUnpacked) {
  int i = 0;
  for (std::int64_t kv_heads : {2, 3, 5})
    for (std::int64_t kv : {7, 9, 16, 17, 33, 40})
      for (KvQuant format : {KvQuant::kInt8, KvQuant::kInt4}) {
        CallSpec s;
        s.layout = i % 2 ? "BSND" : "BSH";
        s.dtype = i % 3 ? DType::F16 : DType::BF16;
        s.batch = 2;
        s.num_heads = kv_heads * (i % 4 == 1 ? 8 : 4);
        s.num_kv_heads = kv_heads;
        s.kv_seq = kv;
        s.act_kv = std::vector<std::int64_t>{kv, std::max<std::int64_t>(1, kv - 3)};
        s.qk_dim = 64;
        s.lse = true;
        if (i % 3 == 1) {
          s.storage = KvStorage::kPaged;
          s.block_size = 16;
        }
        const std::vector<Kind> kinds = antiquant_kinds(s);
        const Kind kind = kinds[static_cast<std::size_t>(i) % kinds.size()];
        set_antiquant(s, format, kind, static_cast<std::uint64_t>(i));
        s.quant.offsets = i % 4 >= 2;
        SCOPED_TRACE(antiquant_kind_name(kind));
        expect_matches_reference(s, static_cast<std::uint64_t>(8000 + i), GetParam());
        ++i;
      }
}

INSTANTIATE_TEST_SUITE_P(Compiled, AntiquantPerIsa, ::testing::ValuesIn(detail::available_isas()),
                         [](const auto& info) { return info.param; });

// Results do not depend on the thread count: forced multithreading and chunking, 1, 2 and 5
// workers, bit for bit.
class AntiquantThreadInvariance : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(AntiquantThreadInvariance, OneAndTwoThreadsAreBitIdentical) {
  const std::uint64_t seed = GetParam();
  CallSpec spec = random_quant_spec(seed);
  spec.lse = true;
  TestCall call = build_call(spec, seed);
  expect_thread_invariant(call.args, describe(spec));
}

INSTANTIATE_TEST_SUITE_P(Seeds, AntiquantThreadInvariance, ::testing::Range<std::uint64_t>(4000, 4080));

// Long decode rows split into chunks with the default limits, every kind of parameters.
TEST(AntiquantThreadInvariance, SplitDecodeIsBitIdentical) {
  int i = 0;
  for (Kind kind : kAntiquantKinds) {
    CallSpec s;
    s.layout = "BSH";
    s.dtype = DType::F16;
    s.num_heads = 8;
    s.num_kv_heads = 2;
    s.q_seq = 1;
    s.kv_seq = 2100;
    s.act_kv = std::vector<std::int64_t>{2100};
    s.qk_dim = 64;
    s.lse = true;
    s.sink = true;
    s.storage = KvStorage::kPaged;
    s.block_size = 128;
    set_antiquant(s, i % 2 ? KvQuant::kInt4 : KvQuant::kInt8, kind, static_cast<std::uint64_t>(i));
    ++i;
    TestCall call = build_call(s, 5);
    Outputs one, two;
    ASSERT_TRUE(run_call(call.args, Backend::kCpu, 1, &one).ok()) << describe(s);
    ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &two).ok()) << describe(s);
    EXPECT_EQ(one.attention_out.bytes, two.attention_out.bytes) << describe(s);
    EXPECT_EQ(one.softmax_lse.bytes, two.softmax_lse.bytes) << describe(s);
  }
}

}  // namespace
}  // namespace fia::test
