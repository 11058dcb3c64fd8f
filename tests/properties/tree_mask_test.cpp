// The tree mask of speculative decoding (sparse_mode 9, FIA-SPEC 6.5): a call with it equals the
// same call with the explicit full mask it stands for (earlier keys visible, the last act_q keys
// per the tree), on both backends, for BNSD/BSH GQA, decode MLA, MLA full quant over NZ caches and
// the concatenated token-layout form; the cpu backend matches the reference; and its rules (mask shape, act_q <= act_kv, no left
// padding; strict: no pse, prefix, int8 output, quantized inputs).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <random>

#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/mla_full_quant_builder.hpp"
#include "support/nz_cache.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

/// A random tree (each draft token sees itself), for batch lengths act_q.
std::vector<std::vector<std::uint8_t>> random_trees(const std::vector<std::int64_t>& act_q, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution masked(0.5);
  std::vector<std::vector<std::uint8_t>> trees;
  for (std::int64_t q : act_q) {
    std::vector<std::uint8_t> t(static_cast<std::size_t>(q * q));
    for (std::int64_t i = 0; i < q; ++i)
      for (std::int64_t k = 0; k < q; ++k) t[i * q + k] = i == k ? 0 : masked(rng);
    trees.push_back(std::move(t));
  }
  return trees;
}

/// The tree mask tensor: (B, Q_S, Q_S), or 1-D (sum act_q^2) for token layouts.
OwnedTensor tree_tensor(const std::vector<std::vector<std::uint8_t>>& trees, const std::vector<std::int64_t>& act_q,
                        std::int64_t q_seq, bool token_layout, DType dtype) {
  const auto B = static_cast<std::int64_t>(trees.size());
  std::int64_t flat = 0;
  for (std::int64_t q : act_q) flat += q * q;
  OwnedTensor m(dtype, token_layout ? std::vector<std::int64_t>{flat} : std::vector<std::int64_t>{B, q_seq, q_seq});
  auto* v = m.as<std::uint8_t>();
  std::fill(v, v + m.numel(), std::uint8_t{1});  // beyond act_q: unread
  std::int64_t at = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t q = act_q[b];
    for (std::int64_t i = 0; i < q; ++i)
      for (std::int64_t k = 0; k < q; ++k)
        v[token_layout ? at + i * q + k : (b * q_seq + i) * q_seq + k] = trees[b][i * q + k];
    at += q * q;
  }
  return m;
}

/// The explicit full mask (B, Q_S, KV_S) of the same visibility, for sparse_mode 0.
OwnedTensor explicit_mask(const std::vector<std::vector<std::uint8_t>>& trees, const std::vector<std::int64_t>& act_q,
                          const std::vector<std::int64_t>& act_kv, std::int64_t q_seq, std::int64_t kv_seq) {
  const auto B = static_cast<std::int64_t>(trees.size());
  OwnedTensor m(DType::Bool, {B, q_seq, kv_seq});
  auto* v = m.as<std::uint8_t>();
  std::fill(v, v + m.numel(), std::uint8_t{0});
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t q = act_q[b], start = act_kv[b] - q;
    for (std::int64_t i = 0; i < q; ++i)
      for (std::int64_t k = 0; k < q; ++k) v[(b * q_seq + i) * kv_seq + start + k] = trees[b][i * q + k];
  }
  return m;
}

struct Shape {
  std::string layout;
  std::int64_t qk_dim, rope_dim;
};

TEST(TreeMask, EqualsTheExplicitMaskOnBothBackends) {
  for (const Shape& sh : {Shape{"BNSD", 64, 0}, Shape{"BSH", 64, 0}, Shape{"BSND", 512, 64}}) {
    CallSpec s;
    s.layout = sh.layout;
    s.batch = 3;
    s.num_heads = sh.rope_dim ? 8 : 4;
    s.num_kv_heads = sh.rope_dim ? 1 : 2;
    s.q_seq = 5;
    s.kv_seq = 700;
    s.qk_dim = sh.qk_dim;
    s.rope_dim = sh.rope_dim;
    s.act_q = std::vector<std::int64_t>{5, 3, 4};
    s.act_kv = std::vector<std::int64_t>{700, 4, 333};
    s.lse = true;
    const auto trees = random_trees(*s.act_q, 3);
    TestCall tree = build_call(s, 21), full = build_call(s, 21);
    tree.args.sparse_mode = 9;
    tree.args.atten_mask = tree.keep(tree_tensor(trees, *s.act_q, s.q_seq, false, DType::U8));
    full.args.atten_mask = full.keep(explicit_mask(trees, *s.act_q, *s.act_kv, s.q_seq, s.kv_seq));
    Outputs cpu, ref;
    for (const Backend backend : {Backend::kCpu, Backend::kReference}) {
      Outputs a, b;
      ASSERT_TRUE(run_call(tree.args, backend, 2, &a).ok()) << sh.layout;
      ASSERT_TRUE(run_call(full.args, backend, 2, &b).ok()) << sh.layout;
      EXPECT_EQ(a.attention_out.bytes, b.attention_out.bytes) << sh.layout;
      EXPECT_EQ(a.softmax_lse.bytes, b.softmax_lse.bytes) << sh.layout;
      (backend == Backend::kCpu ? cpu : ref) = std::move(a);
    }
    detail::ReferenceResult exact;
    ASSERT_TRUE(reference_exact(tree.args, &exact).ok());
    const Verdict v = criterion_a(cpu.attention_out, exact.out);
    EXPECT_TRUE(v.pass) << sh.layout << ": " << v.detail;
  }
}

// MLA full quantization (13.3) with the tree mask, over NZ caches as the NPU reads them.
TEST(TreeMask, MlaFullQuantEqualsTheExplicitMaskOnBothBackends) {
  CallSpec s;
  s.layout = "BSND";
  s.batch = 2;
  s.num_heads = 8;
  s.num_kv_heads = 1;
  s.q_seq = 4;
  s.kv_seq = 640;
  s.qk_dim = 512;
  s.rope_dim = 64;
  s.act_q = std::vector<std::int64_t>{4, 3};
  s.act_kv = std::vector<std::int64_t>{600, 130};
  s.storage = KvStorage::kPaged;
  s.paged_bnbsd = true;
  s.block_size = 128;
  s.lse = true;
  const auto trees = random_trees(*s.act_q, 5);
  const MlaFullQuantCall built = build_mla_full_quant_call(s, 8);
  TestCall tree = as_nz(built.call.args);
  TestCall full = as_nz(built.call.args);
  tree.args.sparse_mode = 9;
  tree.args.atten_mask = tree.keep(tree_tensor(trees, *s.act_q, s.q_seq, false, DType::Bool));
  full.args.sparse_mode = 0;
  const std::int64_t width = full.args.block_table.shape[1] * s.block_size;  // 9.3: the mask spans the table
  full.args.atten_mask = full.keep(explicit_mask(trees, *s.act_q, *s.act_kv, s.q_seq, width));
  for (const Backend backend : {Backend::kCpu, Backend::kReference}) {
    Outputs a, b;
    const Status st = run_call(tree.args, backend, 2, &a);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const Status sf = run_call(full.args, backend, 2, &b);
    ASSERT_TRUE(sf.ok()) << sf.to_string();
    EXPECT_EQ(a.attention_out.bytes, b.attention_out.bytes);
    EXPECT_EQ(a.softmax_lse.bytes, b.softmax_lse.bytes);
  }
  EXPECT_TRUE(plan_status(tree.args, true).ok()) << plan_status(tree.args, true).to_string();
}

TEST(TreeMask, TokenLayoutConcatenatesThePerBatchMatrices) {
  CallSpec s;
  s.layout = "TND";
  s.batch = 3;
  s.num_heads = 4;
  s.num_kv_heads = 1;
  s.q_seq = 4;
  s.kv_seq = 60;
  s.qk_dim = 64;
  s.act_q = std::vector<std::int64_t>{4, 2, 3};
  s.act_kv = std::vector<std::int64_t>{60, 9, 3};
  s.lse = true;
  const auto trees = random_trees(*s.act_q, 4);
  TestCall tree = build_call(s, 22);
  tree.args.sparse_mode = 9;
  tree.args.atten_mask = tree.keep(tree_tensor(trees, *s.act_q, s.q_seq, true, DType::Bool));
  // Each batch alone, a one-batch TND call over the same token rows with its own tree, must give
  // the same rows bit for bit.
  Outputs whole;
  ASSERT_TRUE(run_call(tree.args, Backend::kCpu, 2, &whole).ok());
  detail::ReferenceResult exact;
  ASSERT_TRUE(reference_exact(tree.args, &exact).ok());
  const Verdict v = criterion_a(whole.attention_out, exact.out);
  EXPECT_TRUE(v.pass) << v.detail;
  std::int64_t row0 = 0, kv0 = 0;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    CallSpec one = s;
    one.batch = 1;
    one.q_seq = (*s.act_q)[b];
    one.kv_seq = (*s.act_kv)[b];
    one.act_q = std::vector<std::int64_t>{one.q_seq};
    one.act_kv = std::vector<std::int64_t>{one.kv_seq};
    TestCall call = build_call(one, 22);
    auto slice = [](const TensorView& t, std::int64_t first, std::int64_t rows) {
      TensorView x = t;
      x.data = static_cast<const std::byte*>(t.data) + first * t.stride(0) * 2;
      x.shape[0] = rows;
      x.strides = {t.stride(0), t.stride(1), t.stride(2)};
      return x;
    };
    call.args.query = slice(tree.args.query, row0, one.q_seq);
    call.args.key = {slice(tree.args.key[0], kv0, one.kv_seq)};
    call.args.value = {slice(tree.args.value[0], kv0, one.kv_seq)};
    call.args.sparse_mode = 9;
    call.args.atten_mask = call.keep(tree_tensor({trees[b]}, {one.q_seq}, one.q_seq, true, DType::Bool));
    Outputs part;
    ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &part).ok()) << b;
    const std::size_t row_bytes = static_cast<std::size_t>(s.num_heads * s.qk_dim) * 2;
    EXPECT_EQ(0, std::memcmp(part.attention_out.bytes.data(), whole.attention_out.bytes.data() + row0 * row_bytes,
                             row_bytes * static_cast<std::size_t>(one.q_seq)))
        << "batch " << b;
    row0 += one.q_seq;
    kv0 += one.kv_seq;
  }
}

Status tree_status(const std::function<void(CallSpec&)>& spec_edit, const std::function<void(TestCall&)>& call_edit,
                   bool strict) {
  CallSpec s;
  s.layout = "BNSD";
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = 3;
  s.kv_seq = 40;
  s.qk_dim = 64;
  s.act_kv = std::vector<std::int64_t>{40, 20};
  spec_edit(s);
  TestCall call = build_call(s, 5);
  call.args.sparse_mode = 9;
  call.args.atten_mask = call.keep(OwnedTensor(DType::Bool, {s.batch, s.q_seq, s.q_seq}));
  call_edit(call);
  return plan_status(call.args, strict);
}

TEST(TreeMask, Rules) {
  auto none = [](auto&) {};
  EXPECT_TRUE(tree_status(none, none, true).ok()) << tree_status(none, none, true).to_string();
  struct Case {
    const char* what;
    std::function<void(CallSpec&)> spec;
    std::function<void(TestCall&)> call;
    const char* parameter;
    bool strict;
  };
  const Case cases[] = {
      {"no mask", none, [](TestCall& c) { c.args.atten_mask = {}; }, "atten_mask", false},
      {"mask shape", none, [](TestCall& c) { c.args.atten_mask = c.keep(OwnedTensor(DType::Bool, {2, 3, 40})); },
       "atten_mask", false},
      {"mask dtype", none, [](TestCall& c) { c.args.atten_mask = c.keep(OwnedTensor(DType::F16, {2, 3, 3})); },
       "atten_mask", false},
      {"act_q > act_kv", [](CallSpec& s) { s.act_kv = std::vector<std::int64_t>{40, 2}; }, none, "actual_seq_lengths",
       false},
      {"left padding", [](CallSpec& s) { s.query_padding = 1, s.act_q = std::vector<std::int64_t>{2, 2}; }, none,
       "query_padding_size", false},
      {"pse", [](CallSpec& s) { s.pse = true; }, none, "pse_shift", true},
      {"int8 output", none,
       [](TestCall& c) {
         OwnedTensor q2(DType::F32, {1});
         q2.as<float>()[0] = 10.0f;
         c.args.quant_scale2 = c.keep(std::move(q2));
       },
       "quant_scale2", true},
  };
  for (const Case& k : cases) {
    const Status st = tree_status(k.spec, k.call, k.strict);
    EXPECT_FALSE(st.ok()) << k.what;
    EXPECT_EQ(st.parameter, k.parameter) << k.what << ": " << st.to_string();
    if (k.strict) {
      EXPECT_TRUE(tree_status(k.spec, k.call, false).ok()) << k.what << " in the default mode";
    }
  }
}

}  // namespace
}  // namespace fia::test
