// Robustness (FIA-SPEC 25.1 #24-25, docs/numerics.md "Overflow"): excluded keys contribute nothing
// whatever their K, V and pse bytes hold; a row whose every score is -inf is fully masked; a NaN
// in a visible input makes its rows NaN; finite inputs of any magnitude never give NaN, and both
// backends agree on them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cpu/isa.hpp"
#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

void poke(const void* base, DType t, std::int64_t offset, float v) { set_stored_value(base, t, offset, v); }

/// The poison written into excluded data: NaN, +-inf and huge values in turn.
float poison(std::int64_t k) {
  switch (k % 4) {
    case 0: return kNan;
    case 1: return kInf;
    case 2: return -kInf;
    default: return 6.0e4f;
  }
}

bool allowed(const detail::Problem& p, std::int64_t b, std::int64_t i, std::int64_t j) {
  return j >= i + p.band_lo[b] && j <= i + p.band_hi[b] && !(p.has_mask && p.masked(b, i, j));
}

/// Poisons the K and V rows of every key no query row of its batch may see, pse at every excluded
/// (row, key) and the mask bytes outside the band; returns how many values were poisoned.
std::int64_t poison_excluded(const FiaArgs& args) {
  detail::Problem p;
  EXPECT_TRUE(detail::build_problem(args, false, &p).ok());
  std::int64_t k = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    for (std::int64_t j = p.prefix_len; j < p.kv_len(b); ++j) {  // the shared prefix serves every batch
      bool seen = false;
      for (std::int64_t i = 0; i < p.act_q[b] && !seen; ++i) seen = allowed(p, b, i, j);
      if (seen) continue;
      for (std::int64_t h = 0; h < p.num_kv_heads; ++h) {
        const detail::KvRun run = p.locate(b, h, j);
        for (std::int64_t d = 0; d < p.qk_dim; ++d) poke(run.key, p.kv_dtype, d, poison(k++));
        for (std::int64_t d = 0; d < p.v_dim; ++d) poke(run.value, p.kv_dtype, d, poison(k++));
      }
    }
    if (p.has_mask && p.mask.batch_stride != 0 && p.mask.row_stride != 0) {  // a per-batch, per-row mask
      auto* m = static_cast<std::uint8_t*>(const_cast<void*>(p.mask.base));
      for (std::int64_t i = 0; i < p.act_q[b]; ++i)
        for (std::int64_t j = 0; j < p.kv_len(b); ++j)
          if (j < i + p.band_lo[b] || j > i + p.band_hi[b])  // outside the band the mask is not read
            m[b * p.mask.batch_stride + (p.q_start[b] + i) * p.mask.row_stride +
              (j + p.kv_col_offset[b]) * p.mask.col_stride] = static_cast<std::uint8_t>(k++ % 3);
    }
    if (!p.has_pse || p.pse.batch_stride == 0) continue;  // a broadcast pse serves every batch
    for (std::int64_t n = 0; n < p.num_heads; ++n)
      for (std::int64_t i = 0; i < p.act_q[b]; ++i)
        for (std::int64_t j = 0; j < p.kv_len(b); ++j) {
          if (allowed(p, b, i, j)) continue;
          const detail::BiasIndex& x = p.pse;
          poke(x.base, x.dtype,
               b * x.batch_stride + n * x.head_stride + (p.q_start[b] + i) * x.row_stride +
                   (j + p.kv_col_offset[b]) * x.col_stride,
               poison(k++));
        }
  }
  return k;
}

/// Both backends give the same bytes before and after poisoning the excluded data of a call.
void expect_poison_changes_nothing(const CallSpec& spec, std::uint64_t seed,
                                   const std::function<void(FiaArgs&)>& edit = {}) {
  TestCall call = build_call(spec, seed);
  if (edit) edit(call.args);
  Outputs clean[2];
  const Backend backends[2] = {Backend::kCpu, Backend::kReference};
  for (int k = 0; k < 2; ++k) ASSERT_TRUE(run_call(call.args, backends[k], 2, &clean[k]).ok()) << describe(spec);
  const std::int64_t poisoned_values = poison_excluded(call.args);
  if (edit) {
    EXPECT_GT(poisoned_values, 0);
  }
  if (poisoned_values == 0) return;
  for (int k = 0; k < 2; ++k) {
    Outputs poisoned;
    ASSERT_TRUE(run_call(call.args, backends[k], 2, &poisoned).ok());
    EXPECT_EQ(poisoned.attention_out.bytes, clean[k].attention_out.bytes)
        << (k ? "reference" : "cpu") << ": excluded data leaked\n" << describe(spec);
    EXPECT_EQ(poisoned.softmax_lse.bytes, clean[k].softmax_lse.bytes) << describe(spec);
  }
}

// The reported leaks: decode with a (1, S) mask, prefill with sparse_mode 1, a NaN in a masked V row.
TEST(Robustness, MaskedValueRowsDoNotLeakIntoDecodeOrPrefill) {
  for (const std::int64_t q_seq : {1, 40}) {
    CallSpec s;
    s.layout = "BNSD";
    s.dtype = DType::BF16;
    s.batch = 2;
    s.num_heads = 4;
    s.num_kv_heads = 2;
    s.q_seq = q_seq;
    s.kv_seq = 300;
    s.qk_dim = 64;
    s.mask = MaskKind::kFull;
    s.mask_rank = q_seq == 1 ? 2 : 4;
    s.sparse_mode = q_seq == 1 ? 0 : 1;
    s.mask_density = 0.3;
    s.lse = true;
    expect_poison_changes_nothing(s, 7 + q_seq, [](FiaArgs& args) {
      // Every 7th key masked for every row, so that its K and V rows may hold anything.
      const TensorView& m = args.atten_mask;
      auto* bytes = static_cast<std::uint8_t*>(const_cast<void*>(m.data));
      for (std::int64_t e = 0; e < m.numel(); ++e)
        if (e % m.shape.back() % 7 == 3) bytes[e] = 1;
    });
  }
}

// Decode on every ISA: keys 100-139 and every 37th key below 100 masked, so that the P·V blocks
// (cpu/decode-inl.h, run_pv: 16 tokens for these four query rows per KV head, on every ISA) come
// both with every token weighted and with some tokens excluded, and the excluded tokens' V rows
// hold NaN, infinities and huge values.
TEST(Robustness, MaskedValueRowsDoNotLeakIntoDecodeOnAnyIsa) {
  for (const std::string& isa : detail::available_isas()) {
    ASSERT_TRUE(detail::force_isa(isa)) << isa;
    for (const DType dtype : {DType::F16, DType::BF16}) {
      CallSpec s;
      s.layout = "BNSD";
      s.dtype = dtype;
      s.num_heads = 8;
      s.num_kv_heads = 2;
      s.q_seq = 1;
      s.kv_seq = 300;
      s.qk_dim = 128;
      s.mask = MaskKind::kFull;
      s.mask_rank = 2;
      s.mask_density = 0.0;
      s.lse = true;
      SCOPED_TRACE(isa);
      expect_poison_changes_nothing(s, 11, [](FiaArgs& args) {
        const TensorView& m = args.atten_mask;
        auto* bytes = static_cast<std::uint8_t*>(const_cast<void*>(m.data));
        for (std::int64_t e = 0; e < m.numel(); ++e) {
          const std::int64_t key = e % m.shape.back();
          if ((key >= 100 && key < 140) || (key < 100 && key % 37 == 5)) bytes[e] = 1;
        }
      });
    }
  }
  detail::force_isa("");
}

class ExcludedDataSweep : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(ExcludedDataSweep, PoisonChangesNoOutputBit) {
  const std::uint64_t seed = GetParam();
  expect_poison_changes_nothing(random_spec(seed), seed);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ExcludedDataSweep, ::testing::Range<std::uint64_t>(0, 120));

/// A BNSD fp16 call with pse and LSE from `seed`: one batch, 2 query heads over `kv_heads` KV heads
/// (0: as many), `q_seq` query rows, 40 keys.
TestCall pse_call(std::int64_t q_seq, std::int64_t kv_heads, std::uint64_t seed) {
  CallSpec s;
  s.layout = "BNSD";
  s.dtype = DType::F16;
  s.batch = 1;
  s.num_heads = 2;
  s.num_kv_heads = kv_heads;
  s.q_seq = q_seq;
  s.kv_seq = 40;
  s.pse = true;
  s.lse = true;
  return build_call(s, seed);
}

/// A prefill call with pse whose every entry of query row `row` of head `head` is `value`.
TestCall pse_row_call(float value, std::int64_t row, std::int64_t head) {
  TestCall call = pse_call(4, 0, 3);
  const TensorView& pse = call.args.pse_shift;
  for (std::int64_t j = 0; j < pse.shape[3]; ++j)
    poke(pse.data, pse.dtype, ((0 * pse.shape[1] + head) * pse.shape[2] + row) * pse.shape[3] + j, value);
  return call;
}

TEST(Robustness, PseRowOfMinusInfIsAFullyMaskedRow) {
  TestCall call = pse_row_call(-kInf, 2, 1);
  for (Backend backend : {Backend::kCpu, Backend::kReference}) {
    Outputs out;
    ASSERT_TRUE(run_call(call.args, backend, 2, &out).ok());
    const std::vector<double> o = to_doubles(out.attention_out), lse = to_doubles(out.softmax_lse);
    const std::int64_t vd = out.attention_out.shape[3];
    for (std::int64_t d = 0; d < vd; ++d) EXPECT_EQ(o[(1 * 4 + 2) * vd + d], 0.0);  // (b 0, head 1, row 2)
    EXPECT_EQ(lse[1 * 4 + 2], std::numeric_limits<double>::infinity());
    for (std::int64_t r = 0; r < 8; ++r)
      if (r != 6) {
        EXPECT_TRUE(std::isfinite(lse[r])) << r;
      }
  }
}

TEST(Robustness, PseOfMinusInfExcludesItsKeyLikeAMask) {
  TestCall call = pse_row_call(0.0f, 0, 0);
  const TensorView& pse = call.args.pse_shift;
  for (std::int64_t j = 0; j < pse.shape[3]; j += 3) poke(pse.data, pse.dtype, j, -kInf);  // row 0, head 0
  Outputs cpu, ref;
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &cpu).ok());
  ASSERT_TRUE(run_call(call.args, Backend::kReference, 1, &ref).ok());
  detail::ReferenceResult exact;
  ASSERT_TRUE(reference_exact(call.args, &exact).ok());
  EXPECT_TRUE(criterion_a(cpu.attention_out, exact.out).pass);
  EXPECT_TRUE(lse_match(cpu.softmax_lse, exact.lse).pass);
  for (double x : to_doubles(cpu.attention_out)) EXPECT_TRUE(std::isfinite(x));
}

// A NaN in a visible query, key or pse element makes its rows NaN, output and LSE, on both
// backends (the cpu backend on every instruction set: fp16 is widened without conversion
// instructions below AVX2), in decode and prefill (16 rows: the in-place wide kernels where a
// target has them; 32: the tiled wide kernels' score blocks): never the 0 / +inf of a fully
// masked row, which a merge would drop as an empty part (docs/numerics.md). The other rows stay
// finite.
TEST(Robustness, NanInAVisibleInputMakesItsRowsNan) {
  for (const std::int64_t q_seq : {1, 4, 16, 32}) {
    for (const char* where : {"query", "key", "pse_shift"}) {
      TestCall call = pse_call(q_seq, 2, 5);
      const FiaArgs& a = call.args;
      const std::int64_t D = a.query.shape[3], S = q_seq;
      std::vector<bool> nan_row(2 * S, false);  // (head, row)
      if (std::string(where) == "query") {
        poke(a.query.data, a.query.dtype, (1 * S + S - 1) * D + 3, kNan);  // head 1, last row
        nan_row[1 * S + S - 1] = true;
      } else if (std::string(where) == "key") {
        poke(a.key[0].data, a.key[0].dtype, (1 * 40 + 7) * D + 2, kNan);  // KV head 1 (query head 1), key 7
        for (std::int64_t i = 0; i < S; ++i) nan_row[1 * S + i] = true;
      } else {
        poke(a.pse_shift.data, a.pse_shift.dtype, 5, kNan);  // head 0, row 0, key 5
        nan_row[0] = true;
      }
      std::vector<std::string> runs = detail::available_isas();  // the cpu backend on each, then the reference
      runs.push_back("reference");
      for (const std::string& run : runs) {
        const Backend backend = run == "reference" ? Backend::kReference : Backend::kCpu;
        if (backend == Backend::kCpu) {
          ASSERT_TRUE(detail::force_isa(run));
        }
        Outputs out;
        ASSERT_TRUE(run_call(a, backend, 2, &out).ok());
        detail::force_isa("");
        const std::vector<double> o = to_doubles(out.attention_out), lse = to_doubles(out.softmax_lse);
        const std::int64_t vd = out.attention_out.shape[3];
        for (std::int64_t r = 0; r < 2 * S; ++r) {
          const std::string what = std::string(where) + " q_seq " + std::to_string(q_seq) + " row " + std::to_string(r) + " " + run;
          EXPECT_EQ(std::isnan(lse[r]), nan_row[r]) << what << ": lse " << lse[r];
          for (std::int64_t d = 0; d < vd; ++d)
            EXPECT_EQ(std::isnan(o[r * vd + d]), nan_row[r]) << what << ": out[" << d << "] " << o[r * vd + d];
        }
      }
    }
  }
}

// A pse of -inf excludes its key whatever the key holds: a NaN K row behind it changes no bit, on
// both backends (25.1 #24-25).
TEST(Robustness, PseOfMinusInfExcludesAKeyHoldingNan) {
  for (const std::int64_t q_seq : {1, 4}) {
    TestCall call = pse_call(q_seq, 1, 5);
    const FiaArgs& a = call.args;
    const TensorView& pse = a.pse_shift;
    for (std::int64_t r = 0; r < 2 * q_seq; ++r) poke(pse.data, pse.dtype, r * pse.shape[3] + 11, -kInf);  // key 11
    Outputs clean[2];
    const Backend backends[2] = {Backend::kCpu, Backend::kReference};
    for (int k = 0; k < 2; ++k) ASSERT_TRUE(run_call(a, backends[k], 2, &clean[k]).ok());
    const std::int64_t D = a.key[0].shape[3];
    for (std::int64_t d = 0; d < D; ++d) poke(a.key[0].data, a.key[0].dtype, 11 * D + d, kNan);
    for (int k = 0; k < 2; ++k) {
      Outputs poisoned;
      ASSERT_TRUE(run_call(a, backends[k], 2, &poisoned).ok());
      EXPECT_EQ(poisoned.attention_out.bytes, clean[k].attention_out.bytes) << (k ? "reference" : "cpu") << " " << q_seq;
      EXPECT_EQ(poisoned.softmax_lse.bytes, clean[k].softmax_lse.bytes) << (k ? "reference" : "cpu") << " " << q_seq;
      for (double x : to_doubles(poisoned.softmax_lse)) EXPECT_TRUE(std::isfinite(x));
    }
  }
}

/// Both backends: no NaN, outputs within criterion A of the exact answer, and the LSE within its
/// tolerance (`strict_lse`) or at least +inf exactly where the exact LSE is (f32 dot products of
/// huge values cancel, so their scores carry f32 rounding far above the LSE tolerance).
void expect_finite_and_agreeing(const FiaArgs& args, const std::string& what, bool strict_lse = true) {
  detail::ReferenceResult exact;
  ASSERT_TRUE(reference_exact(args, &exact).ok()) << what;
  for (Backend backend : {Backend::kCpu, Backend::kReference}) {
    Outputs out;
    ASSERT_TRUE(run_call(args, backend, 2, &out).ok()) << what;
    for (double x : to_doubles(out.attention_out)) ASSERT_FALSE(std::isnan(x)) << what;
    const Verdict v = criterion_a(out.attention_out, exact.out);
    EXPECT_TRUE(v.pass) << what << (backend == Backend::kCpu ? " cpu: " : " reference: ") << v.detail;
    std::vector<double> expected_lse;  // as stored: saturated at +-FLT_MAX
    for (double x : exact.lse) expected_lse.push_back(detail::lse_as_f32(x));
    if (!expected_lse.empty() && strict_lse) {
      const Verdict l = lse_match(out.softmax_lse, expected_lse);
      EXPECT_TRUE(l.pass) << what << ": " << l.detail;
    }
    const std::vector<double> lse = to_doubles(out.softmax_lse);
    for (std::size_t r = 0; r < expected_lse.size(); ++r) {
      EXPECT_FALSE(std::isnan(lse[r])) << what;
      EXPECT_EQ(std::isinf(lse[r]), std::isinf(expected_lse[r])) << what << " row " << r;
    }
  }
}

CallSpec extreme_spec(std::int64_t q_seq) {
  CallSpec s;
  s.layout = "BSND";
  s.dtype = DType::BF16;
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = q_seq;
  s.kv_seq = 70;
  s.qk_dim = 32;
  s.lse = true;
  return s;
}

TEST(Robustness, Bf16ValuesNearTheFloatMaximumStayFinite) {
  for (const std::int64_t q_seq : {1, 20}) {
    TestCall call = build_call(extreme_spec(q_seq), 11);
    std::int64_t e = 0;  // +-1e38 .. +-3.3e38
    for (const TensorView* t : {&call.args.query, &call.args.key[0], &call.args.value[0]})
      for (std::int64_t x = 0; x < t->numel(); ++x, ++e)
        poke(t->data, t->dtype, x, (e % 3 == 1 ? -1.0f : 1.0f) * (1.0e38f + static_cast<float>(e % 24) * 1.0e37f));
    expect_finite_and_agreeing(call.args, "bf16 values near 3.4e38, Q_S " + std::to_string(q_seq));
  }
}

TEST(Robustness, AHugeScaleStaysFinite) {
  for (const std::int64_t q_seq : {1, 20}) {
    CallSpec s = extreme_spec(q_seq);
    s.scale = 1e38;
    TestCall call = build_call(s, 12);
    expect_finite_and_agreeing(call.args, "scale 1e38, Q_S " + std::to_string(q_seq));
  }
}

TEST(Robustness, OverflowingScoresAreNotAFullyMaskedRow) {
  for (const std::int64_t q_seq : {1, 20}) {
    CallSpec s = extreme_spec(q_seq);
    TestCall call = build_call(s, 13);
    // q = +-1e20, k = 1e20: every score overflows float32 (about +-6e40 / sqrt(32)).
    const TensorView& q = call.args.query;
    for (std::int64_t e = 0; e < q.numel(); ++e) poke(q.data, q.dtype, e, e % 7 == 3 ? -1e20f : 1e20f);
    const TensorView& k = call.args.key[0];
    for (std::int64_t e = 0; e < k.numel(); ++e) poke(k.data, k.dtype, e, 1e20f);
    expect_finite_and_agreeing(call.args, "q = +-1e20, k = 1e20, Q_S " + std::to_string(q_seq));
    Outputs out;
    ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &out).ok());
    for (double x : to_doubles(out.softmax_lse)) EXPECT_TRUE(std::isfinite(x));
  }
}

// Random calls at magnitudes where f32 scores, sums or P·V overflow: never NaN, and the backends
// agree (rows whose f32 intermediates overflow are recomputed in float64).
class ExtremeMagnitudeSweep : public ::testing::TestWithParam<std::uint64_t> {};

TEST_P(ExtremeMagnitudeSweep, FiniteInputsNeverGiveNan) {
  const std::uint64_t seed = GetParam();
  CallSpec spec = random_spec(seed);
  spec.value_range = spec.dtype == DType::F16 ? 6.0e4f : (seed % 2 ? 1.0e18f : 1.0e37f);
  TestCall call = build_call(spec, seed);
  expect_finite_and_agreeing(call.args, describe(spec), false);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ExtremeMagnitudeSweep, ::testing::Range<std::uint64_t>(0, 300));

}  // namespace
}  // namespace fia::test
