// fia::merge_attention_states: two fia calls over disjoint key ranges, merged, give the call over
// their union (FIA-SPEC 17); empty parts are passed through bit for bit; every error is named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <numeric>

#include "args/layout.hpp"
#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/run_helpers.hpp"
#include "support/split_keys.hpp"

namespace fia::test {
namespace {

using detail::Layout;

constexpr float kInf = std::numeric_limits<float>::infinity();

/// Index of the LSE row of each element of a row-major output in layout `out`, with N heads.
std::vector<std::int64_t> lse_rows(Layout out, const std::vector<std::int64_t>& shape, std::int64_t heads) {
  const detail::AxisPos ap = detail::axis_positions(out);
  std::int64_t total = 1;
  for (auto d : shape) total *= d;
  std::vector<std::int64_t> rows(static_cast<std::size_t>(total));
  const std::int64_t S = shape[static_cast<std::size_t>(ap.s)];
  for (std::int64_t i = 0; i < total; ++i) {
    std::vector<std::int64_t> idx(shape.size());
    for (std::int64_t r = i, k = static_cast<std::int64_t>(shape.size()); k-- > 0;) {
      idx[static_cast<std::size_t>(k)] = r % shape[static_cast<std::size_t>(k)];
      r /= shape[static_cast<std::size_t>(k)];
    }
    const std::int64_t b = ap.b >= 0 ? idx[static_cast<std::size_t>(ap.b)] : 0;
    const std::int64_t s = idx[static_cast<std::size_t>(ap.s)];
    const std::int64_t n = out == Layout::kBSH ? idx[2] / (shape[2] / heads) : idx[static_cast<std::size_t>(ap.n)];
    rows[static_cast<std::size_t>(i)] = detail::is_token_layout(out) ? s * heads + n : (b * heads + n) * S + s;
  }
  return rows;
}

std::vector<std::uint16_t> elem16(const OwnedTensor& t) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(t.numel()));
  std::memcpy(v.data(), t.bytes.data(), v.size() * 2);
  return v;
}

Status merge(const Outputs& a, const Outputs& b, const std::string& layout, Outputs* m) {
  m->attention_out = OwnedTensor(a.attention_out.dtype, a.attention_out.shape);
  m->softmax_lse = OwnedTensor(DType::F32, a.softmax_lse.shape);
  return merge_attention_states(a.attention_out.view(), a.softmax_lse.view(), b.attention_out.view(),
                                b.softmax_lse.view(), layout, m->attention_out.mutable_view(),
                                m->softmax_lse.mutable_view());
}

/// Splits `spec`'s call at key k, runs both halves on `backend`, merges, and checks the merge
/// against the exact float64 answer of the whole call; rows with an empty half must be the other
/// half bit for bit. Returns how many rows had an empty half.
std::int64_t check_split(const CallSpec& spec, std::int64_t k, std::uint64_t seed, const TensorView* mask = nullptr,
                         Backend backend = Backend::kReference) {
  TestCall whole = build_call(spec, seed);
  if (mask) whole.args.atten_mask = *mask;
  detail::LayoutPair lp;
  EXPECT_TRUE(detail::parse_layout(spec.layout, &lp));
  std::vector<std::int64_t> act_kv = spec.act_kv.value_or(std::vector<std::int64_t>(spec.batch, spec.kv_seq));
  std::deque<OwnedTensor> store;
  const Halves h = split_keys(whole.args, act_kv, k, store);
  Outputs oa, ob, m;
  Status st = run_call(h.a, backend, 1, &oa);
  EXPECT_TRUE(st.ok()) << st.to_string() << " " << describe(spec);
  st = run_call(h.b, backend, 1, &ob);
  EXPECT_TRUE(st.ok()) << st.to_string() << " " << describe(spec);
  if (!st.ok()) return -1;
  st = merge(oa, ob, spec.layout, &m);
  EXPECT_TRUE(st.ok()) << st.to_string();
  detail::ReferenceResult exact;
  EXPECT_TRUE(reference_exact(whole.args, &exact).ok());

  // Values are within [-1, 1]: each half and the merge round once (half an ulp each), and the
  // halves round their softmax numerators against their own row max (FIA-SPEC 5 step 7).
  // The cpu backend (f32 accumulation) may add an ulp or so to each half.
  const bool cpu = backend == Backend::kCpu;
  const double eps = spec.dtype == DType::F16    ? 1.0 / 1024
                     : spec.dtype == DType::BF16 ? 1.0 / 128
                                                 : (cpu ? 1e-5 : 1.5e-6);
  const double tol = (cpu ? 3 : 2) * eps;
  const std::vector<double> got = to_doubles(m.attention_out);
  const std::vector<double> lse = to_doubles(m.softmax_lse);
  EXPECT_EQ(got.size(), exact.out.size());
  EXPECT_GT(got.size(), 0u);
  EXPECT_EQ(lse.size(), exact.lse.size());
  int bad = 0;
  for (std::size_t i = 0; i < got.size() && bad < 5; ++i)
    if (!(std::fabs(got[i] - exact.out[i]) <= tol)) {
      ADD_FAILURE() << describe(spec) << " out[" << i << "] = " << got[i] << ", exact " << exact.out[i];
      ++bad;
    }
  for (std::size_t i = 0; i < lse.size() && bad < 5; ++i)
    if (!(lse[i] == exact.lse[i] ||
          std::fabs(lse[i] - exact.lse[i]) <= (cpu ? 1e-5 : 2e-6) * std::max(1.0, std::fabs(exact.lse[i])))) {
      ADD_FAILURE() << describe(spec) << " lse[" << i << "] = " << lse[i] << ", exact " << exact.lse[i];
      ++bad;
    }
  // Rows with an empty half: the other half, bit for bit.
  const auto* la = oa.softmax_lse.as<float>();
  const auto* lb = ob.softmax_lse.as<float>();
  const auto* lm = m.softmax_lse.as<float>();
  std::int64_t empty_rows = 0;
  std::vector<const Outputs*> source(lse.size(), nullptr);
  for (std::size_t r = 0; r < lse.size(); ++r) {
    if (lb[r] == kInf) source[r] = &oa;
    else if (la[r] == kInf) source[r] = &ob;
    if (!source[r]) continue;
    ++empty_rows;
    const float want = source[r]->softmax_lse.as<float>()[r];
    EXPECT_EQ(std::memcmp(&lm[r], &want, 4), 0) << describe(spec) << " row " << r;
  }
  const std::int64_t heads = oa.softmax_lse.shape[1];
  const auto rows = lse_rows(lp.out, m.attention_out.shape, heads);
  const std::size_t es = dtype_size(spec.dtype);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Outputs* src = source[static_cast<std::size_t>(rows[i])];
    if (src) {
      EXPECT_EQ(std::memcmp(m.attention_out.bytes.data() + i * es, src->attention_out.bytes.data() + i * es, es), 0)
          << describe(spec) << " element " << i;
    }
  }
  return empty_rows;
}

TEST(MergeStates, TwoHalvesEqualTheWholeCallInEveryLayoutDtypeAndBackend) {
  std::uint64_t seed = 0;
  for (const char* layout : {"BNSD", "BSH", "BSND", "BNSD_BSND", "TND", "TND_NTD"})
    for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
      CallSpec s;
      s.layout = layout;
      s.dtype = dtype;
      s.batch = 3;
      s.num_heads = 4;
      s.num_kv_heads = 2;  // GQA
      s.q_seq = 5;
      s.kv_seq = 37;
      s.qk_dim = 16;
      s.lse = true;
      // Ragged: batch 2's keys all fall in the first half (k = 20), so its second half is empty.
      s.act_kv = std::vector<std::int64_t>{37, 29, 12};
      const bool token = std::string(layout).rfind("TND", 0) == 0;
      if (token) s.act_q = std::vector<std::int64_t>{5, 3, 4};
      const std::int64_t rows_b2 = token ? 4 * 4 : 4 * 5;
      for (Backend backend : {Backend::kReference, Backend::kCpu})
        EXPECT_EQ(check_split(s, 20, ++seed, nullptr, backend), rows_b2) << layout << " " << dtype_name(dtype);
    }
}

TEST(MergeStates, CausalHalvesLeaveEarlyRowsWithAnEmptySecondHalf) {
  // A causal (Q_S, KV_S) mask, split at key 6: query rows 0..5 see no key of the second half.
  const std::int64_t S = 16;
  OwnedTensor mask(DType::Bool, {S, S});
  for (std::int64_t i = 0; i < S; ++i)
    for (std::int64_t j = 0; j < S; ++j) mask.bytes[static_cast<std::size_t>(i * S + j)] = std::byte{j > i};
  const TensorView mv = mask.view();
  for (DType dtype : {DType::F16, DType::BF16}) {
    CallSpec s;
    s.layout = "BNSD";
    s.dtype = dtype;
    s.batch = 2;
    s.num_heads = 2;
    s.q_seq = S;
    s.kv_seq = S;
    s.lse = true;
    for (Backend backend : {Backend::kReference, Backend::kCpu})
      EXPECT_EQ(check_split(s, 6, 7, &mv, backend), 2 * 2 * 6);
  }
}

TEST(MergeStates, KnownValuesAndSpecialLses) {
  // One head, one position, D = 2 per row; F32 so the formula's values are exact.
  const float ln3 = std::log(3.0f);
  OwnedTensor a = tensor_of(DType::F32, {1, 1, 5, 2}, {1, 2, 1, 2, 7, 8, 1, 2, 1, 2});
  OwnedTensor b = tensor_of(DType::F32, {1, 1, 5, 2}, {5, 6, 5, 6, 9, 10, 5, 6, -3, 4});
  const float ninf = -kInf, nan = std::numeric_limits<float>::quiet_NaN();
  OwnedTensor lse_a = tensor_of(DType::F32, {1, 1, 5, 1}, {0, kInf, ninf, nan, ninf});
  OwnedTensor lse_b = tensor_of(DType::F32, {1, 1, 5, 1}, {ln3, 4, ninf, 1, 2});
  OwnedTensor out(DType::F32, {1, 1, 5, 2}), lse(DType::F32, {1, 1, 5, 1});
  ASSERT_TRUE(merge_attention_states(a.view(), lse_a.view(), b.view(), lse_b.view(), "BNSD", out.mutable_view(),
                                     lse.mutable_view()).ok());
  const float* o = out.as<float>();
  const float* l = lse.as<float>();
  EXPECT_NEAR(o[0], 4.0f, 1e-6);  // 1/4 * 1 + 3/4 * 5
  EXPECT_NEAR(o[1], 5.0f, 1e-6);
  EXPECT_NEAR(l[0], std::log(4.0f), 1e-6);
  EXPECT_EQ(o[2], 5.0f);  // a empty (+inf): b
  EXPECT_EQ(o[3], 6.0f);
  EXPECT_EQ(l[1], 4.0f);
  EXPECT_EQ(o[4], 8.0f);  // both -inf: the mean, LSE -inf
  EXPECT_EQ(o[5], 9.0f);
  EXPECT_EQ(l[2], ninf);
  EXPECT_TRUE(std::isnan(o[6]) && std::isnan(o[7]) && std::isnan(l[3]));  // NaN propagates
  EXPECT_EQ(o[8], -3.0f);  // a at -inf weighs 0
  EXPECT_EQ(o[9], 4.0f);
  EXPECT_EQ(l[4], 2.0f);
}

TEST(MergeStates, EmptyPartsAreCopiedBitForBit) {
  // F16 values a rounding of `x * 1.0` could not change, but a NaN payload and -0 could.
  OwnedTensor a(DType::F16, {2, 1, 3}), b(DType::F16, {2, 1, 3});  // TND: T = 2, N = 1, D = 3
  const std::uint16_t av[] = {0x7E01, 0x8000, 0x3C01, 0x1234, 0x0001, 0xFBFF};
  const std::uint16_t bv[] = {0x4000, 0x4100, 0x4200, 0x8000, 0x7D00, 0x3555};
  std::memcpy(a.bytes.data(), av, sizeof av);
  std::memcpy(b.bytes.data(), bv, sizeof bv);
  OwnedTensor lse_a = tensor_of(DType::F32, {2, 1, 1}, {1.5f, kInf});
  OwnedTensor lse_b = tensor_of(DType::F32, {2, 1, 1}, {kInf, kInf});
  OwnedTensor out(DType::F16, {2, 1, 3}), lse(DType::F32, {2, 1, 1});
  ASSERT_TRUE(merge_attention_states(a.view(), lse_a.view(), b.view(), lse_b.view(), "TND", out.mutable_view(),
                                     lse.mutable_view()).ok());
  EXPECT_EQ(elem16(out), elem16(a));  // row 0: b empty -> a; row 1: both empty -> a
  EXPECT_EQ(lse.as<float>()[0], 1.5f);
  EXPECT_EQ(lse.as<float>()[1], kInf);
  // a empty: b, with its -0 and NaN payload.
  lse_a = tensor_of(DType::F32, {2, 1, 1}, {kInf, kInf});
  lse_b = tensor_of(DType::F32, {2, 1, 1}, {0.25f, -7.0f});
  ASSERT_TRUE(merge_attention_states(a.view(), lse_a.view(), b.view(), lse_b.view(), "NTD_TND", out.mutable_view(),
                                     lse.mutable_view()).ok());
  EXPECT_EQ(elem16(out), elem16(b));
  EXPECT_EQ(lse.as<float>()[0], 0.25f);
  EXPECT_EQ(lse.as<float>()[1], -7.0f);
}

/// Random parts of a BSH output (B, S, N * D) for the aliasing and stride tests.
struct Parts {
  OwnedTensor a, b, la, lb;
};
Parts random_parts(DType dtype, std::int64_t B, std::int64_t S, std::int64_t N, std::int64_t D, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Parts p{random_tensor(dtype, {B, S, N * D}, rng), random_tensor(dtype, {B, S, N * D}, rng),
          random_tensor(DType::F32, {B, N, S, 1}, rng, 4.0f), random_tensor(DType::F32, {B, N, S, 1}, rng, 4.0f)};
  p.lb.as<float>()[1] = kInf;  // one empty row in each
  p.la.as<float>()[2] = kInf;
  return p;
}

TEST(MergeStates, InPlaceIntoEitherPartGivesTheSameBits) {
  for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
    Parts p = random_parts(dtype, 2, 3, 4, 8, 11);
    OwnedTensor out(dtype, p.a.shape), lse(DType::F32, p.la.shape);
    ASSERT_TRUE(merge_attention_states(p.a.view(), p.la.view(), p.b.view(), p.lb.view(), "BSH", out.mutable_view(),
                                       lse.mutable_view()).ok());
    Parts q = random_parts(dtype, 2, 3, 4, 8, 11);
    ASSERT_TRUE(merge_attention_states(q.a.view(), q.la.view(), q.b.view(), q.lb.view(), "BSH", q.a.mutable_view(),
                                       q.la.mutable_view()).ok());
    EXPECT_EQ(q.a.bytes, out.bytes);
    EXPECT_EQ(q.la.bytes, lse.bytes);
    Parts r = random_parts(dtype, 2, 3, 4, 8, 11);
    ASSERT_TRUE(merge_attention_states(r.a.view(), r.la.view(), r.b.view(), r.lb.view(), "BSH", r.b.mutable_view(),
                                       r.lb.mutable_view()).ok());
    EXPECT_EQ(r.b.bytes, out.bytes);
    EXPECT_EQ(r.lb.bytes, lse.bytes);
    EXPECT_NE(out.bytes, p.a.bytes);  // the merge did something
  }
}

TEST(MergeStates, StridedViewsGiveTheContiguousResult) {
  // BNSD_BSND output (B, S, N, D) = (2, 3, 4, 8) stored with D padded to 11; LSE (B, N, S, 1)
  // inside a (B, N, S, 2) buffer.
  const std::int64_t B = 2, S = 3, N = 4, D = 8, DP = 11;
  std::mt19937_64 rng(5);
  OwnedTensor a = random_tensor(DType::BF16, {B, S, N, DP}, rng), b = random_tensor(DType::BF16, {B, S, N, DP}, rng);
  OwnedTensor la = random_tensor(DType::F32, {B, N, S, 2}, rng, 3.0f), lb = random_tensor(DType::F32, {B, N, S, 2}, rng, 3.0f);
  const std::vector<std::int64_t> os{S * N * DP, N * DP, DP, 1}, ls{N * S * 2, S * 2, 2, 1};
  const std::vector<std::int64_t> oshape{B, S, N, D}, lshape{B, N, S, 1};
  OwnedTensor out(DType::BF16, {B, S, N, DP}), lse(DType::F32, {B, N, S, 2});
  ASSERT_TRUE(merge_attention_states({a.bytes.data(), DType::BF16, oshape, os}, {la.bytes.data(), DType::F32, lshape, ls},
                                     {b.bytes.data(), DType::BF16, oshape, os}, {lb.bytes.data(), DType::F32, lshape, ls},
                                     "BNSD_BSND", {out.bytes.data(), DType::BF16, oshape, os},
                                     {lse.bytes.data(), DType::F32, lshape, ls}).ok());
  // The same merge on packed copies.
  OwnedTensor ca(DType::BF16, oshape), cb(DType::BF16, oshape), cla(DType::F32, lshape), clb(DType::F32, lshape);
  for (std::int64_t i = 0; i < B * S * N; ++i) {
    std::memcpy(ca.bytes.data() + i * D * 2, a.bytes.data() + i * DP * 2, D * 2);
    std::memcpy(cb.bytes.data() + i * D * 2, b.bytes.data() + i * DP * 2, D * 2);
  }
  for (std::int64_t i = 0; i < B * N * S; ++i) {
    cla.as<float>()[i] = la.as<float>()[2 * i];
    clb.as<float>()[i] = lb.as<float>()[2 * i];
  }
  OwnedTensor packed_out(DType::BF16, oshape), clse(DType::F32, lshape);
  ASSERT_TRUE(merge_attention_states(ca.view(), cla.view(), cb.view(), clb.view(), "BNSD_BSND", packed_out.mutable_view(),
                                     clse.mutable_view()).ok());
  for (std::int64_t i = 0; i < B * S * N; ++i)
    EXPECT_EQ(std::memcmp(out.bytes.data() + i * DP * 2, packed_out.bytes.data() + i * D * 2, D * 2), 0) << i;
  for (std::int64_t i = 0; i < B * N * S; ++i) EXPECT_EQ(lse.as<float>()[2 * i], clse.as<float>()[i]) << i;
  // The padding was not touched.
  EXPECT_EQ(out.as<std::uint16_t>()[D], 0);
  EXPECT_EQ(lse.as<float>()[1], 0.0f);
}

TEST(MergeStates, ZeroSizeTensorsAreValid) {
  const std::vector<std::int64_t> empty{0, 4, 3, 8};
  EXPECT_TRUE(merge_attention_states({nullptr, DType::F16, empty}, {nullptr, DType::F32, {0, 4, 3, 1}},
                                     {nullptr, DType::F16, empty}, {nullptr, DType::F32, {0, 4, 3, 1}}, "BNSD",
                                     {nullptr, DType::F16, empty}, {nullptr, DType::F32, {0, 4, 3, 1}}).ok());
  // D = 0: no output element, but the LSE rows are still merged.
  OwnedTensor la = tensor_of(DType::F32, {2, 1, 1}, {0.0f, kInf}), lb = tensor_of(DType::F32, {2, 1, 1}, {0.0f, 3.0f});
  OwnedTensor lse(DType::F32, {2, 1, 1});
  const std::vector<std::int64_t> od{2, 1, 0};
  ASSERT_TRUE(merge_attention_states({nullptr, DType::F32, od}, la.view(), {nullptr, DType::F32, od}, lb.view(), "TND",
                                     {nullptr, DType::F32, od}, lse.mutable_view()).ok());
  EXPECT_NEAR(lse.as<float>()[0], std::log(2.0f), 1e-7);
  EXPECT_EQ(lse.as<float>()[1], 3.0f);
}

TEST(MergeStates, EveryErrorNamesItsParameter) {
  OwnedTensor o(DType::F16, {2, 3, 8}), o2(DType::F16, {2, 3, 8}), out(DType::F16, {2, 3, 8});  // BSH, N = 2, D = 4
  OwnedTensor l(DType::F32, {2, 2, 3, 1}), l2(DType::F32, {2, 2, 3, 1}), lse(DType::F32, {2, 2, 3, 1});
  struct Case {
    const char* what;
    TensorView oa, la, ob, lb;
    std::string layout;
    MutableTensorView out, lse;
    StatusCode code;
    const char* param;
    const char* message;  // a substring
  };
  const TensorView OA = o.view(), LA = l.view(), OB = o2.view(), LB = l2.view();
  const MutableTensorView OUT = out.mutable_view(), LSE = lse.mutable_view();
  ASSERT_TRUE(merge_attention_states(OA, LA, OB, LB, "BSH", OUT, LSE).ok());
  auto with = [](TensorView v, auto f) { f(v); return v; };
  auto mwith = [](MutableTensorView v, auto f) { f(v); return v; };
  const StatusCode inv = StatusCode::kInvalidArgument;
  const std::vector<Case> cases = {
      {"bad layout", OA, LA, OB, LB, "BXSD", OUT, LSE, inv, "input_layout", "got 'BXSD'"},
      {"empty layout", OA, LA, OB, LB, "", OUT, LSE, inv, "input_layout", "one of BSH, BSND"},
      {"int8 out_a", with(OA, [](auto& v) { v.dtype = DType::I8; }), LA, OB, LB, "BSH", OUT, LSE, inv, "out_a",
       "dtype must be F16, BF16 or F32, got I8"},
      {"rank", OA, LA, OB, LB, "BNSD", OUT, LSE, inv, "out_a", "rank must be 4"},
      {"out_b dtype", OA, LA, with(OB, [](auto& v) { v.dtype = DType::BF16; }), LB, "BSH", OUT, LSE, inv, "out_b",
       "dtype must be F16 (as out_a), got BF16"},
      {"out_b shape", OA, LA, with(OB, [](auto& v) { v.shape[1] = 2; }), LB, "BSH", OUT, LSE, inv, "out_b",
       "shape must be [2, 3, 8] (as out_a), got [2, 2, 8]"},
      {"out shape", OA, LA, OB, LB, "BSH", mwith(OUT, [](auto& v) { v.shape = {2, 3, 4, 2}; }), LSE, inv, "out",
       "got [2, 3, 4, 2]"},
      {"lse_a dtype", OA, with(LA, [](auto& v) { v.dtype = DType::F16; }), OB, LB, "BSH", OUT, LSE, inv, "lse_a",
       "dtype must be F32"},
      {"N not dividing H", OA, with(LA, [](auto& v) { v.shape[1] = 3; }), OB, LB, "BSH", OUT, LSE, inv, "lse_a",
       "with N dividing H = 8 (layout BSH), got [2, 3, 3, 1]"},
      {"lse_b shape", OA, LA, OB, with(LB, [](auto& v) { v.shape = {2, 2, 3}; }), "BSH", OUT, LSE, inv, "lse_b",
       "shape must be [2, 2, 3, 1]"},
      {"lse shape", OA, LA, OB, LB, "BSH", OUT, mwith(LSE, [](auto& v) { v.shape[2] = 4; }), inv, "lse",
       "got [2, 2, 4, 1]"},
      {"token lse", with(OA, [](auto& v) { v.shape = {6, 2, 4}; }), LA, with(OB, [](auto& v) { v.shape = {6, 2, 4}; }),
       LB, "TND", mwith(OUT, [](auto& v) { v.shape = {6, 2, 4}; }), LSE, inv, "lse_a",
       "shape must be [6, 2, 1] (softmax_lse of layout TND for output [6, 2, 4]), got [2, 2, 3, 1]"},
      {"strides count", OA, LA, OB, with(LB, [](auto& v) { v.strides = {1}; }), "BSH", OUT, LSE, inv, "lse_b",
       "strides must have one entry per axis"},
      {"negative dim", with(OA, [](auto& v) { v.shape = {-1, 3, 8}; }), LA, OB, LB, "BSH", OUT, LSE, inv, "out_a",
       "dimensions must be >= 0"},
      {"innermost stride", OA, LA, with(OB, [](auto& v) { v.strides = {48, 16, 2}; }), LB, "BSH", OUT, LSE,
       StatusCode::kUnsupported, "out_b", "the innermost axis must have stride 1, got stride 2"},
      {"null data", with(OA, [](auto& v) { v.data = nullptr; }), LA, OB, LB, "BSH", OUT, LSE,
       StatusCode::kNullArgument, "out_a", "data must not be null for shape [2, 3, 8], got null"},
      {"null lse data", OA, LA, OB, LB, "BSH", OUT, mwith(LSE, [](auto& v) { v.data = nullptr; }),
       StatusCode::kNullArgument, "lse", "data must not be null"},
      {"absent lse_a", OA, TensorView{}, OB, LB, "BSH", OUT, LSE, StatusCode::kNullArgument, "lse_a", "absent"},
      {"absent out", OA, LA, OB, LB, "BSH", MutableTensorView{}, LSE, StatusCode::kNullArgument, "out", "absent"},
  };
  const auto before = out.bytes;
  for (const Case& c : cases) {
    const Status st = merge_attention_states(c.oa, c.la, c.ob, c.lb, c.layout, c.out, c.lse);
    EXPECT_EQ(st.code, c.code) << c.what << ": " << st.to_string();
    EXPECT_EQ(st.parameter, c.param) << c.what << ": " << st.to_string();
    EXPECT_NE(st.message.find(c.message), std::string::npos) << c.what << ": " << st.to_string();
    EXPECT_NE(st.message.find("got"), std::string::npos) << c.what << ": " << st.to_string();
  }
  EXPECT_EQ(out.bytes, before);  // nothing written on an error
}

}  // namespace
}  // namespace fia::test
