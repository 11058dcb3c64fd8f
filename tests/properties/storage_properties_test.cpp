// KV storage modes are only different ways to address the same logical KV (FIA-SPEC 7.4, 9-11):
// each stored form must give the cpu backend's output of its plain contiguous form bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>

#include "support/call_builder.hpp"
#include "support/expectations.hpp"
#include "support/paged_cache.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

constexpr int kCases = 40;

/// Element (b, h, s, d) of a contiguous BNSD tensor (B, H, S, D).
std::size_t bnsd(const OwnedTensor& t, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  const auto& x = t.shape;
  return static_cast<std::size_t>(((b * x[1] + h) * x[2] + s) * x[3] + d);
}

void copy_elem(OwnedTensor& dst, std::size_t di, const void* src, std::size_t si) {
  const std::size_t es = dtype_size(dst.dtype);
  std::memcpy(dst.bytes.data() + di * es, static_cast<const std::byte*>(src) + si * es, es);
}

Outputs run_cpu(const FiaArgs& a, const std::string& what) {
  Outputs o;
  const Status st = run_call(a, Backend::kCpu, 2, &o);
  EXPECT_TRUE(st.ok()) << what << ": " << st.to_string();
  return o;
}

class PagedEqualsContiguous : public ::testing::TestWithParam<int> {};

TEST_P(PagedEqualsContiguous, BitIdentical) {
  const CallSpec spec = storage_spec(GetParam(), KvStorage::kPaged);
  TestCall paged = build_call(spec, GetParam());
  const TestCall flat = as_contiguous(paged.args);
  expect_same_bits(paged.args, "paged", flat.args, "contiguous", describe(spec));
}

// A block table is read through its strides (FIA-SPEC 9.1): one whose ids sit every other int32,
// with ids past the pool between them, gives the contiguous table's bits on both backends.
TEST_P(PagedEqualsContiguous, StridedBlockTable) {
  const CallSpec spec = storage_spec(GetParam(), KvStorage::kPaged);
  TestCall paged = build_call(spec, GetParam());
  const TensorView& bt = paged.args.block_table;
  const std::int64_t rows = bt.shape[0], cols = bt.shape[1];
  OwnedTensor wide(DType::I32, {rows, 2 * cols});
  auto* w = reinterpret_cast<std::int32_t*>(wide.bytes.data());
  const auto* t = static_cast<const std::int32_t*>(bt.data);
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    w[2 * i] = t[i];
    w[2 * i + 1] = std::numeric_limits<std::int32_t>::max();
  }
  TestCall strided;
  strided.args = paged.args;
  TensorView view = strided.keep(std::move(wide));
  view.shape = bt.shape;
  view.strides = {2 * cols, 2};
  strided.args.block_table = view;
  for (Backend backend : {Backend::kCpu, Backend::kReference}) {
    Outputs x, y;
    ASSERT_TRUE(run_call(paged.args, backend, 2, &x).ok());
    const Status st = run_call(strided.args, backend, 2, &y);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(x.attention_out.bytes, y.attention_out.bytes) << describe(spec);
    EXPECT_EQ(x.softmax_lse.bytes, y.softmax_lse.bytes) << describe(spec);
  }
}

class TensorListEqualsPadded : public ::testing::TestWithParam<int> {};

TEST_P(TensorListEqualsPadded, BitIdentical) {
  const CallSpec spec = storage_spec(GetParam() + 100, KvStorage::kTensorList);
  TestCall list = build_call(spec, GetParam());
  const FiaArgs& a = list.args;
  const std::int64_t B = spec.batch, KVN = spec.num_kv_heads, D = spec.qk_dim;
  std::int64_t S = 0;
  for (const auto& k : a.key) S = std::max(S, k.shape[2]);
  TestCall flat;
  flat.args = a;
  for (int which = 0; which < 2; ++which) {
    OwnedTensor t(spec.dtype, {B, KVN, S, D});
    for (std::int64_t b = 0; b < B; ++b) {
      const TensorView& src = which ? a.value[b] : a.key[b];
      for (std::int64_t h = 0; h < KVN; ++h)
        for (std::int64_t tok = 0; tok < src.shape[2]; ++tok)
          for (std::int64_t d = 0; d < D; ++d)
            copy_elem(t, bnsd(t, b, h, tok, d), src.data, static_cast<std::size_t>((h * src.shape[2] + tok) * D + d));
    }
    const TensorView kept = flat.keep(std::move(t));
    if (which) flat.args.value = {kept};
    else flat.args.key = {kept};
  }
  expect_same_bits(list.args, "list", flat.args, "padded", describe(spec));
}

class PrefixEqualsConcatenation : public ::testing::TestWithParam<int> {};

TEST_P(PrefixEqualsConcatenation, BitIdentical) {
  CallSpec spec = storage_spec(GetParam() + 200, KvStorage::kContiguous);
  spec.prefix_seq = 1 + GetParam() % 17;
  if (GetParam() % 2) spec.prefix_len = GetParam() % (spec.prefix_seq + 1);
  TestCall pre = build_call(spec, GetParam());
  const FiaArgs& a = pre.args;
  const std::int64_t B = spec.batch, KVN = spec.num_kv_heads, D = spec.qk_dim;
  const std::int64_t P = spec.prefix_len.value_or(spec.prefix_seq), S = spec.kv_seq;
  TestCall cat;
  cat.args = a;
  cat.args.key_shared_prefix = {};
  cat.args.value_shared_prefix = {};
  cat.args.actual_shared_prefix_len.reset();
  std::vector<std::int64_t> kv = *a.actual_seq_lengths_kv;
  for (auto& v : kv) v += P;
  cat.args.actual_seq_lengths_kv = kv;
  for (int which = 0; which < 2; ++which) {
    const TensorView& prefix = which ? a.value_shared_prefix : a.key_shared_prefix;
    const TensorView& own = which ? a.value[0] : a.key[0];
    OwnedTensor t(spec.dtype, {B, KVN, P + S, D});
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < KVN; ++h)
        for (std::int64_t tok = 0; tok < P + S; ++tok)
          for (std::int64_t d = 0; d < D; ++d) {
            if (tok < P) copy_elem(t, bnsd(t, b, h, tok, d), prefix.data, static_cast<std::size_t>((h * prefix.shape[2] + tok) * D + d));
            else copy_elem(t, bnsd(t, b, h, tok, d), own.data, static_cast<std::size_t>(((b * KVN + h) * S + tok - P) * D + d));
          }
    const TensorView kept = cat.keep(std::move(t));
    if (which) cat.args.value = {kept};
    else cat.args.key = {kept};
  }
  expect_same_bits(pre.args, "prefix", cat.args, "concatenated", describe(spec));
}

class LeftPaddingEqualsUnpadded : public ::testing::TestWithParam<int> {};

TEST_P(LeftPaddingEqualsUnpadded, BitIdentical) {
  CallSpec spec = storage_spec(GetParam() + 300, KvStorage::kContiguous);
  std::mt19937_64 rng(GetParam());
  spec.q_seq = std::max<std::int64_t>(spec.q_seq, 2);  // query padding applies to Q_S > 1
  std::vector<std::int64_t> q(spec.batch);
  for (auto& v : q) v = static_cast<std::int64_t>(rng() % (spec.q_seq + 1));
  spec.act_q = q;
  const std::int64_t max_q = *std::max_element(q.begin(), q.end());
  const std::int64_t max_kv = *std::max_element(spec.act_kv->begin(), spec.act_kv->end());
  spec.query_padding = static_cast<std::int64_t>(rng() % (spec.q_seq - max_q + 1));
  spec.kv_padding = static_cast<std::int64_t>(rng() % (spec.kv_seq - max_kv + 1));
  if (spec.mask == MaskKind::kFull) spec.mask_batch_broadcast = false;
  spec.pse_batch_broadcast = false;
  if (spec.sparse_mode == 0) spec.pre_tokens = spec.next_tokens = kIntMax;  // padding ignores them
  TestCall pad = build_call(spec, GetParam());
  const FiaArgs& a = pad.args;
  const std::int64_t B = spec.batch, N = spec.num_heads, KVN = spec.num_kv_heads, D = spec.qk_dim;
  const std::int64_t QS = spec.q_seq, KS = spec.kv_seq;
  std::vector<std::int64_t> q0(B), k0(B);
  for (std::int64_t b = 0; b < B; ++b) {
    q0[b] = QS - *spec.query_padding - q[b];
    k0[b] = KS - *spec.kv_padding - (*spec.act_kv)[b];
  }
  TestCall un;
  un.args = a;
  un.args.query_padding_size = {};
  un.args.kv_padding_size = {};
  auto shift = [&](const TensorView& src, std::int64_t heads, std::int64_t seq, const std::vector<std::int64_t>& start) {
    OwnedTensor t(src.dtype, src.shape);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t s = 0; s + start[b] < seq; ++s)
          for (std::int64_t d = 0; d < D; ++d)
            copy_elem(t, bnsd(t, b, h, s, d), src.data, bnsd(t, b, h, s + start[b], d));
    return t;
  };
  un.args.query = un.keep(shift(a.query, N, QS, q0));
  un.args.key = {un.keep(shift(a.key[0], KVN, KS, k0))};
  un.args.value = {un.keep(shift(a.value[0], KVN, KS, k0))};
  // Masks and pse are read at physical coordinates: shift them too (per batch).
  auto shift_bias = [&](const TensorView& src, std::int64_t heads) {
    OwnedTensor t(src.dtype, src.shape);
    const std::int64_t R = src.shape[src.rank() - 2], C = src.shape[src.rank() - 1];
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t r = 0; r + q0[b] < R; ++r)
          for (std::int64_t c = 0; c + k0[b] < C; ++c)
            copy_elem(t, static_cast<std::size_t>(((b * heads + h) * R + r) * C + c), src.data,
                      static_cast<std::size_t>(((b * heads + h) * R + r + q0[b]) * C + c + k0[b]));
    return t;
  };
  if (spec.mask == MaskKind::kFull) un.args.atten_mask = un.keep(shift_bias(a.atten_mask, 1));
  if (spec.pse) un.args.pse_shift = un.keep(shift_bias(a.pse_shift, N));
  const Outputs x = run_cpu(pad.args, "padded"), y = run_cpu(un.args, "unpadded");
  const std::size_t es = dtype_size(spec.dtype);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t s = 0; s < QS; ++s) {
        const bool inside = s >= q0[b] && s < q0[b] + q[b];
        const auto xo = x.attention_out.bytes.begin() + static_cast<std::ptrdiff_t>(bnsd(x.attention_out, b, n, s, 0) * es);
        if (inside) {
          const auto yo = y.attention_out.bytes.begin() + static_cast<std::ptrdiff_t>(bnsd(y.attention_out, b, n, s - q0[b], 0) * es);
          EXPECT_TRUE(std::equal(xo, xo + static_cast<std::ptrdiff_t>(D * es), yo)) << "b " << b << " n " << n << " s " << s << " " << describe(spec);
          EXPECT_EQ(x.softmax_lse.as<float>()[(b * N + n) * QS + s], y.softmax_lse.as<float>()[(b * N + n) * QS + s - q0[b]]);
        } else {
          EXPECT_TRUE(std::all_of(xo, xo + static_cast<std::ptrdiff_t>(D * es), [](std::byte v) { return v == std::byte{0}; }));
          EXPECT_TRUE(std::isinf(x.softmax_lse.as<float>()[(b * N + n) * QS + s]));
        }
      }
}

class BatchIndependence : public ::testing::TestWithParam<int> {};

TEST_P(BatchIndependence, EachBatchAloneGivesTheSameRows) {
  const CallSpec spec = storage_spec(GetParam() + 400, KvStorage::kContiguous);
  TestCall all = build_call(spec, GetParam());
  const FiaArgs& a = all.args;
  const Outputs full = run_cpu(a, "batch");
  const std::int64_t B = spec.batch;
  for (std::int64_t b = 0; b < B; ++b) {
    TestCall one;
    one.args = a;
    auto slice = [&](const TensorView& t) {
      if (!t.present() || t.shape[0] == 1) return t;
      TensorView v = t;
      v.shape[0] = 1;
      v.data = static_cast<const std::byte*>(t.data) + b * t.stride(0) * static_cast<std::int64_t>(dtype_size(t.dtype));
      v.strides.clear();
      return v;
    };
    one.args.query = slice(a.query);
    one.args.key = {slice(a.key[0])};
    one.args.value = {slice(a.value[0])};
    if (a.atten_mask.rank() >= 3) one.args.atten_mask = slice(a.atten_mask);
    one.args.pse_shift = slice(a.pse_shift);
    one.args.actual_seq_lengths_kv = std::vector<std::int64_t>{(*a.actual_seq_lengths_kv)[b]};
    const Outputs alone = run_cpu(one.args, "alone");
    const std::size_t row_bytes = alone.attention_out.bytes.size();
    EXPECT_TRUE(std::equal(alone.attention_out.bytes.begin(), alone.attention_out.bytes.end(),
                           full.attention_out.bytes.begin() + static_cast<std::ptrdiff_t>(b * row_bytes)))
        << "batch " << b << " " << describe(spec);
    const std::size_t lse_bytes = alone.softmax_lse.bytes.size();
    EXPECT_TRUE(std::equal(alone.softmax_lse.bytes.begin(), alone.softmax_lse.bytes.end(),
                           full.softmax_lse.bytes.begin() + static_cast<std::ptrdiff_t>(b * lse_bytes)));
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PagedEqualsContiguous, ::testing::Range(0, kCases));
INSTANTIATE_TEST_SUITE_P(Seeds, TensorListEqualsPadded, ::testing::Range(0, kCases));
INSTANTIATE_TEST_SUITE_P(Seeds, PrefixEqualsConcatenation, ::testing::Range(0, kCases));
INSTANTIATE_TEST_SUITE_P(Seeds, LeftPaddingEqualsUnpadded, ::testing::Range(0, kCases));
INSTANTIATE_TEST_SUITE_P(Seeds, BatchIndependence, ::testing::Range(0, kCases));

}  // namespace
}  // namespace fia::test
