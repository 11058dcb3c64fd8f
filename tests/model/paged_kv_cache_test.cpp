// The paged KV cache (block pool, block tables) and FIA attention over it.
#include "generate/paged_kv_cache.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "generate/attention.hpp"

namespace fia::test {
namespace {

using model::PagedKvCache;

TEST(PagedKvCache, HandsOutBlocksInANonSequentialOrder) {
  PagedKvCache cache(2, 4, 4, 12, DType::F32, 7);
  const int a = cache.add_sequence(), b = cache.add_sequence();
  EXPECT_EQ(cache.free_blocks(), 12);
  // The two sequences grow in turn, as in batched decode.
  for (int len = 1; len <= 20; ++len) {
    ASSERT_TRUE(cache.reserve(a, len).ok());
    if (len <= 16) {
      ASSERT_TRUE(cache.reserve(b, len).ok());
    }
  }
  EXPECT_EQ(cache.blocks(a).size(), 5u);
  EXPECT_EQ(cache.blocks(b).size(), 4u);
  EXPECT_EQ(cache.free_blocks(), 3);
  std::set<int> all;
  for (int id : cache.blocks(a)) all.insert(id);
  for (int id : cache.blocks(b)) all.insert(id);
  EXPECT_EQ(all.size(), 9u);  // disjoint
  EXPECT_GE(*all.begin(), 0);
  EXPECT_LT(*all.rbegin(), 12);
  EXPECT_FALSE(std::is_sorted(cache.blocks(a).begin(), cache.blocks(a).end()));
}

TEST(PagedKvCache, BlockTablePadsWithMinusOneAndReusesReleasedBlocks) {
  PagedKvCache cache(1, 2, 3, 6, DType::F32, 1);
  const int a = cache.add_sequence(), b = cache.add_sequence();
  ASSERT_TRUE(cache.reserve(a, 7).ok());  // 3 blocks
  ASSERT_TRUE(cache.reserve(b, 2).ok());  // 1 block
  const int seqs[] = {a, b};
  const std::int64_t lengths[] = {7, 2};
  const model::BlockTable t = cache.block_table(seqs, lengths);
  EXPECT_EQ(t.batch, 2);
  EXPECT_EQ(t.max_blocks, 3);
  EXPECT_EQ(t.lengths, std::vector<std::int64_t>({7, 2}));
  const auto& ba = cache.blocks(a);
  EXPECT_EQ(t.ids, std::vector<std::int32_t>({ba[0], ba[1], ba[2], cache.blocks(b)[0], -1, -1}));

  const std::vector<std::int32_t> released = ba;
  cache.release(a);
  EXPECT_TRUE(cache.blocks(a).empty());
  EXPECT_EQ(cache.free_blocks(), 5);
  const int c = cache.add_sequence();
  ASSERT_TRUE(cache.reserve(c, 9).ok());
  for (int id : cache.blocks(c)) EXPECT_NE(std::find(released.begin(), released.end(), id), released.end());
  EXPECT_FALSE(cache.reserve(c, 100).ok());  // the pool runs out
}

TEST(PagedKvCache, WritesConvertToTheCacheDtype) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    PagedKvCache cache(2, 3, 2, 4, dt, 3);
    const int s = cache.add_sequence();
    ASSERT_TRUE(cache.reserve(s, 5).ok());
    const float k[] = {1.0f, -2.5f, 0.1f}, v[] = {3.0f, 1e-3f, -7.25f};
    cache.write(1, s, 4, k, v);
    const double tol = dt == DType::F32 ? 0 : (dt == DType::F16 ? 1e-3 : 1e-2);
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(cache.read(1, s, 4, i, false), k[i], tol * std::fabs(k[i]));
      EXPECT_NEAR(cache.read(1, s, 4, i, true), v[i], tol * std::fabs(v[i]));
    }
    EXPECT_EQ(cache.key_pool(1).shape, std::vector<std::int64_t>({4, 2, 3}));
    EXPECT_EQ(cache.key_pool(1).dtype, dt);
  }
}

/// Causal GQA attention in double precision: sequence rows end at the last cached token.
std::vector<double> naive_attention(const PagedKvCache& cache, const model::ModelConfig& c,
                                    const std::vector<int>& seqs, const std::vector<std::int64_t>& lengths, int q_len,
                                    const std::vector<float>& q) {
  const int hs = c.head_size(), g = c.n_heads / c.n_kv_heads;
  std::vector<double> out(q.size());
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    for (int i = 0; i < q_len; ++i) {
      const std::int64_t visible = lengths[b] - q_len + i + 1;
      const std::size_t row = (b * q_len + i) * c.dim;
      for (int h = 0; h < c.n_heads; ++h) {
        std::vector<double> s(visible);
        double m = -1e300, l = 0;
        for (std::int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int d = 0; d < hs; ++d) dot += q[row + h * hs + d] * cache.read(0, seqs[b], j, (h / g) * hs + d, false);
          s[j] = dot / std::sqrt(static_cast<double>(hs));
          m = std::max(m, s[j]);
        }
        for (auto& x : s) l += (x = std::exp(x - m));
        for (int d = 0; d < hs; ++d) {
          double acc = 0;
          for (std::int64_t j = 0; j < visible; ++j) acc += s[j] * cache.read(0, seqs[b], j, (h / g) * hs + d, true);
          out[row + h * hs + d] = acc / l;
        }
      }
    }
  }
  return out;
}

TEST(PagedAttention, PrefillAndBatchedDecodeMatchNaiveCausalAttention) {
  model::ModelConfig c;
  c.dim = 64;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (Backend backend : {Backend::kCpu, Backend::kReference}) {
    PagedKvCache cache(1, c.kv_dim(), 5, 40, DType::F32, 9);
    Options opt;
    opt.backend = backend;
    model::PagedAttention attention(c, cache, opt);
    const std::vector<std::int64_t> prompt = {37, 1, 12};  // one sequence per prompt length
    std::vector<int> seqs;
    for (std::int64_t len : prompt) {
      const int s = cache.add_sequence();
      seqs.push_back(s);
      ASSERT_TRUE(cache.reserve(s, len + 1).ok());
      std::vector<float> k(c.kv_dim()), v(c.kv_dim());
      for (std::int64_t p = 0; p <= len; ++p) {
        for (auto& x : k) x = normal(rng);
        for (auto& x : v) x = normal(rng);
        cache.write(0, s, p, k.data(), v.data());
      }
      // Prefill of the prompt: Q_S = len, causal.
      std::vector<float> q(len * c.dim), out(q.size());
      for (auto& x : q) x = normal(rng);
      const std::vector<std::int64_t> lengths = {len};
      const model::BlockTable t = cache.block_table(std::vector<int>{s}, lengths);
      ASSERT_TRUE(attention.run(0, t, len, q.data(), out.data(), true).ok());
      const std::vector<double> want = naive_attention(cache, c, {s}, lengths, static_cast<int>(len), q);
      for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5) << "prefill row " << i / c.dim;
    }
    // One decode step of the three sequences together (token len of each).
    std::vector<std::int64_t> lengths;
    for (std::int64_t len : prompt) lengths.push_back(len + 1);
    std::vector<float> q(seqs.size() * c.dim), out(q.size());
    for (auto& x : q) x = normal(rng);
    const model::BlockTable t = cache.block_table(seqs, lengths);
    ASSERT_TRUE(attention.run(0, t, 1, q.data(), out.data(), false).ok());
    const std::vector<double> want = naive_attention(cache, c, seqs, lengths, 1, q);
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-5) << "decode row " << i / c.dim;
    EXPECT_EQ(attention.stats().prefill_calls, 3);
    EXPECT_EQ(attention.stats().decode_calls, 1);
  }
}

}  // namespace
}  // namespace fia::test
