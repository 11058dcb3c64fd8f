// fia::Options::float32_out and softmax_max (partial attention, docs/distributed.md): the parts of
// a call's keys, given one reference max per row, merge into the whole call with that max, P's
// rounding to 16 bits included (FIA-SPEC 17, 25.3); a reference below every score changes nothing;
// every error names its parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>

#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/run_helpers.hpp"
#include "support/split_keys.hpp"

namespace fia::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

Status run_partial(const FiaArgs& args, Backend backend, const TensorView& softmax_max, Outputs* out,
                   bool float32_out = true) {
  Options o;
  o.backend = backend;
  o.threads = 2;
  o.float32_out = float32_out;
  o.softmax_max = softmax_max;
  return fused_infer_attention_score(args, o, out);
}

/// A per-row reference at or above every row max: the whole call's LSE (m + ln l, l >= 1), plus
/// `above`; rows that see nothing (+inf) get -inf.
OwnedTensor reference_from_lse(const OwnedTensor& lse, float above) {
  OwnedTensor r(DType::F32, lse.shape);
  for (std::int64_t i = 0; i < lse.numel(); ++i) {
    const float v = lse.as<float>()[i];
    r.as<float>()[i] = v == kInf ? -kInf : v + above;
  }
  return r;
}

CallSpec ragged_gqa(const char* layout, DType dtype) {
  CallSpec s;
  s.layout = layout;
  s.dtype = dtype;
  s.batch = 3;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = 5;
  s.kv_seq = 37;
  s.qk_dim = 16;
  s.lse = true;
  s.value_range = 3.0f;  // scores spread over several units: P's rounding matters
  s.act_kv = std::vector<std::int64_t>{37, 29, 12};
  if (std::string(layout).rfind("TND", 0) == 0) s.act_q = std::vector<std::int64_t>{5, 3, 4};
  return s;
}

Outputs merged(const Outputs& a, const Outputs& b, const std::string& layout) {
  Outputs m;
  m.attention_out = OwnedTensor(a.attention_out.dtype, a.attention_out.shape);
  m.softmax_lse = OwnedTensor(DType::F32, a.softmax_lse.shape);
  EXPECT_TRUE(merge_attention_states(a.attention_out.view(), a.softmax_lse.view(), b.attention_out.view(),
                                     b.softmax_lse.view(), layout, m.attention_out.mutable_view(),
                                     m.softmax_lse.mutable_view())
                  .ok());
  return m;
}

double max_abs_diff(const OwnedTensor& x, const OwnedTensor& y) {
  const std::vector<double> a = to_doubles(x), b = to_doubles(y);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

TEST(PartialAttention, HalvesWithOneReferenceMaxMergeToTheWholeCall) {
  std::uint64_t seed = 40;
  for (const char* layout : {"BNSD", "BSH", "BSND", "TND"})
    for (DType dtype : {DType::F16, DType::BF16})
      for (Backend backend : {Backend::kReference, Backend::kCpu}) {
        const CallSpec s = ragged_gqa(layout, dtype);
        const TestCall whole = build_call(s, ++seed);
        const std::string what = describe(s) + (backend == Backend::kCpu ? " cpu" : " reference");
        Outputs own;
        ASSERT_TRUE(run_partial(whole.args, backend, {}, &own).ok()) << what;
        EXPECT_EQ(own.attention_out.dtype, DType::F32);
        const OwnedTensor ref = reference_from_lse(own.softmax_lse, 0.0f);
        Outputs w, a, b, a_own, b_own;
        ASSERT_TRUE(run_partial(whole.args, backend, ref.view(), &w).ok()) << what;
        std::deque<OwnedTensor> store;
        const Halves h = split_keys(whole.args, *s.act_kv, 20, store);
        ASSERT_TRUE(run_partial(h.a, backend, ref.view(), &a).ok()) << what;
        ASSERT_TRUE(run_partial(h.b, backend, ref.view(), &b).ok()) << what;
        ASSERT_TRUE(run_partial(h.a, backend, {}, &a_own).ok()) << what;
        ASSERT_TRUE(run_partial(h.b, backend, {}, &b_own).ok()) << what;
        const Outputs m = merged(a, b, s.layout), m_own = merged(a_own, b_own, s.layout);
        // The merge of the halves is the whole call with the same reference, to float32 rounding.
        EXPECT_LE(max_abs_diff(m.attention_out, w.attention_out), 4e-6) << what;
        const std::vector<double> lw = to_doubles(w.softmax_lse), lm = to_doubles(m.softmax_lse),
                                  lo = to_doubles(own.softmax_lse);
        for (std::size_t i = 0; i < lw.size(); ++i) {
          EXPECT_TRUE(lm[i] == lw[i] || std::fabs(lm[i] - lw[i]) <= 2e-6 * std::max(1.0, std::fabs(lw[i])))
              << what << " lse " << i;
          EXPECT_TRUE(lo[i] == lw[i] || std::fabs(lo[i] - lw[i]) <= 2e-6 * std::max(1.0, std::fabs(lw[i])))
              << what << " lse " << i;  // the reference moves E, not the LSE
        }
        // Halves that round P against their own max differ by far more on 16-bit P (TND's path
        // keeps P in float32, 25.3, so there the two agree).
        const double own_diff = max_abs_diff(m_own.attention_out, w.attention_out);
        if (std::string(layout) != "TND") EXPECT_GT(own_diff, 1e-4) << what;
        else EXPECT_LE(own_diff, 4e-6) << what;
      }
}

TEST(PartialAttention, ALearnableSinkGoesWithOneHalf) {
  // FIA-SPEC 16: the sink adds exp(sink - m) to the whole row's denominator, so one part carries
  // it; with the whole row's reference the merge is the whole call with the sink.
  for (Backend backend : {Backend::kReference, Backend::kCpu}) {
    CallSpec s = ragged_gqa("BNSD", DType::BF16);
    s.sink = true;
    const TestCall whole = build_call(s, 31);
    Outputs own, w, a, b;
    ASSERT_TRUE(run_partial(whole.args, backend, {}, &own).ok());
    const OwnedTensor ref = reference_from_lse(own.softmax_lse, 0.0f);
    ASSERT_TRUE(run_partial(whole.args, backend, ref.view(), &w).ok());
    std::deque<OwnedTensor> store;
    Halves h = split_keys(whole.args, *s.act_kv, 20, store);
    h.b.learnable_sink = TensorView{};
    ASSERT_TRUE(run_partial(h.a, backend, ref.view(), &a).ok());
    ASSERT_TRUE(run_partial(h.b, backend, ref.view(), &b).ok());
    const Outputs m = merged(a, b, s.layout);
    EXPECT_LE(max_abs_diff(m.attention_out, w.attention_out), 4e-6) << describe(s);
    EXPECT_GT(max_abs_diff(w.attention_out, own.attention_out), 0.0) << describe(s);  // the reference moved P
  }
}

TEST(PartialAttention, SplitGroupsTakeTheReferenceInEveryPhase) {
  // Chunks of 8 keys (every item a split group), stored or recomputed in phase B: the same
  // result as self-contained items up to float32 summation order, and far from the result
  // without the reference.
  for (DType dtype : {DType::F16, DType::BF16}) {
    CallSpec s = ragged_gqa("BSH", dtype);
    s.kv_seq = 300;
    s.act_kv = std::vector<std::int64_t>{300, 171, 9};
    const TestCall c = build_call(s, 21);
    Outputs own, whole;
    ASSERT_TRUE(run_partial(c.args, Backend::kCpu, {}, &own).ok());
    const OwnedTensor ref = reference_from_lse(own.softmax_lse, 0.25f);
    ASSERT_TRUE(run_partial(c.args, Backend::kCpu, ref.view(), &whole).ok());
    Options o;
    o.float32_out = true;
    o.softmax_max = ref.view();
    for (std::int64_t wave_budget : {std::int64_t{1} << 24, std::int64_t{64}}) {
      detail::PlanLimits limits;
      limits.chunk_cols = 8;
      limits.chunk_bytes = 0;
      limits.score_budget = 16;
      limits.wave_budget = wave_budget;
      detail::CpuPlan used;
      const Outputs split = run_with_limits(c.args, limits, 2, &used, o);
      EXPECT_TRUE(used.items.empty() && !used.splits.empty()) << describe(s);
      EXPECT_LE(max_abs_diff(split.attention_out, whole.attention_out), 4e-6) << describe(s) << " " << wave_budget;
      EXPECT_GT(max_abs_diff(split.attention_out, own.attention_out), 1e-4) << describe(s) << " " << wave_budget;
      const std::vector<double> a = to_doubles(split.softmax_lse), b = to_doubles(whole.softmax_lse);
      for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(a[i] == b[i] || std::fabs(a[i] - b[i]) <= 2e-6 * std::max(1.0, std::fabs(b[i]))) << i;
    }
  }
}

TEST(PartialAttention, AReferenceBelowEveryScoreChangesNothing) {
  for (DType dtype : {DType::F16, DType::BF16, DType::F32})
    for (Backend backend : {Backend::kReference, Backend::kCpu}) {
      const CallSpec s = ragged_gqa("BSND", dtype);
      const TestCall c = build_call(s, 3);
      Outputs plain, low, ninf;
      ASSERT_TRUE(run_partial(c.args, backend, {}, &plain, false).ok());
      EXPECT_EQ(plain.attention_out.dtype, dtype);
      OwnedTensor below = reference_from_lse(plain.softmax_lse, 0.0f);
      for (std::int64_t i = 0; i < below.numel(); ++i) below.as<float>()[i] = i % 2 ? -1e30f : -kInf;
      ASSERT_TRUE(run_partial(c.args, backend, below.view(), &low, false).ok());
      EXPECT_EQ(low.attention_out.bytes, plain.attention_out.bytes) << describe(s);
      EXPECT_EQ(low.softmax_lse.bytes, plain.softmax_lse.bytes) << describe(s);
    }
}

TEST(PartialAttention, Float32OutIsTheOutputBeforeItsRounding) {
  for (DType dtype : {DType::F16, DType::BF16}) {
    const CallSpec s = ragged_gqa("BNSD", dtype);
    const TestCall c = build_call(s, 9);
    Outputs narrow, wide;
    ASSERT_TRUE(run_partial(c.args, Backend::kCpu, {}, &narrow, false).ok());
    ASSERT_TRUE(run_partial(c.args, Backend::kCpu, {}, &wide).ok());
    ASSERT_EQ(wide.attention_out.shape, narrow.attention_out.shape);
    OwnedTensor rounded(dtype, wide.attention_out.shape);
    for (std::int64_t i = 0; i < rounded.numel(); ++i) set_value(rounded, i, wide.attention_out.as<float>()[i]);
    EXPECT_EQ(rounded.bytes, narrow.attention_out.bytes) << describe(s);
    EXPECT_EQ(wide.softmax_lse.bytes, narrow.softmax_lse.bytes) << describe(s);
  }
}

TEST(PartialAttention, AReferenceFarAboveTheRowMaxUnderflowsAsTheBackendsAgree) {
  // 200 above: every E underflows in float32 (the cpu backend recomputes those rows in float64)
  // and every P rounds to 0 in bf16: output 0 with the whole call's LSE. 1000 above: E
  // underflows in float64 too: the rows are empty (0, +inf), as parts that see nothing.
  const CallSpec s = ragged_gqa("BNSD", DType::BF16);
  const TestCall c = build_call(s, 5);
  Outputs own;
  ASSERT_TRUE(run_partial(c.args, Backend::kCpu, {}, &own).ok());
  for (float above : {200.0f, 1000.0f}) {
    const OwnedTensor ref = reference_from_lse(own.softmax_lse, above);
    for (Backend backend : {Backend::kReference, Backend::kCpu}) {
      Outputs o;
      ASSERT_TRUE(run_partial(c.args, backend, ref.view(), &o).ok());
      for (std::int64_t i = 0; i < o.attention_out.numel(); ++i)
        ASSERT_EQ(o.attention_out.as<float>()[i], 0.0f) << above << " element " << i;
      for (std::int64_t i = 0; i < o.softmax_lse.numel(); ++i) {
        const float got = o.softmax_lse.as<float>()[i], whole = own.softmax_lse.as<float>()[i];
        if (above > 500.0f || whole == kInf) EXPECT_EQ(got, kInf) << above << " row " << i;
        else EXPECT_NEAR(got, whole, 1e-5 * std::max(1.0f, std::fabs(whole))) << above << " row " << i;
      }
    }
  }
}

TEST(PartialAttention, ReferencesThatLeaveESubnormalMatchTheFloat64Backend) {
  // 80 to 110 above the LSE: E around float32's smallest normal (e^-87.3), then subnormal; the
  // cpu backend recomputes such rows in float64, so both backends agree (a sum of subnormal E
  // once overflowed 1 / l to inf).
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    const CallSpec s = ragged_gqa("BSH", dtype);
    const TestCall c = build_call(s, 17);
    Outputs own;
    ASSERT_TRUE(run_partial(c.args, Backend::kReference, {}, &own).ok());
    for (float above = 80.0f; above <= 110.0f; above += 1.5f) {
      const OwnedTensor ref = reference_from_lse(own.softmax_lse, above);
      Outputs cpu, exact;
      ASSERT_TRUE(run_partial(c.args, Backend::kCpu, ref.view(), &cpu).ok());
      ASSERT_TRUE(run_partial(c.args, Backend::kReference, ref.view(), &exact).ok());
      const std::vector<double> a = to_doubles(cpu.attention_out), b = to_doubles(exact.attention_out);
      for (std::size_t i = 0; i < a.size(); ++i)
        ASSERT_TRUE(std::isfinite(a[i]) && std::fabs(a[i] - b[i]) <= 1e-5 + 1e-5 * std::fabs(b[i]))
            << dtype_name(dtype) << " " << above << " element " << i << ": cpu " << a[i] << ", reference " << b[i];
      const std::vector<double> la = to_doubles(cpu.softmax_lse), lb = to_doubles(exact.softmax_lse);
      for (std::size_t i = 0; i < la.size(); ++i)
        EXPECT_TRUE(la[i] == lb[i] || std::fabs(la[i] - lb[i]) <= 2e-6 * std::max(1.0, std::fabs(lb[i])))
            << dtype_name(dtype) << " " << above << " row " << i;
    }
  }
}

TEST(PartialAttention, AnEmptyQueryTakesTheFloat32OutputDtypeOnly) {
  // FIA-SPEC 19: nothing of an empty query is validated, softmax_max included.
  TestCall c = build_call(ragged_gqa("BNSD", DType::BF16), 2);
  const OwnedTensor empty(DType::BF16, {3, 4, 0, 16});
  c.args.query = empty.view();
  const OwnedTensor junk(DType::F16, {7});
  Options o;
  o.float32_out = true;
  o.softmax_max = junk.view();
  Plan plan;
  ASSERT_TRUE(fia::plan(c.args, o, &plan).ok());
  EXPECT_EQ(plan.attention_out_dtype(), DType::F32);
  o.float32_out = false;
  ASSERT_TRUE(fia::plan(c.args, o, &plan).ok());
  EXPECT_EQ(plan.attention_out_dtype(), DType::BF16);
}

TEST(PartialAttention, AReusedPlanKeepsTheExtensions) {
  const CallSpec s = ragged_gqa("BSH", DType::F16);
  const TestCall c = build_call(s, 13);
  Outputs own;
  ASSERT_TRUE(run_partial(c.args, Backend::kCpu, {}, &own).ok());
  const OwnedTensor ref = reference_from_lse(own.softmax_lse, 1.5f);
  Outputs fused;
  ASSERT_TRUE(run_partial(c.args, Backend::kCpu, ref.view(), &fused).ok());
  Options o;
  o.backend = Backend::kCpu;
  o.threads = 2;
  o.float32_out = true;
  o.softmax_max = ref.view();
  Plan plan;
  ASSERT_TRUE(fia::plan(c.args, o, &plan).ok());
  EXPECT_EQ(plan.attention_out_dtype(), DType::F32);
  OwnedTensor out(DType::F32, plan.attention_out_shape()), lse(DType::F32, plan.softmax_lse_shape());
  std::vector<std::byte> ws(plan.workspace_bytes());
  ASSERT_TRUE(run(plan, c.args, out.mutable_view(), lse.mutable_view(), ws.data(), ws.size()).ok());
  EXPECT_EQ(out.bytes, fused.attention_out.bytes);
  EXPECT_EQ(lse.bytes, fused.softmax_lse.bytes);
  EXPECT_NE(out.bytes, own.attention_out.bytes);  // the reference 1.5 above moved P's rounding
}

TEST(PartialAttention, EveryErrorNamesItsParameter) {
  CallSpec s = ragged_gqa("BNSD", DType::F16);
  TestCall c = build_call(s, 1);
  Outputs own;
  ASSERT_TRUE(run_partial(c.args, Backend::kCpu, {}, &own).ok());
  const OwnedTensor good = reference_from_lse(own.softmax_lse, 0.0f);
  auto expect = [](Status st, StatusCode code, const char* param, const char* words) {
    EXPECT_EQ(st.code, code) << st.to_string();
    EXPECT_EQ(st.parameter, param) << st.to_string();
    EXPECT_NE(st.message.find(words), std::string::npos) << st.to_string();
  };
  const StatusCode inv = StatusCode::kInvalidArgument, unsup = StatusCode::kUnsupported;
  Outputs o;
  FiaArgs no_lse = c.args;
  no_lse.softmax_lse_flag = false;
  expect(run_partial(no_lse, Backend::kCpu, good.view(), &o), inv, "softmax_max", "softmax_lse_flag");
  OwnedTensor half(DType::F16, good.shape);
  expect(run_partial(c.args, Backend::kCpu, half.view(), &o), inv, "softmax_max", "F32");
  OwnedTensor shape(DType::F32, {3, 4, 5});
  expect(run_partial(c.args, Backend::kCpu, shape.view(), &o), inv, "softmax_max", "shape");
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), kInf}) {
    OwnedTensor t = good;
    t.as<float>()[7] = bad;
    expect(run_partial(c.args, Backend::kReference, t.view(), &o), inv, "softmax_max", "element 7");
  }
  // Paths whose P does not come from E against the row max (25.3).
  CallSpec tnd = ragged_gqa("TND", DType::F16);
  tnd.inner_precise = 1;
  const TestCall t = build_call(tnd, 2);
  Outputs tnd_own;
  ASSERT_TRUE(run_partial(t.args, Backend::kCpu, {}, &tnd_own).ok());
  expect(run_partial(t.args, Backend::kCpu, reference_from_lse(tnd_own.softmax_lse, 0.0f).view(), &o), unsup,
         "softmax_max", "25.3");
  FiaArgs ifa = c.args;
  ifa.entry_point = EntryPoint::kIncreFlashAttention;
  expect(run_partial(ifa, Backend::kCpu, good.view(), &o), unsup, "softmax_max", "IncreFlashAttention");
  // Values written after plan(): run() checks them again.
  OwnedTensor later = good;
  Options opts;
  opts.backend = Backend::kCpu;
  opts.softmax_max = later.view();
  Plan plan;
  ASSERT_TRUE(fia::plan(c.args, opts, &plan).ok());
  later.as<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  OwnedTensor out(plan.attention_out_dtype(), plan.attention_out_shape()), lse(DType::F32, plan.softmax_lse_shape());
  std::vector<std::byte> ws(plan.workspace_bytes());
  expect(run(plan, out.mutable_view(), lse.mutable_view(), ws.data(), ws.size()), inv, "softmax_max", "element 3");
  FiaArgs pq = c.args;
  const OwnedTensor scale2 = tensor_of(DType::F32, {1}, {2.0f});
  pq.quant_scale2 = scale2.view();
  ASSERT_TRUE(run_partial(pq, Backend::kCpu, {}, &o, false).ok());
  expect(run_partial(pq, Backend::kCpu, {}, &o), inv, "float32_out", "quant_scale2");
}

}  // namespace
}  // namespace fia::test
