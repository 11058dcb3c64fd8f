// The Llama forward pass of llama2.c's run.c (RMSNorm, RoPE, GQA attention, SwiGLU, shared
// classifier), with the same float arithmetic in the same order, over several tokens or
// sequences at once. Attention is FusedInferAttentionScore over the paged KV cache.
#pragma once

#include <span>
#include <vector>

#include "generate/attention.hpp"
#include "generate/checkpoint.hpp"
#include "generate/paged_kv_cache.hpp"

namespace fia::model {

/// One model bound to one KV cache.
class Transformer {
 public:
  /// `checkpoint` and `cache` must outlive the transformer. `options` go to every FIA call.
  Transformer(const Checkpoint& checkpoint, PagedKvCache& cache, Options options);

  /// Runs the prompt `tokens` of sequence `seq` (positions 0 .. T-1) in one pass, with one
  /// prefill attention call per layer, and writes the logits of its last position to `logits`
  /// (vocab_size floats).
  Status prefill(int seq, std::span<const int> tokens, float* logits);

  /// One decode step of a batch: sequence seqs[b] gets token tokens[b] at position positions[b]
  /// (its previous positions are cached), with one batched attention call per layer. Writes
  /// [batch, vocab_size] logits.
  Status decode(std::span<const int> seqs, std::span<const int> tokens, std::span<const int> positions, float* logits);

  const AttentionStats& attention_stats() const { return attention_.stats(); }

 private:
  /// The forward pass of `rows` = seqs.size() * q_len tokens: sequence seqs[b] owns rows
  /// [b * q_len, (b + 1) * q_len), consecutive positions ending at its last cached token.
  /// Logits are computed for the last row of each sequence.
  Status forward(std::span<const int> seqs, int q_len, std::span<const int> tokens, std::span<const int> positions,
                 float* logits, bool prefill);

  const Checkpoint& ck_;
  PagedKvCache& cache_;
  PagedAttention attention_;
  std::vector<float> rope_cos_, rope_sin_;  ///< [seq_len, head_size / 2]
  std::vector<float> x_, xb_, q_, k_, v_, att_, hb_, hb2_;
};

}  // namespace fia::model
