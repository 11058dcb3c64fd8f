// stories260K generating through FIA: the reference outputs of llama2.c's run.c, half-precision
// KV caches, batch invariance, backends and block sizes.
#include <gtest/gtest.h>

#include <cstdio>

#include "generate/generator.hpp"
#include "generate/paged_kv_cache.hpp"
#include "generate/transformer.hpp"
#include "model/model_files.hpp"

namespace fia::test {
namespace {

#define REQUIRE_MODELS() \
  if (!have_models()) GTEST_SKIP() << "no model files in " << models_dir()

using Ids = std::vector<int>;

model::GenerationOptions greedy(int steps, DType kv = DType::F32, Backend backend = Backend::kCpu) {
  model::GenerationOptions o;
  o.steps = steps;
  o.kv_dtype = kv;
  o.fia.backend = backend;
  o.fia.threads = 1;  // the calls are tiny; ctest runs suites side by side
  return o;
}

std::vector<model::SequenceResult> run(const std::vector<std::string>& prompts, const model::GenerationOptions& o,
                                       model::GenerationStats* stats = nullptr) {
  std::vector<model::SequenceResult> r;
  const Status st = model::generate(stories260k(), tok512(), prompts, o, &r, stats);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return r;
}

std::string without_final_newline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST(Generate, GreedyEmptyPromptMatchesRunC) {
  REQUIRE_MODELS();
  model::GenerationStats stats;
  const auto r = run({""}, greedy(256), &stats);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].prompt_tokens, Ids({1}));
  EXPECT_EQ(r[0].ids, read_ids(models_dir() + "/stories260K_greedy_t0_n256.ids"));
  EXPECT_EQ(r[0].text, without_final_newline(read_file(models_dir() + "/stories260K_greedy_t0_n256.txt")));
  // One prefill call per layer, then one decode call per layer and position.
  EXPECT_EQ(stats.prompt_tokens, 1);
  EXPECT_EQ(stats.sampled_tokens, 256);
  EXPECT_EQ(stats.decode_positions, 255);
  EXPECT_EQ(stats.attention.prefill_calls, 5);
  EXPECT_EQ(stats.attention.decode_calls, 5 * 255);
  EXPECT_GT(stats.attention.seconds, 0);
}

TEST(Generate, PromptZooMatchesRunC) {
  REQUIRE_MODELS();
  model::GenerationStats stats;
  const auto r = run({"Zoo"}, greedy(60), &stats);
  EXPECT_EQ(r[0].prompt_tokens, Ids({1, 410, 469, 347}));
  const Ids ref = read_ids(models_dir() + "/stories260K_prompt_Zoo_t0_n60.ids");
  ASSERT_EQ(ref.size(), 60u);
  EXPECT_EQ(Ids(ref.begin(), ref.begin() + 3), Ids({410, 469, 347}));  // the forced prompt tokens
  EXPECT_EQ(r[0].ids, ref);
  EXPECT_EQ(r[0].text, without_final_newline(read_file(models_dir() + "/stories260K_prompt_Zoo_t0_n60.txt")));
  EXPECT_EQ(stats.prompt_tokens, 4);
  EXPECT_EQ(stats.decode_positions, 56);
  EXPECT_EQ(stats.attention.prefill_calls, 5);
  EXPECT_EQ(stats.attention.decode_calls, 5 * 56);
}

class HalfKvCache : public ::testing::TestWithParam<DType> {};

TEST_P(HalfKvCache, MatchesRunCOrFirstDiffersWhereTheMarginIsSmall) {
  REQUIRE_MODELS();
  const Ids ref = read_ids(models_dir() + "/stories260K_greedy_t0_n256.ids");
  const std::vector<Margin> margins = read_margins(models_dir() + "/stories260K_greedy_t0_n256.margins");
  ASSERT_EQ(margins.size(), 256u);
  for (std::size_t i = 0; i < margins.size(); ++i) {
    ASSERT_EQ(margins[i].pos, static_cast<int>(i));
    ASSERT_EQ(margins[i].id, ref[i]);
  }
  const auto r = run({""}, greedy(256, GetParam()));
  const std::string name(dtype_name(GetParam()));
  std::size_t k = 0;
  while (k < ref.size() && k < r[0].ids.size() && r[0].ids[k] == ref[k]) ++k;
  if (k == ref.size() && r[0].ids.size() == ref.size()) {
    std::printf("%s KV cache: all 256 ids equal the reference\n", name.c_str());
    return;
  }
  ASSERT_LT(k, ref.size()) << name << ": stopped early after " << r[0].ids.size() << " ids";
  std::printf("%s KV cache: first differs at pos %zu (id %d, reference %d, reference margin %.5f)\n", name.c_str(), k,
              r[0].ids[k], ref[k], margins[k].margin);
  EXPECT_LT(margins[k].margin, 0.05) << name << " first differs at pos " << k;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HalfKvCache, ::testing::Values(DType::F16, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Generate, EachSequenceOfABatchGetsWhatItGetsAlone) {
  REQUIRE_MODELS();
  // Prompt lengths 1, 4 and 14 tokens: one prefill each, then decode batches of three.
  const std::vector<std::string> prompts = {"", "Zoo", "Once upon a time, Ben had a red ball"};
  for (DType kv : {DType::F32, DType::BF16}) {
    model::GenerationOptions o = greedy(80, kv);
    o.block_size = 8;
    model::GenerationStats stats;
    const auto batch = run(prompts, o, &stats);
    ASSERT_EQ(batch.size(), 3u);
    EXPECT_EQ(batch[2].prompt_tokens.size(), 14u);
    EXPECT_EQ(stats.attention.prefill_calls, 3 * 5);
    for (std::size_t k = 0; k < prompts.size(); ++k) {
      const auto alone = run({prompts[k]}, o);
      EXPECT_EQ(batch[k].ids, alone[0].ids) << "prompt " << k << " " << dtype_name(kv);
      EXPECT_EQ(batch[k].text, alone[0].text) << "prompt " << k << " " << dtype_name(kv);
      EXPECT_EQ(batch[k].ids.size(), 80u);  // one per position
    }
  }
  // And the batch reproduces run.c for its sequences.
  const auto batch = run(prompts, greedy(60));
  EXPECT_EQ(batch[1].ids, read_ids(models_dir() + "/stories260K_prompt_Zoo_t0_n60.ids"));
  const Ids ref = read_ids(models_dir() + "/stories260K_greedy_t0_n256.ids");
  EXPECT_EQ(batch[0].ids, Ids(ref.begin(), ref.begin() + 60));
}

TEST(Generate, ReferenceBackendGivesTheSameIds) {
  REQUIRE_MODELS();
  const auto cpu = run({""}, greedy(256, DType::F32, Backend::kCpu));
  const auto ref = run({""}, greedy(256, DType::F32, Backend::kReference));
  EXPECT_EQ(ref[0].ids, cpu[0].ids);
  EXPECT_EQ(ref[0].ids, read_ids(models_dir() + "/stories260K_greedy_t0_n256.ids"));
  const auto cpu_zoo = run({"Zoo"}, greedy(60, DType::F16, Backend::kCpu));
  const auto ref_zoo = run({"Zoo"}, greedy(60, DType::F16, Backend::kReference));
  EXPECT_EQ(ref_zoo[0].ids, cpu_zoo[0].ids);
}

TEST(Generate, AnyBlockSizeAndThreadCountGivesTheSameIds) {
  REQUIRE_MODELS();
  const Ids ref = read_ids(models_dir() + "/stories260K_prompt_Zoo_t0_n60.ids");
  for (int block_size : {1, 3, 16, 64, 128}) {
    for (int threads : {1, 2}) {
      model::GenerationOptions o = greedy(60);
      o.block_size = block_size;
      o.fia.threads = threads;
      o.block_order_seed = static_cast<std::uint64_t>(block_size);
      EXPECT_EQ(run({"Zoo"}, o)[0].ids, ref) << "block_size " << block_size << ", threads " << threads;
    }
  }
}

TEST(Generate, PrefillEqualsTokenByTokenDecode) {
  REQUIRE_MODELS();
  const model::Checkpoint& ck = stories260k();
  const Ids prompt = tok512().encode("Once upon a time, there was a dog");
  const int t = static_cast<int>(prompt.size()), vocab = ck.config.vocab_size;
  model::PagedKvCache cache(ck.config.n_layers, ck.config.kv_dim(), 4, 2 * 8, DType::F32, 11);
  model::Transformer transformer(ck, cache, Options{});
  const int a = cache.add_sequence(), b = cache.add_sequence();
  std::vector<float> prefill(vocab), decode(vocab);
  ASSERT_TRUE(transformer.prefill(a, prompt, prefill.data()).ok());
  for (int pos = 0; pos < t; ++pos) {
    const int seq[] = {b}, token[] = {prompt[pos]}, position[] = {pos};
    ASSERT_TRUE(transformer.decode(seq, token, position, decode.data()).ok());
  }
  for (int i = 0; i < vocab; ++i) ASSERT_NEAR(prefill[i], decode[i], 1e-4) << i;
  // Both wrote the same first-layer keys into the cache.
  for (int pos = 0; pos < t; ++pos)
    for (int i = 0; i < ck.config.kv_dim(); ++i)
      ASSERT_EQ(cache.read(0, a, pos, i, false), cache.read(0, b, pos, i, false));
  EXPECT_EQ(transformer.attention_stats().prefill_calls, 5);
  EXPECT_EQ(transformer.attention_stats().decode_calls, 5 * t);
}

TEST(Generate, RejectsStepsBeyondSeqLenAndPromptsLongerThanSteps) {
  REQUIRE_MODELS();
  std::vector<model::SequenceResult> r;
  Status st = model::generate(stories260k(), tok512(), {""}, greedy(513), &r, nullptr);
  EXPECT_EQ(st.parameter, "--steps");
  EXPECT_EQ(st.message, "steps (prompt included) must lie in [1, the model's seq_len 512], got 513");
  st = model::generate(stories260k(), tok512(), {"Zoo", "Once upon a time"}, greedy(4), &r, nullptr);
  EXPECT_EQ(st.parameter, "--prompt");
  EXPECT_EQ(st.message, "prompt 2 is 5 tokens with BOS, more than the steps (4, which count the prompt as in run.c)");
  EXPECT_TRUE(model::generate(stories260k(), tok512(), {"Zoo"}, greedy(4), &r, nullptr).ok());
  EXPECT_EQ(r[0].ids, Ids({410, 469, 347, 286}));  // three forced tokens, one sampled
  // steps 0 = the model's seq_len; this story then ends with BOS, where generation stops as in run.c.
  model::GenerationStats stats;
  EXPECT_TRUE(model::generate(stories260k(), tok512(), {""}, greedy(0), &r, &stats).ok());
  const Ids ref = read_ids(models_dir() + "/stories260K_greedy_t0_n256.ids");
  ASSERT_GT(r[0].ids.size(), 256u);
  EXPECT_LT(r[0].ids.size(), 512u);
  EXPECT_EQ(Ids(r[0].ids.begin(), r[0].ids.begin() + 256), ref);
  EXPECT_EQ(stats.sampled_tokens, static_cast<std::int64_t>(r[0].ids.size()) + 1);  // the last one was BOS
}

}  // namespace
}  // namespace fia::test
