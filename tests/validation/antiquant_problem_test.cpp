// Valid KV-antiquant calls fill the Problem as problem.hpp promises (FIA-SPEC 12.3, 12.6, 25.1 #8):
// channel tables hold the input scales, per-token views index the right elements, KV strides
// count stored elements (int8 bytes, int32 words for packed int4).
#include <gtest/gtest.h>

#include "validation/antiquant_calls.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

using detail::Antiquant;
using detail::KvFormat;
using detail::Problem;

constexpr std::int64_t B = 2, N = 2, D = 64, S = 24, H = N * D;

AqSpec decode() {
  AqSpec s;
  s.call.layout = "BSH";
  s.call.batch = B;
  s.call.num_heads = 4;
  s.call.num_kv_heads = N;
  s.call.q_seq = 1;
  s.call.kv_seq = S;
  s.call.qk_dim = D;
  return s;
}

Problem build(const FiaArgs& a) {
  Problem p;
  const Status st = detail::build_problem(a, false, &p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return p;
}

/// channel table [h * D + d] == element h * hs + d * ds (+ base) of `t`.
void expect_table(const std::vector<float>& table, const TensorView& t, std::int64_t base, std::int64_t hs,
                  std::int64_t ds) {
  ASSERT_EQ(table.size(), static_cast<std::size_t>(N * D));
  for (std::int64_t h = 0; h < N; ++h)
    for (std::int64_t d = 0; d < D; ++d)
      ASSERT_EQ(table[h * D + d], read(t, base + h * hs + d * ds)) << "h " << h << " d " << d;
}

std::ptrdiff_t bytes(const void* p, const void* base) {
  return static_cast<const std::byte*>(p) - static_cast<const std::byte*>(base);
}

TEST(AntiquantProblem, FloatCallKeepsFloatFormat) {
  const TestCall c = build_call(decode().call, 7);
  const Problem p = build(c.args);
  EXPECT_EQ(p.kv_format, KvFormat::kFloat);
  EXPECT_EQ(p.kv_dtype, DType::F16);
  EXPECT_TRUE(p.key_antiquant.channel_scale.empty());
  EXPECT_FALSE(p.value_antiquant.per_token);
}

TEST(AntiquantProblem, PerChannelTablesAndInt8Strides) {
  AqSpec s = decode();
  s.offsets = true;
  const TestCall c = build_aq(s);
  const FiaArgs& a = c.args;
  const Problem p = build(a);
  EXPECT_EQ(p.kv_format, KvFormat::kInt8);
  EXPECT_EQ(p.kv_dtype, DType::I8);
  EXPECT_EQ(p.dtype, DType::F16);
  expect_table(p.key_antiquant.channel_scale, a.key_antiquant_scale, 0, D, 1);
  expect_table(p.key_antiquant.channel_offset, a.key_antiquant_offset, 0, D, 1);
  expect_table(p.value_antiquant.channel_scale, a.value_antiquant_scale, 0, D, 1);
  expect_table(p.value_antiquant.channel_offset, a.value_antiquant_offset, 0, D, 1);
  EXPECT_FALSE(p.key_antiquant.per_token);
  // KV strides in int8 elements: BSH (B, S, H).
  const auto& rows = p.segments.back().key.batch;
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].head_stride, D);
  EXPECT_EQ(rows[1].token_stride, H);
  EXPECT_EQ(bytes(rows[1].base, a.key[0].data), S * H);
  EXPECT_EQ(bytes(p.locate(1, 1, 5).key, a.key[0].data), S * H + 5 * H + D);
}

TEST(AntiquantProblem, StridedChannelScale) {
  TestCall c = build_aq(decode());
  // (N, D) read through a transposed (D, N) tensor: element (h, d) at d * N + h.
  c.args.key_antiquant_scale = ramp(c, DType::F16, {D, N}, 0.5f, 0.003f);
  c.args.key_antiquant_scale.shape = {N, D};
  c.args.key_antiquant_scale.strides = {1, N};
  const Problem p = build(c.args);
  expect_table(p.key_antiquant.channel_scale, c.args.key_antiquant_scale, 0, 1, N);
}

TEST(AntiquantProblem, CombinedChannelSlices) {
  AqSpec s = decode();
  s.combined = true;
  s.offsets = true;
  TestCall c = build_aq(s);
  c.args.antiquant_scale = ramp(c, DType::BF16, {2, N, 1, D}, 0.5f, 0.01f);
  c.args.antiquant_offset = ramp(c, DType::BF16, {2, N, 1, D}, -1.0f, 0.02f);
  const Problem p = build(c.args);
  expect_table(p.key_antiquant.channel_scale, c.args.antiquant_scale, 0, D, 1);
  expect_table(p.value_antiquant.channel_scale, c.args.antiquant_scale, H, D, 1);
  expect_table(p.value_antiquant.channel_offset, c.args.antiquant_offset, H, D, 1);
}

TEST(AntiquantProblem, PerTensorAndPerHeadRepeat) {
  AqSpec s = decode();
  s.per_tensor = true;
  TestCall c = build_aq(s);
  Problem p = build(c.args);
  expect_table(p.key_antiquant.channel_scale, c.args.key_antiquant_scale, 0, 0, 0);
  expect_table(p.value_antiquant.channel_scale, c.args.value_antiquant_scale, 0, 0, 0);
  s.per_tensor = false;
  s.key_mode = s.value_mode = 2;
  TestCall h = build_aq(s);
  p = build(h.args);
  expect_table(p.key_antiquant.channel_scale, h.args.key_antiquant_scale, 0, 1, 0);
}

/// token factor of (b, h, logical column j) through the Problem's view.
float token(const Antiquant& q, const float* base, std::int64_t b, std::int64_t h, std::int64_t j) {
  return base[b * q.batch_stride + h * q.head_stride + (j + q.column_offset[b]) * q.token_stride];
}

TEST(AntiquantProblem, PerTokenFollowsLeftPadding) {
  AqSpec s = decode();
  s.key_mode = s.value_mode = 1;
  s.offsets = true;
  s.call.act_kv = std::vector<std::int64_t>{10, 20};
  s.call.kv_padding = 2;  // window of batch b starts at 24 - 2 - act_kv[b] = 12, 2
  const TestCall c = build_aq(s);
  const FiaArgs& a = c.args;
  const Problem p = build(a);
  const Antiquant& k = p.key_antiquant;
  EXPECT_TRUE(k.per_token);
  EXPECT_FALSE(k.paged);
  EXPECT_TRUE(k.channel_scale.empty());
  EXPECT_EQ(k.token_scale, a.key_antiquant_scale.data);
  EXPECT_EQ(k.token_offset, a.key_antiquant_offset.data);
  EXPECT_EQ(k.column_offset, (std::vector<std::int64_t>{12, 2}));
  EXPECT_EQ(k.column_offset, p.kv_col_offset);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < p.segments.back().length[b]; ++j) {
      const std::int64_t phys = b * S + (S - 2 - (b ? 20 : 10)) + j;
      ASSERT_EQ(token(k, k.token_scale, b, 1, j), read(a.key_antiquant_scale, phys));
      ASSERT_EQ(token(p.value_antiquant, p.value_antiquant.token_offset, b, 0, j), read(a.value_antiquant_offset, phys));
    }
}

TEST(AntiquantProblem, PerTokenShapesAndPrefix) {
  AqSpec s = decode();
  s.key_mode = s.value_mode = 3;
  s.call.prefix_seq = 3;
  const TestCall c = build_aq(s);
  const Problem p = build(c.args);
  const std::int64_t cols = S + 3;  // prefix-inclusive axis (25.1 #8)
  const Antiquant& v = p.value_antiquant;
  EXPECT_EQ(v.batch_stride, N * cols);
  EXPECT_EQ(v.head_stride, cols);
  EXPECT_EQ(v.token_stride, 1);
  EXPECT_EQ(v.column_offset, (std::vector<std::int64_t>{0, 0}));
  EXPECT_EQ(token(v, v.token_scale, 1, 1, 26), read(c.args.value_antiquant_scale, (1 * N + 1) * cols + 26));

  // (1, B, S') skips the leading 1.
  AqSpec t = decode();
  t.key_mode = t.value_mode = 1;
  TestCall d = build_aq(t);
  d.args.key_antiquant_scale.shape = {1, B, S};
  const Problem q = build(d.args);
  EXPECT_EQ(q.key_antiquant.batch_stride, S);
  EXPECT_EQ(q.key_antiquant.head_stride, 0);
  EXPECT_EQ(q.key_antiquant.token_stride, 1);
}

TEST(AntiquantProblem, CombinedPerTokenSlices) {
  AqSpec s = decode();
  s.combined = true;
  s.key_mode = 1;
  s.offsets = true;
  const TestCall c = build_aq(s);
  const Problem p = build(c.args);
  const auto* scale = static_cast<const float*>(c.args.antiquant_scale.data);
  const auto* offset = static_cast<const float*>(c.args.antiquant_offset.data);
  EXPECT_EQ(p.key_antiquant.token_scale, scale);
  EXPECT_EQ(p.value_antiquant.token_scale, scale + B * S);
  EXPECT_EQ(p.value_antiquant.token_offset, offset + B * S);
  EXPECT_EQ(p.value_antiquant.batch_stride, S);
}

TEST(AntiquantProblem, PagedScaleModes) {
  AqSpec s = decode();
  s.call.storage = KvStorage::kPaged;
  s.call.block_size = 32;
  s.call.act_kv = std::vector<std::int64_t>{20, 40};
  s.key_mode = s.value_mode = 4;
  TestCall c4 = build_aq(s);
  Problem p = build(c4.args);
  EXPECT_TRUE(p.key_antiquant.paged);
  EXPECT_EQ(p.key_antiquant.block_stride, 32);
  EXPECT_EQ(p.key_antiquant.head_stride, 0);
  EXPECT_EQ(p.key_antiquant.token_stride, 1);
  s.key_mode = s.value_mode = 5;
  s.offsets = true;
  TestCall c5 = build_aq(s);
  p = build(c5.args);
  const Antiquant& v = p.value_antiquant;
  EXPECT_TRUE(v.paged);
  EXPECT_EQ(v.block_stride, N * 32);
  EXPECT_EQ(v.head_stride, 32);
  EXPECT_EQ(v.token_stride, 1);
  EXPECT_EQ(v.token_offset, c5.args.value_antiquant_offset.data);
  // Token t = 33 of batch 1 lives in block_table[1][1], slot 1.
  const auto& seg = p.segments.back();
  const std::int32_t blk = seg.block_table[1 * seg.table_stride + 1];
  EXPECT_EQ(v.token_scale[blk * v.block_stride + 1 * v.head_stride + 1 * v.token_stride],
            read(c5.args.value_antiquant_scale, (blk * N + 1) * 32 + 1));
}

TEST(AntiquantProblem, KeyPerChannelValuePerToken) {
  AqSpec s = decode();
  s.value_mode = 1;
  const TestCall c = build_aq(s);
  const Problem p = build(c.args);
  EXPECT_FALSE(p.key_antiquant.per_token);
  EXPECT_EQ(p.key_antiquant.channel_scale.size(), static_cast<std::size_t>(N * D));
  EXPECT_TRUE(p.value_antiquant.per_token);
  EXPECT_TRUE(p.value_antiquant.channel_scale.empty());
}

TEST(AntiquantProblem, Int4StridesCountWords) {
  AqSpec s = decode();
  s.kv = DType::I32;
  const TestCall c = build_aq(s);
  const Problem p = build(c.args);
  EXPECT_EQ(p.kv_format, KvFormat::kInt4);
  EXPECT_EQ(p.kv_dtype, DType::I32);
  EXPECT_EQ(p.qk_dim, D);
  EXPECT_EQ(p.v_dim, D);
  const auto& rows = p.segments.back().key.batch;
  EXPECT_EQ(rows[1].head_stride, D / 8);
  EXPECT_EQ(rows[1].token_stride, H / 8);
  EXPECT_EQ(bytes(p.locate(1, 1, 5).key, c.args.key[0].data), 4 * (S * H / 8 + 5 * H / 8 + D / 8));
  EXPECT_EQ(p.out_shape, (std::vector<std::int64_t>{B, 1, 4 * D}));

  // BNSD with a shared prefix: the prefix is packed the same way.
  s.call.layout = "BNSD";
  s.call.prefix_seq = 3;
  const TestCall n = build_aq(s);
  const Problem q = build(n.args);
  ASSERT_EQ(q.segments.size(), 2u);
  EXPECT_EQ(q.segments[0].key.batch[0].head_stride, 3 * D / 8);
  EXPECT_EQ(q.segments[0].key.batch[0].token_stride, D / 8);
  EXPECT_EQ(q.segments[1].value.batch[1].head_stride, S * D / 8);
  EXPECT_EQ(bytes(q.locate(1, 1, 3 + 2).value, n.args.value[0].data), 4 * (N * S * D / 8 + S * D / 8 + 2 * D / 8));

  // Paged (block_num, block_size, H/8) pool: default mode only (strict rejects int4 + paged).
  s.call.layout = "BSH";
  s.call.prefix_seq = 0;
  s.call.storage = KvStorage::kPaged;
  s.call.block_size = 32;
  const TestCall g = build_aq(s);
  const Problem r = build(g.args);
  const auto& seg = r.segments.back();
  EXPECT_EQ(seg.key.block_stride, 32 * H / 8);
  EXPECT_EQ(seg.key.head_stride, D / 8);
  EXPECT_EQ(seg.key.token_stride, H / 8);
}

}  // namespace
}  // namespace fia::test
