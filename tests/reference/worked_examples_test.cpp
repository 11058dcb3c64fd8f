// FIA-SPEC 22: the hand-checkable worked examples, exactly, on both backends.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "numeric/half.hpp"
#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A BNSD call with B = 1, one head: q (S x D), k (KV x D), v (KV x Dv).
TestCall tiny(DType dt, std::int64_t S, std::int64_t KV, std::int64_t D, std::int64_t Dv, const std::vector<float>& q,
              const std::vector<float>& k, const std::vector<float>& v) {
  TestCall c;
  c.args.input_layout = "BNSD";
  c.args.query = c.keep(tensor_of(dt, {1, 1, S, D}, q));
  c.args.key = {c.keep(tensor_of(dt, {1, 1, KV, D}, k))};
  c.args.value = {c.keep(tensor_of(dt, {1, 1, KV, Dv}, v))};
  c.args.softmax_lse_flag = true;
  return c;
}

class WorkedExample : public ::testing::TestWithParam<Backend> {
 protected:
  Outputs run(const FiaArgs& a) {
    Outputs o;
    Status st = run_call(a, GetParam(), 2, &o);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return o;
  }
};

// 22.1: basic single row, F32 (P rounded to f32, far below 1e-6).
TEST_P(WorkedExample, BasicSingleRow) {
  TestCall c = tiny(DType::F32, 1, 2, 2, 2, {1, 0}, {1, 0, 0, 1}, {1, 2, 3, 4});
  Outputs o = run(c.args);
  EXPECT_NEAR(o.attention_out.as<float>()[0], 1.53788284, 1e-6);
  EXPECT_NEAR(o.attention_out.as<float>()[1], 2.53788284, 1e-6);
  EXPECT_NEAR(o.softmax_lse.as<float>()[0], 1.31326169, 1e-6);
}

// 22.1: the fp16 and bf16 paths round E before P·V, then the output once.
TEST_P(WorkedExample, BasicSingleRowHalfPrecisionRounding) {
  TestCall h = tiny(DType::F16, 1, 2, 2, 2, {1, 0}, {1, 0, 0, 1}, {1, 2, 3, 4});
  detail::ReferenceResult r;
  ASSERT_TRUE(reference_exact(h.args, &r).ok());
  EXPECT_NEAR(r.out[0], 1.53797162, 1e-7);
  EXPECT_NEAR(r.out[1], 2.53800122, 1e-7);
  Outputs o = run(h.args);
  EXPECT_EQ(detail::f16_to_f32(o.attention_out.as<std::uint16_t>()[0]), 1.5380859375f);
  EXPECT_EQ(detail::f16_to_f32(o.attention_out.as<std::uint16_t>()[1]), 2.537109375f);

  TestCall b = tiny(DType::BF16, 1, 2, 2, 2, {1, 0}, {1, 0, 0, 1}, {1, 2, 3, 4});
  ASSERT_TRUE(reference_exact(b.args, &r).ok());
  EXPECT_NEAR(r.out[0], 1.53636529, 1e-7);
  EXPECT_NEAR(r.out[1], 2.53585944, 1e-7);
  o = run(b.args);
  EXPECT_EQ(detail::bf16_to_f32(o.attention_out.as<std::uint16_t>()[0]), 1.5390625f);
  EXPECT_EQ(detail::bf16_to_f32(o.attention_out.as<std::uint16_t>()[1]), 2.53125f);
}

// 22.2: the learnable sink joins the denominator and the LSE only.
TEST_P(WorkedExample, LearnableSink) {
  for (const auto& [sink, o0, o1, lse] : {std::tuple{0.0f, 1.21194156, 2.0, 1.55144471},
                                          std::tuple{3.0f, 0.24022540, 0.39643066, 3.16984602}}) {
    TestCall c = tiny(DType::F32, 1, 2, 2, 2, {1, 0}, {1, 0, 0, 1}, {1, 2, 3, 4});
    c.args.learnable_sink = c.keep(tensor_of(DType::BF16, {1}, {sink}));
    Outputs o = run(c.args);
    EXPECT_NEAR(o.attention_out.as<float>()[0], o0, 1e-6) << "sink " << sink;
    EXPECT_NEAR(o.attention_out.as<float>()[1], o1, 1e-6) << "sink " << sink;
    EXPECT_NEAR(o.softmax_lse.as<float>()[0], lse, 1e-6) << "sink " << sink;
  }
}

// 22.3: pse is added after scaling: 4 * 0.5 + 1 = 3, not (4 + 1) * 0.5.
TEST_P(WorkedExample, ScaleThenPse) {
  TestCall c = tiny(DType::F32, 1, 1, 1, 1, {2}, {2}, {7});
  c.args.scale = 0.5;
  c.args.pse_shift = c.keep(tensor_of(DType::F32, {1, 1, 1, 1}, {1}));
  Outputs o = run(c.args);
  EXPECT_FLOAT_EQ(o.softmax_lse.as<float>()[0], 3.0f);  // one key: LSE = its score
  EXPECT_FLOAT_EQ(o.attention_out.as<float>()[0], 7.0f);
}

// 22.4: sparse modes on a 2 x 3 problem.
TEST_P(WorkedExample, SparseModesTwoByThree) {
  struct Row {
    std::int64_t mode, pre, next;
    double o0, o1, l0, l1;
  };
  const Row rows[] = {
      {0, kIntMax, kIntMax, 25.7521038, 25.7521038, 2.40760596, 2.40760596},
      {2, kIntMax, kIntMax, 10.0, 17.3105858, 0.0, 1.31326169},
      {3, kIntMax, kIntMax, 17.3105858, 25.7521038, 1.31326169, 2.40760596},
      {4, 0, 0, 20.0, 30.0, 1.0, 2.0},
  };
  for (const Row& r : rows) {
    TestCall c = tiny(DType::F32, 2, 3, 1, 1, {1, 1}, {0, 1, 2}, {10, 20, 30});
    c.args.sparse_mode = r.mode;
    c.args.pre_tokens = r.pre;
    c.args.next_tokens = r.next;
    if (r.mode != 0) {
      CallSpec s;
      s.mask = MaskKind::kCompressed;
      TestCall m = build_call(s, 1);
      c.args.atten_mask = m.args.atten_mask;  // the shared static compressed mask
    }
    Outputs o = run(c.args);
    const float* out = o.attention_out.as<float>();
    const float* lse = o.softmax_lse.as<float>();
    EXPECT_NEAR(out[0], r.o0, 2e-5) << "mode " << r.mode;
    EXPECT_NEAR(out[1], r.o1, 2e-5) << "mode " << r.mode;
    EXPECT_NEAR(lse[0], r.l0, 1e-6) << "mode " << r.mode;
    EXPECT_NEAR(lse[1], r.l1, 1e-6) << "mode " << r.mode;
  }
}

TestCall with_compressed_mask(TestCall c) {
  CallSpec s;
  s.mask = MaskKind::kCompressed;
  c.args.atten_mask = build_call(s, 1).args.atten_mask;
  return c;
}

// 22.5: right-down causal with more queries than keys: the first rows are invalid.
TEST_P(WorkedExample, RightDownCausalInvalidRows) {
  TestCall c = with_compressed_mask(tiny(DType::F32, 4, 2, 1, 1, {0, 0, 0, 0}, {0, 0}, {10, 20}));
  c.args.sparse_mode = 3;
  Outputs o = run(c.args);
  const float* out = o.attention_out.as<float>();
  const float* lse = o.softmax_lse.as<float>();
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(lse[0], kInf);
  EXPECT_EQ(lse[1], kInf);
  EXPECT_FLOAT_EQ(out[2], 10.0f);  // row 2 sees column 0
  EXPECT_FLOAT_EQ(out[3], 15.0f);  // row 3 sees columns 0, 1 equally
  EXPECT_NEAR(lse[3], std::log(2.0), 1e-6);
}

// 22.6: band on a 3 x 5 problem (mode 4, pre 1, next 0): row i sees [i + 1, i + 2].
TEST_P(WorkedExample, BandThreeByFive) {
  TestCall c = with_compressed_mask(tiny(DType::F32, 3, 5, 1, 1, {0, 0, 0}, {0, 0, 0, 0, 0}, {0, 1, 2, 3, 4}));
  c.args.sparse_mode = 4;
  c.args.pre_tokens = 1;
  c.args.next_tokens = 0;
  Outputs o = run(c.args);
  const float* out = o.attention_out.as<float>();
  EXPECT_FLOAT_EQ(out[0], 1.5f);
  EXPECT_FLOAT_EQ(out[1], 2.5f);
  EXPECT_FLOAT_EQ(out[2], 3.5f);
}

// 22.7: mode 0 with an all-zero mask still applies the pre/next band.
TEST_P(WorkedExample, ModeZeroBandWithFullMask) {
  for (const auto& [pre, expect] : {std::pair<std::int64_t, std::vector<float>>{0, {0, 1, 2}},
                                    std::pair<std::int64_t, std::vector<float>>{1, {0, 0.5f, 1.5f}}}) {
    TestCall c = tiny(DType::F32, 3, 3, 1, 1, {0, 0, 0}, {0, 0, 0}, {0, 1, 2});
    c.args.atten_mask = c.keep(tensor_of(DType::Bool, {3, 3}, std::vector<float>(9, 0.0f)));
    c.args.pre_tokens = pre;
    c.args.next_tokens = 0;
    Outputs o = run(c.args);
    for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(o.attention_out.as<float>()[i], expect[i]) << "pre " << pre << " row " << i;
  }
}

// 22.8: left padding windows: rows [3, 6) computed from KV positions [5, 9).
TEST_P(WorkedExample, LeftPaddingWindows) {
  std::vector<float> v(10);
  std::iota(v.begin(), v.end(), 0.0f);
  TestCall c = tiny(DType::F32, 8, 10, 1, 1, std::vector<float>(8, 0.0f), std::vector<float>(10, 0.0f), v);
  c.args.actual_seq_lengths = std::vector<std::int64_t>{3};
  c.args.actual_seq_lengths_kv = std::vector<std::int64_t>{4};
  c.args.query_padding_size = c.keep(OwnedTensor(DType::I64, {1}));
  c.args.kv_padding_size = c.keep(OwnedTensor(DType::I64, {1}));
  const_cast<std::int64_t*>(static_cast<const std::int64_t*>(c.args.query_padding_size.data))[0] = 2;
  const_cast<std::int64_t*>(static_cast<const std::int64_t*>(c.args.kv_padding_size.data))[0] = 1;
  Outputs o = run(c.args);
  const float* out = o.attention_out.as<float>();
  const float* lse = o.softmax_lse.as<float>();
  for (int r = 0; r < 8; ++r) {
    if (r >= 3 && r < 6) {
      EXPECT_FLOAT_EQ(out[r], 6.5f) << "row " << r;
      EXPECT_NEAR(lse[r], std::log(4.0), 1e-6);
    } else {
      EXPECT_EQ(out[r], 0.0f) << "row " << r;
      EXPECT_EQ(lse[r], kInf) << "row " << r;
    }
  }
}

// 22.9: paged lookup: token 37 of block table [5, 2, 9, -1] lives in block 9 at offset 5.
TEST_P(WorkedExample, PagedLookup) {
  TestCall c;
  c.args.input_layout = "BSH";
  c.args.softmax_lse_flag = true;
  c.args.query = c.keep(tensor_of(DType::F32, {1, 1, 1}, {1}));
  OwnedTensor k(DType::F32, {10, 16, 1}), v(DType::F32, {10, 16, 1});
  const std::int32_t table[] = {5, 2, 9, -1};
  for (std::int64_t i = 0; i < 160; ++i) {
    k.as<float>()[i] = 0.0f;
    v.as<float>()[i] = 1e6f;  // unused slots: never read
  }
  for (int t = 0; t < 40; ++t) v.as<float>()[table[t / 16] * 16 + t % 16] = t == 37 ? 100.0f : 0.0f;
  k.as<float>()[9 * 16 + 5] = 50.0f;  // token 37's key dominates the softmax
  c.args.key = {c.keep(std::move(k))};
  c.args.value = {c.keep(std::move(v))};
  c.args.block_table = c.keep(tensor_of(DType::I32, {1, 4}, {}));
  std::copy(table, table + 4, const_cast<std::int32_t*>(static_cast<const std::int32_t*>(c.args.block_table.data)));
  c.args.block_size = 16;
  c.args.actual_seq_lengths_kv = std::vector<std::int64_t>{40};
  Outputs o = run(c.args);
  EXPECT_NEAR(o.attention_out.as<float>()[0], 100.0f, 1e-3);
  EXPECT_NEAR(o.softmax_lse.as<float>()[0], 50.0 + std::log1p(39 * std::exp(-50.0)), 1e-5);
}

// 22.10: TND cumulative lengths [2, 5, 9]: batch 1 is rows 2..4; LSE shape (9, N, 1).
TEST_P(WorkedExample, TndCumulativeLengths) {
  TestCall c;
  c.args.input_layout = "TND";
  c.args.actual_seq_lengths = std::vector<std::int64_t>{2, 5, 9};
  c.args.actual_seq_lengths_kv = std::vector<std::int64_t>{1, 2, 3};
  c.args.softmax_lse_flag = true;
  c.args.query = c.keep(tensor_of(DType::F32, {9, 1, 1}, std::vector<float>(9, 0.0f)));
  c.args.key = {c.keep(tensor_of(DType::F32, {3, 1, 1}, {0, 0, 0}))};
  c.args.value = {c.keep(tensor_of(DType::F32, {3, 1, 1}, {10, 20, 30}))};  // batch b owns KV row b
  Outputs o = run(c.args);
  EXPECT_EQ(o.softmax_lse.shape, (std::vector<std::int64_t>{9, 1, 1}));
  const float want[] = {10, 10, 20, 20, 20, 30, 30, 30, 30};
  for (int t = 0; t < 9; ++t) EXPECT_FLOAT_EQ(o.attention_out.as<float>()[t], want[t]) << "row " << t;
}

// 22.15: ALiBi bias passed as pse (slopes of 8 heads; -|x - y - (S2 - S1)| * slope).
TEST_P(WorkedExample, AlibiBias) {
  const std::int64_t N = 8, S1 = 2, S2 = 4;
  std::vector<float> pse(N * S1 * S2);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t y = 0; y < S1; ++y)
      for (std::int64_t x = 0; x < S2; ++x)
        pse[(n * S1 + y) * S2 + x] = -std::fabs(static_cast<float>(x - y - (S2 - S1))) * std::pow(0.5f, static_cast<float>(n + 1));
  EXPECT_EQ(pse[0], -1.0f);  // slope 0.5, row 0 = [-1, -0.5, 0, -0.5]
  EXPECT_EQ(pse[3], -0.5f);
  EXPECT_EQ(pse[4], -1.5f);  // row 1 = [-1.5, -1, -0.5, 0]
  TestCall c;
  c.args.input_layout = "BNSD";
  c.args.num_heads = N;
  c.args.num_key_value_heads = 1;
  c.args.softmax_lse_flag = true;
  c.args.query = c.keep(tensor_of(DType::F32, {1, N, S1, 1}, std::vector<float>(N * S1, 0.0f)));
  c.args.key = {c.keep(tensor_of(DType::F32, {1, 1, S2, 1}, {0, 0, 0, 0}))};
  c.args.value = {c.keep(tensor_of(DType::F32, {1, 1, S2, 1}, {0, 1, 2, 3}))};
  c.args.pse_shift = c.keep(tensor_of(DType::F32, {1, N, S1, S2}, pse));
  Outputs o = run(c.args);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t y = 0; y < S1; ++y) {
      double l = 0, acc = 0;
      for (std::int64_t x = 0; x < S2; ++x) {
        const double e = std::exp(pse[(n * S1 + y) * S2 + x]);
        l += e;
        acc += e * static_cast<double>(x);
      }
      EXPECT_NEAR(o.attention_out.as<float>()[n * S1 + y], acc / l, 1e-6);
      EXPECT_NEAR(o.softmax_lse.as<float>()[n * S1 + y], std::log(l), 1e-6);
    }
  }
}

// 22.16: the aclnn V4 sample: fp16 ones, every score equal, output all ones (1, 2, 1, 128).
TEST_P(WorkedExample, DocumentationSample) {
  TestCall c;
  c.args.input_layout = "BNSD";
  c.args.num_heads = 2;
  c.args.num_key_value_heads = 1;
  c.args.scale = 1.0 / std::sqrt(128.0);
  c.args.query = c.keep(tensor_of(DType::F16, {1, 2, 1, 128}, std::vector<float>(256, 1.0f)));
  c.args.key = {c.keep(tensor_of(DType::F16, {1, 1, 16, 128}, std::vector<float>(2048, 1.0f)))};
  c.args.value = {c.keep(tensor_of(DType::F16, {1, 1, 16, 128}, std::vector<float>(2048, 1.0f)))};
  Outputs o = run(c.args);
  EXPECT_EQ(o.attention_out.shape, (std::vector<std::int64_t>{1, 2, 1, 128}));
  for (std::int64_t i = 0; i < 256; ++i) ASSERT_EQ(o.attention_out.as<std::uint16_t>()[i], 0x3C00) << i;  // 1.0
  EXPECT_EQ(o.softmax_lse.shape, (std::vector<std::int64_t>{1}));  // flag off: [1] holding 0
  EXPECT_EQ(o.softmax_lse.as<float>()[0], 0.0f);
}

/// An I8 tensor of `values`, or an I32 tensor of raw words.
OwnedTensor int_tensor(DType dt, std::vector<std::int64_t> shape, const std::vector<std::int64_t>& values) {
  OwnedTensor t(dt, std::move(shape));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dt == DType::I8) t.as<std::int8_t>()[i] = static_cast<std::int8_t>(values[i]);
    else t.as<std::int32_t>()[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(values[i]));
  }
  return t;
}

/// One query row over one int8 key/value token (BNSD, B = N = 1, D = 2, scale 1): the softmax
/// weight is 1, so the output is the dequantized value row and the LSE the score q · k_real.
TestCall one_int8_token(const std::vector<float>& q, const std::vector<std::int64_t>& k,
                        const std::vector<std::int64_t>& v) {
  TestCall c;
  c.args.input_layout = "BNSD";
  c.args.softmax_lse_flag = true;
  c.args.query = c.keep(tensor_of(DType::F16, {1, 1, 1, 2}, q));
  c.args.key = {c.keep(int_tensor(DType::I8, {1, 1, 1, 2}, k))};
  c.args.value = {c.keep(int_tensor(DType::I8, {1, 1, 1, 2}, v))};
  return c;
}

float f16_at(const Outputs& o, std::int64_t i) { return detail::f16_to_f32(o.attention_out.as<std::uint16_t>()[i]); }

// 22.11: x_real = (x + offset) * scale: int8 -3 with offset 2 and scale 0.5 is -0.5; without the
// offset -1.5. Channel d uses scale[d] and offset[d] (per-channel (N, D)).
TEST_P(WorkedExample, AntiquantInt8OffsetThenScale) {
  for (const bool offset : {true, false}) {
    TestCall c = one_int8_token({1, 1}, {-3, 5}, {-3, 4});
    c.args.key_antiquant_scale = c.keep(tensor_of(DType::F16, {1, 2}, {0.5f, 0.25f}));
    c.args.value_antiquant_scale = c.keep(tensor_of(DType::F16, {1, 2}, {0.5f, 0.25f}));
    if (offset) {
      c.args.key_antiquant_offset = c.keep(tensor_of(DType::F16, {1, 2}, {2, -1}));
      c.args.value_antiquant_offset = c.keep(tensor_of(DType::F16, {1, 2}, {2, -1}));
    }
    Outputs o = run(c.args);
    // k_real = [-0.5, 1] (offset) or [-1.5, 1.25]; v_real = [-0.5, 0.75] or [-1.5, 1].
    EXPECT_EQ(f16_at(o, 0), offset ? -0.5f : -1.5f) << "offset " << offset;
    EXPECT_EQ(f16_at(o, 1), offset ? 0.75f : 1.0f) << "offset " << offset;
    EXPECT_EQ(o.softmax_lse.as<float>()[0], offset ? 0.5f : -0.25f) << "offset " << offset;
  }
}

// 22.11 with a per-tensor scale (1) and the combined parameters (a leading axis 2: key, value).
TEST_P(WorkedExample, AntiquantInt8PerTensorAndCombined) {
  TestCall c = one_int8_token({1, 0}, {-3, 0}, {-3, 1});
  c.args.key_antiquant_scale = c.keep(tensor_of(DType::F16, {1}, {0.5f}));
  c.args.value_antiquant_scale = c.keep(tensor_of(DType::F16, {1}, {0.5f}));
  c.args.key_antiquant_offset = c.keep(tensor_of(DType::F16, {1}, {2}));
  c.args.value_antiquant_offset = c.keep(tensor_of(DType::F16, {1}, {2}));
  Outputs o = run(c.args);
  EXPECT_EQ(f16_at(o, 0), -0.5f);
  EXPECT_EQ(f16_at(o, 1), 1.5f);
  EXPECT_EQ(o.softmax_lse.as<float>()[0], -0.5f);

  TestCall d = one_int8_token({1, 0}, {-3, 0}, {-3, 1});
  d.args.antiquant_scale = d.keep(tensor_of(DType::F16, {2}, {0.5f, 0.25f}));  // key 0.5, value 0.25
  d.args.antiquant_offset = d.keep(tensor_of(DType::F16, {2}, {2, 1}));        // key 2, value 1
  o = run(d.args);
  EXPECT_EQ(f16_at(o, 0), -0.5f);  // (-3 + 1) * 0.25
  EXPECT_EQ(f16_at(o, 1), 0.5f);   // (1 + 1) * 0.25
  EXPECT_EQ(o.softmax_lse.as<float>()[0], -0.5f);  // (-3 + 2) * 0.5
}

// 22.11 per-token (mode 1, scale (B, S')): token t of batch b uses scale[b][t] for every channel d
// and every KV head. A zero query gives every token weight 1/4, so the output is the mean over t
// of scale[b][t] * v[b][h][t][d] (powers of two and small integers: exact). S' = 6 > KV_S = 4:
// columns 4 and 5 are never read. Mode 3 (B, N, S') scales each head separately.
TEST_P(WorkedExample, AntiquantPerTokenScaleIndexing) {
  const std::int64_t B = 2, N = 2, S = 4, D = 2, Sp = 6;
  std::vector<std::int64_t> v(B * N * S * D), k(B * N * S * D);
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<std::int64_t>(i % 7) - 3;
    k[i] = static_cast<std::int64_t>(i * 5 % 11) - 5;  // irrelevant: the query is 0
  }
  const float pow2[] = {0.5f, 0.25f, 1.0f, 2.0f, 0.125f, 4.0f, 8.0f, 0.0625f};
  for (const std::int64_t mode : {1, 3}) {
    const std::int64_t heads = mode == 3 ? N : 1;
    std::vector<float> sc(B * heads * Sp, 1e6f);  // unread columns: huge
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t t = 0; t < S; ++t) sc[(b * heads + h) * Sp + t] = pow2[(b * 3 + h * 5 + t) % 8];
    TestCall c;
    c.args.input_layout = "BNSD";
    c.args.num_heads = N;
    c.args.softmax_lse_flag = true;
    c.args.query = c.keep(tensor_of(DType::F32, {B, N, 1, D}, std::vector<float>(B * N * D, 0.0f)));
    c.args.key = {c.keep(int_tensor(DType::I8, {B, N, S, D}, k))};
    c.args.value = {c.keep(int_tensor(DType::I8, {B, N, S, D}, v))};
    const std::vector<std::int64_t> shape = mode == 3 ? std::vector<std::int64_t>{B, N, Sp} : std::vector<std::int64_t>{B, Sp};
    c.args.key_antiquant_scale = c.keep(tensor_of(DType::F32, shape, sc));
    c.args.value_antiquant_scale = c.keep(tensor_of(DType::F32, shape, sc));
    c.args.key_antiquant_mode = c.args.value_antiquant_mode = mode;
    Outputs o = run(c.args);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < N; ++h) {
        EXPECT_NEAR(o.softmax_lse.as<float>()[b * N + h], std::log(4.0), 1e-6);
        for (std::int64_t d = 0; d < D; ++d) {
          double want = 0;
          for (std::int64_t t = 0; t < S; ++t)
            want += sc[(b * heads + (mode == 3 ? h : 0)) * Sp + t] * static_cast<double>(v[((b * N + h) * S + t) * D + d]);
          EXPECT_EQ(o.attention_out.as<float>()[(b * N + h) * D + d], static_cast<float>(want / 4))
              << "mode " << mode << " b " << b << " h " << h << " d " << d;
        }
      }
  }
}

// 22.12: INT4 unpacking: eight two's-complement nibbles per int32, the lowest first. One token
// (weight 1) with scale 1: the output row is the unpacked value word; with q = [1, 2, .., 8] the
// LSE (the score) is sum (d + 1) * k[d] of the unpacked key word, which fixes the nibble order.
TEST_P(WorkedExample, Int4Unpacking) {
  struct Word {
    std::uint32_t w;
    std::vector<float> values;
  };
  const Word words[] = {
      {0x87654321u, {1, 2, 3, 4, 5, 6, 7, -8}}, {0x11111111u, {1, 1, 1, 1, 1, 1, 1, 1}},
      {0x00000001u, {1, 0, 0, 0, 0, 0, 0, 0}},  {0xFFFFFFFFu, {-1, -1, -1, -1, -1, -1, -1, -1}},
      {0x0000000Fu, {-1, 0, 0, 0, 0, 0, 0, 0}},
  };
  for (const Word& x : words) {
    TestCall c;
    c.args.input_layout = "BNSD";
    c.args.softmax_lse_flag = true;
    c.args.query = c.keep(tensor_of(DType::F16, {1, 1, 1, 8}, {1, 2, 3, 4, 5, 6, 7, 8}));
    c.args.key = {c.keep(int_tensor(DType::I32, {1, 1, 1, 1}, {x.w}))};
    c.args.value = {c.keep(int_tensor(DType::I32, {1, 1, 1, 1}, {x.w}))};
    c.args.key_antiquant_scale = c.keep(tensor_of(DType::F16, {1, 8}, std::vector<float>(8, 1.0f)));
    c.args.value_antiquant_scale = c.keep(tensor_of(DType::F16, {1, 8}, std::vector<float>(8, 1.0f)));
    Outputs o = run(c.args);
    float score = 0;
    for (int d = 0; d < 8; ++d) {
      EXPECT_EQ(f16_at(o, d), x.values[d]) << std::hex << "0x" << x.w << std::dec << " element " << d;
      score += static_cast<float>(d + 1) * x.values[d];
    }
    EXPECT_EQ(o.softmax_lse.as<float>()[0], score) << std::hex << "0x" << x.w;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, WorkedExample, ::testing::Values(Backend::kCpu, Backend::kReference),
                         [](const auto& info) { return info.param == Backend::kCpu ? "cpu" : "reference"; });

}  // namespace
}  // namespace fia::test
