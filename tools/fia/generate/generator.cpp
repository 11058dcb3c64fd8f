#include "generate/generator.hpp"

#include <chrono>

#include "generate/paged_kv_cache.hpp"
#include "generate/sampler.hpp"
#include "generate/transformer.hpp"

namespace fia::model {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// A sequence being generated.
struct Live {
  int cache_seq = 0;
  int token = 0;  ///< the last token, input of the next position
  int pos = 0;    ///< the next position to run
  bool done = false;
};

}  // namespace

Status generate(const Checkpoint& checkpoint, const Tokenizer& tokenizer, const std::vector<std::string>& prompts,
                const GenerationOptions& options, std::vector<SequenceResult>* results, GenerationStats* stats,
                const TokenSink& sink) {
  const ModelConfig& c = checkpoint.config;
  const int steps = options.steps == 0 ? c.seq_len : options.steps;
  if (steps < 0 || steps > c.seq_len)
    return {StatusCode::kInvalidArgument, "--steps",
            "steps (prompt included) must lie in [1, the model's seq_len " + std::to_string(c.seq_len) + "], got " +
                std::to_string(options.steps)};
  if (options.block_size <= 0)
    return {StatusCode::kInvalidArgument, "--block-size",
            "block_size must be positive, got " + std::to_string(options.block_size)};
  if (options.kv_dtype != DType::F32 && options.kv_dtype != DType::F16 && options.kv_dtype != DType::BF16)
    return {StatusCode::kInvalidArgument, "--kv-dtype",
            "the KV cache dtype must be F32, F16 or BF16, got " + std::string(dtype_name(options.kv_dtype))};
  if (prompts.empty()) return {StatusCode::kInvalidArgument, "--prompt", "no prompt to generate from"};

  const std::size_t n = prompts.size();
  std::vector<SequenceResult> out(n);
  for (std::size_t k = 0; k < n; ++k) {
    out[k].prompt_tokens = tokenizer.encode(prompts[k]);
    const std::size_t t = out[k].prompt_tokens.size();
    if (t > static_cast<std::size_t>(steps))
      return {StatusCode::kInvalidArgument, "--prompt",
              "prompt " + std::to_string(k + 1) + " is " + std::to_string(t) +
                  " tokens with BOS, more than the steps (" + std::to_string(steps) +
                  ", which count the prompt as in run.c)"};
  }

  const int blocks_per_sequence = (steps + options.block_size - 1) / options.block_size;
  PagedKvCache cache(c.n_layers, c.kv_dim(), options.block_size, static_cast<int>(n) * blocks_per_sequence,
                     options.kv_dtype, options.block_order_seed);
  Transformer transformer(checkpoint, cache, options.fia);
  std::vector<Sampler> samplers(n, Sampler(c.vocab_size, options.temperature, options.top_p, options.seed));
  std::vector<Live> live(n);
  std::vector<float> logits(n * static_cast<std::size_t>(c.vocab_size));
  GenerationStats st;
  st.kv_blocks = cache.num_blocks();

  auto emit = [&](std::size_t k, int prev, int token) {
    const std::string_view text = Tokenizer::printable(tokenizer.decode(prev, token));
    out[k].ids.push_back(token);
    out[k].text += text;
    if (sink) sink(k, token, text);
  };
  // run.c's loop after the forward pass of position pos: sample, stop at BOS or after `steps`.
  auto advance = [&](std::size_t k, float* row) {
    Live& s = live[k];
    const int next = samplers[k].sample(row);
    ++st.sampled_tokens;
    ++s.pos;
    if (next == kBosToken) {
      s.done = true;
    } else {
      emit(k, s.token, next);
      s.token = next;
    }
    if (s.pos >= steps) s.done = true;
    if (s.done) cache.release(s.cache_seq);
  };

  // Prefill: one forward pass per prompt, whose last position gives the first sampled token.
  for (std::size_t k = 0; k < n; ++k) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int>& tokens = out[k].prompt_tokens;
    live[k].cache_seq = cache.add_sequence();
    if (Status s = transformer.prefill(live[k].cache_seq, tokens, logits.data()); !s.ok()) return s;
    for (std::size_t i = 1; i < tokens.size(); ++i) emit(k, tokens[i - 1], tokens[i]);
    live[k].token = tokens.back();
    live[k].pos = static_cast<int>(tokens.size()) - 1;
    advance(k, logits.data());
    st.prompt_tokens += static_cast<std::int64_t>(tokens.size());
    st.prefill_seconds += seconds_since(start);
  }

  // Decode: every live sequence advances by one position per step, in one batch.
  std::vector<std::size_t> batch;
  std::vector<int> seqs, tokens, positions;
  for (;;) {
    batch.clear();
    for (std::size_t k = 0; k < n; ++k)
      if (!live[k].done) batch.push_back(k);
    if (batch.empty()) break;
    const auto start = std::chrono::steady_clock::now();
    seqs.clear();
    tokens.clear();
    positions.clear();
    for (std::size_t k : batch) {
      seqs.push_back(live[k].cache_seq);
      tokens.push_back(live[k].token);
      positions.push_back(live[k].pos);
    }
    if (Status s = transformer.decode(seqs, tokens, positions, logits.data()); !s.ok()) return s;
    for (std::size_t b = 0; b < batch.size(); ++b)
      advance(batch[b], &logits[b * static_cast<std::size_t>(c.vocab_size)]);
    st.decode_positions += static_cast<std::int64_t>(batch.size());
    st.decode_seconds += seconds_since(start);
  }

  st.attention = transformer.attention_stats();
  *results = std::move(out);
  if (stats) *stats = st;
  return Status::Ok();
}

}  // namespace fia::model
