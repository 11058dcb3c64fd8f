// Text generation: one prefill per prompt, then batched decode steps over the paged KV cache
// until every sequence has reached `steps` positions or produced BOS, as llama2.c's run.c does
// for one prompt.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fia/fia.hpp"
#include "generate/attention.hpp"
#include "generate/checkpoint.hpp"
#include "generate/tokenizer.hpp"

namespace fia::model {

/// How to generate.
struct GenerationOptions {
  /// Positions per sequence, the prompt (with BOS) included, as run.c's -n; 0 = the model's seq_len.
  int steps = 256;
  float temperature = 0.0f;                 ///< 0 = greedy
  float top_p = 0.9f;                       ///< nucleus sampling when temperature > 0
  std::uint64_t seed = 42;                  ///< sampler seed (each sequence has its own sampler)
  DType kv_dtype = DType::F32;              ///< KV cache dtype, and so the dtype of every FIA call
  int block_size = 16;                      ///< tokens per KV cache block
  std::uint64_t block_order_seed = 0x5eed;  ///< shuffles the order blocks are handed out in
  Options fia;                              ///< backend and threads of every FIA call
};

/// What one prompt produced.
struct SequenceResult {
  std::vector<int> prompt_tokens;  ///< the encoded prompt, BOS first
  /// The token after each position, as run.c's stream: the forced prompt tokens 2..T, then the
  /// sampled ones (without a final BOS that stopped the sequence).
  std::vector<int> ids;
  std::string text;  ///< what run.c prints for `ids`, without its final newline
};

/// Where the time went.
struct GenerationStats {
  std::int64_t prompt_tokens = 0;     ///< prompt positions run by prefill, BOS included
  std::int64_t sampled_tokens = 0;    ///< tokens chosen by the sampler
  std::int64_t decode_positions = 0;  ///< positions run by decode steps
  double prefill_seconds = 0;
  double decode_seconds = 0;
  AttentionStats attention;
  int kv_blocks = 0;  ///< blocks in the KV cache pool
};

/// Called for every token as it is produced: the prompt's index, the token and its printable text.
using TokenSink = std::function<void(std::size_t prompt, int token, std::string_view text)>;

/// Generates from every prompt of `prompts` in one batch. Errors: kInvalidArgument for steps
/// beyond the model's seq_len ("--steps"), a prompt longer than steps ("--prompt"), a block size
/// or KV dtype the cache cannot have, and any error of an FIA call.
Status generate(const Checkpoint& checkpoint, const Tokenizer& tokenizer, const std::vector<std::string>& prompts,
                const GenerationOptions& options, std::vector<SequenceResult>* results, GenerationStats* stats,
                const TokenSink& sink = {});

}  // namespace fia::model
