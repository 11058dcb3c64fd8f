// KV antiquantization (FIA-SPEC 12) value properties: a quantized cache means its dequantized
// values, an int4 cache the int8 cache of the same integers, and combined parameters their split
// halves. Helpers and the common premise: antiquant_properties.hpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "properties/antiquant_properties.hpp"
#include "support/call_builder.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

/// The split parameters of a call, whichever way it passes them: {scale, offset} per side.
struct Side {
  TensorView scale, offset;
  std::int64_t mode = 0;
};

// ---------------------------------------------------------------------------------------------
// (a) A quantized cache gives the result of its dequantized values: F32 query, the same call with
// F32 K/V holding (x + offset) * scale. Every split mode without storage indirection; the scale
// and offset of (b, h, t, d) are located here from FIA-SPEC 12.3 alone.

/// The scale (or offset) element of side view `t` in `mode` for (b, h, t, d); D the side's head
/// dim, N the KV heads.
double param_at(const TensorView& t, std::int64_t mode, std::int64_t N, std::int64_t D, std::int64_t b, std::int64_t h,
                std::int64_t tok, std::int64_t d) {
  const std::int64_t S = t.shape.back();  // per-token: S'
  std::int64_t i = 0;
  switch (mode) {
    case 0: i = t.numel() == 1 ? 0 : h * D + d; break;  // every per-channel shape is h-major, d-minor
    case 2: i = h; break;
    case 1: i = b * S + tok; break;                     // (B, S') and (1, B, S')
    case 3: i = (b * N + h) * S + tok; break;
    default: ADD_FAILURE() << "mode " << mode; break;
  }
  return kv_value(t, i);
}

class DequantizedEqualsFloat : public ::testing::TestWithParam<int> {};

TEST_P(DequantizedEqualsFloat, WithinF32Rounding) {
  const int i = GetParam();
  std::mt19937_64 rng(static_cast<std::uint64_t>(i) + 500);
  CallSpec spec;
  spec.layout = i % 3 == 0 ? "BSH" : "BNSD";
  spec.dtype = DType::F32;
  spec.batch = 1 + i % 3;
  spec.num_kv_heads = 1 + i % 2;
  spec.num_heads = spec.num_kv_heads * (1 + i % 3);
  spec.qk_dim = i % 4 == 0 ? 64 : 32;
  spec.v_dim = i % 5 == 2 ? 16 : 0;
  spec.q_seq = i % 2 ? 1 : 7;
  spec.kv_seq = 5 + static_cast<std::int64_t>(rng() % 150);
  spec.lse = true;
  spec.sink = i % 4 == 1;
  if (spec.q_seq > 1) {
    spec.mask = MaskKind::kCompressed;
    spec.sparse_mode = 3;
  }
  const AntiquantKind kinds[] = {AntiquantKind::kChannel, AntiquantKind::kTensor, AntiquantKind::kToken,
                                 AntiquantKind::kHead, AntiquantKind::kTokenHead, AntiquantKind::kChannelThenToken};
  set_antiquant(spec, format_of(i / 6), kinds[i % 6], static_cast<std::uint64_t>(i));
  spec.quant.combined = false;
  TestCall q = build_call(spec, static_cast<std::uint64_t>(i));
  const FiaArgs& a = q.args;
  const std::int64_t B = spec.batch, N = spec.num_kv_heads, S = spec.kv_seq;
  const Side sides[2] = {{a.key_antiquant_scale, a.key_antiquant_offset, a.key_antiquant_mode},
                         {a.value_antiquant_scale, a.value_antiquant_offset, a.value_antiquant_mode}};
  TestCall f;
  f.args = a;
  f.args.key_antiquant_scale = f.args.value_antiquant_scale = {};
  f.args.key_antiquant_offset = f.args.value_antiquant_offset = {};
  f.args.key_antiquant_mode = f.args.value_antiquant_mode = 0;
  for (int side = 0; side < 2; ++side) {
    const TensorView& src = side ? a.value[0] : a.key[0];
    const Side& p = sides[side];
    const std::int64_t D = side ? (spec.v_dim ? spec.v_dim : spec.qk_dim) : spec.qk_dim;
    OwnedTensor t(DType::F32, logical_shape(src));
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < N; ++h)
        for (std::int64_t tok = 0; tok < S; ++tok)
          for (std::int64_t d = 0; d < D; ++d) {
            const std::int64_t e = spec.layout == "BSH" ? (b * S + tok) * N * D + h * D + d : ((b * N + h) * S + tok) * D + d;
            const double off = p.offset.present() ? param_at(p.offset, p.mode, N, D, b, h, tok, d) : 0.0;
            const double x = (kv_value(src, e) + off) * param_at(p.scale, p.mode, N, D, b, h, tok, d);
            t.as<float>()[e] = static_cast<float>(x);
          }
    const TensorView kept = f.keep(std::move(t));
    if (side) f.args.value = {kept};
    else f.args.key = {kept};
  }
  // cpu: the int path folds the scales around integer dot products, the float path does not.
  const Outputs x = run_cpu(a, "quantized"), y = run_cpu(f.args, "float");
  const float* xo = x.attention_out.as<float>();
  const float* yo = y.attention_out.as<float>();
  for (std::int64_t e = 0; e < x.attention_out.numel(); ++e)
    ASSERT_NEAR(xo[e], yo[e], 2e-5 + 2e-5 * std::fabs(yo[e])) << "element " << e << " " << describe(spec);
  for (std::int64_t e = 0; e < x.softmax_lse.numel(); ++e)
    ASSERT_NEAR(x.softmax_lse.as<float>()[e], y.softmax_lse.as<float>()[e], 2e-5) << "lse " << e << " " << describe(spec);
  // Reference: exact dequantization against f32-rounded dequantized values.
  detail::ReferenceResult rq, rf;
  ASSERT_TRUE(reference_exact(a, &rq).ok());
  ASSERT_TRUE(reference_exact(f.args, &rf).ok());
  for (std::size_t e = 0; e < rq.out.size(); ++e)
    ASSERT_NEAR(rq.out[e], rf.out[e], 1e-6 + 1e-6 * std::fabs(rf.out[e])) << "element " << e << " " << describe(spec);
}

INSTANTIATE_TEST_SUITE_P(Cases, DequantizedEqualsFloat, ::testing::Range(0, 24));

// ---------------------------------------------------------------------------------------------
// (c) An int4 cache equals the int8 cache of the same (unpacked) values: the cpu backend within
// f32 rounding (it may sum the products of the two formats in different orders), the reference
// to the same doubles. With unit scales (the integers themselves) and with the random scales.

/// The int8 copy of an int4 tensor (same logical shape).
OwnedTensor unpack(const TensorView& t) {
  OwnedTensor u(DType::I8, logical_shape(t));
  for (std::int64_t e = 0; e < u.numel(); ++e) set_kv_value(u, e, static_cast<float>(kv_value(t, e)));
  return u;
}

class Int4EqualsInt8 : public ::testing::TestWithParam<int> {};

TEST_P(Int4EqualsInt8, WithinF32RoundingAndSameReference) {
  const int i = GetParam();
  const KvStorage storage = i % 3 == 0 ? KvStorage::kPaged : i % 3 == 1 ? KvStorage::kTensorList : KvStorage::kContiguous;
  CallSpec spec = quant_spec(static_cast<std::uint64_t>(i) + 1000, storage, KvQuant::kInt4);
  if (i % 4 == 2) {
    spec.prefix_seq = 5;
    spec.prefix_len = 3;
    if (spec.quant.key_mode >= 4) set_antiquant(spec, KvQuant::kInt4, AntiquantKind::kToken, 7);
  }
  spec.quant.unit_scales = i % 2 == 0;
  TestCall c4 = build_call(spec, static_cast<std::uint64_t>(i));
  TestCall c8;
  c8.args = c4.args;
  c8.args.key.clear();
  c8.args.value.clear();
  for (const TensorView& k : c4.args.key) c8.args.key.push_back(c8.keep(unpack(k)));
  for (const TensorView& v : c4.args.value) c8.args.value.push_back(c8.keep(unpack(v)));
  if (c4.args.key_shared_prefix.present()) {
    c8.args.key_shared_prefix = c8.keep(unpack(c4.args.key_shared_prefix));
    c8.args.value_shared_prefix = c8.keep(unpack(c4.args.value_shared_prefix));
  }
  expect_close(c4.args, "int4", c8.args, "int8", spec);
  detail::ReferenceResult r4, r8;
  ASSERT_TRUE(reference_exact(c4.args, &r4).ok()) << describe(spec);
  ASSERT_TRUE(reference_exact(c8.args, &r8).ok()) << describe(spec);
  EXPECT_EQ(r4.out, r8.out) << describe(spec);
  EXPECT_EQ(r4.lse, r8.lse) << describe(spec);
}

INSTANTIATE_TEST_SUITE_P(Seeds, Int4EqualsInt8, ::testing::Range(0, kCases));

// ---------------------------------------------------------------------------------------------
// (d) Combined parameters (antiquant_scale / antiquant_offset, leading axis 2: key, value) equal
// the split parameters of their two halves, bit for bit; and split parameters win over combined
// ones given beside them (FIA-SPEC 12.2).

/// Half `side` of a combined scale or offset as a split view: (2, X...) -> (X...), (2) -> (1).
TensorView half(const TensorView& t, int side) {
  TensorView v = t;
  v.shape.erase(v.shape.begin());
  if (v.shape.empty()) v.shape = {1};
  v.strides.clear();
  v.data = static_cast<const std::byte*>(t.data) + side * t.stride(0) * static_cast<std::int64_t>(dtype_size(t.dtype));
  return v;
}

/// A copy of a combined scale with every element doubled (a different, valid tensor).
OwnedTensor doubled(const TensorView& t) {
  OwnedTensor d(t.dtype, t.shape);
  for (std::int64_t e = 0; e < d.numel(); ++e) set_value(d, e, static_cast<float>(2.0 * kv_value(t, e)));
  return d;
}

class CombinedEqualsSplit : public ::testing::TestWithParam<int> {};

TEST_P(CombinedEqualsSplit, BitIdentical) {
  const int i = GetParam();
  const KvStorage storage = i % 3 == 0 ? KvStorage::kPaged : i % 3 == 1 ? KvStorage::kTensorList : KvStorage::kContiguous;
  const std::vector<AntiquantKind> kinds = {AntiquantKind::kChannel, AntiquantKind::kTensor, AntiquantKind::kToken};
  CallSpec spec = quant_spec(static_cast<std::uint64_t>(i) + 2000, storage, format_of(i), kinds);
  spec.quant.combined = true;
  if (spec.quant.key_mode == 0 && spec.quant.channel_shape != "1") {
    static const char* kForms[] = {"N1D", "1ND", "ND", "H"};
    spec.quant.channel_shape = kForms[i % 4];
  }
  TestCall comb = build_call(spec, static_cast<std::uint64_t>(i));
  const FiaArgs& a = comb.args;
  ASSERT_TRUE(a.antiquant_scale.present()) << describe(spec);
  TestCall split;
  split.args = a;
  split.args.antiquant_scale = split.keep(doubled(a.antiquant_scale));  // ignored: split wins
  split.args.antiquant_offset = {};
  split.args.key_antiquant_mode = split.args.value_antiquant_mode = a.antiquant_mode;
  split.args.key_antiquant_scale = half(a.antiquant_scale, 0);
  split.args.value_antiquant_scale = half(a.antiquant_scale, 1);
  if (a.antiquant_offset.present()) {
    split.args.key_antiquant_offset = half(a.antiquant_offset, 0);
    split.args.value_antiquant_offset = half(a.antiquant_offset, 1);
  }
  expect_same_bits(a, "combined", split.args, "split", spec);
}

INSTANTIATE_TEST_SUITE_P(Seeds, CombinedEqualsSplit, ::testing::Range(0, kCases));

}  // namespace
}  // namespace fia::test
