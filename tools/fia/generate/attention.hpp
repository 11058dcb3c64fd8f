// The attention of the model, done by FusedInferAttentionScore over the paged KV cache: one
// fia::plan + fia::run per layer and forward pass, for prefill (Q_S = prompt length, causal
// sparse_mode 3) and for batched decode (Q_S = 1 per sequence) alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fia/fia.hpp"
#include "generate/checkpoint.hpp"
#include "generate/paged_kv_cache.hpp"

namespace fia::model {

/// Time and calls spent in attention.
struct AttentionStats {
  double seconds = 0;              ///< in fia::plan + fia::run, with the Q and output dtype conversions
  std::int64_t prefill_calls = 0;  ///< calls for a prompt (one per layer and prompt)
  std::int64_t decode_calls = 0;   ///< calls for a decode step (one per layer and step)
};

/// Runs FIA for one layer at a time. Holds reusable buffers and the compressed causal mask.
class PagedAttention {
 public:
  PagedAttention(const ModelConfig& config, const PagedKvCache& cache, Options options);

  /// Attention of `table.batch` sequences with `q_len` query rows each: `q` holds the RoPE'd
  /// queries as [batch, q_len, dim] floats (the last q_len tokens of each sequence, whose keys
  /// and values are already in the cache); the result goes to `out`, same shape. Row i of a
  /// sequence of L tokens sees its tokens 0 .. L - q_len + i. `prefill` only labels the call in
  /// the statistics.
  Status run(int layer, const BlockTable& table, std::int64_t q_len, const float* q, float* out, bool prefill);

  const AttentionStats& stats() const { return stats_; }

 private:
  ModelConfig config_;
  const PagedKvCache& cache_;
  Options options_;
  OwnedTensor causal_mask_;  ///< fia::compressed_mask: (2048, 2048), 1 above the diagonal (sparse_mode 3)
  std::vector<std::uint16_t> q_half_;      ///< the query in fp16/bf16 for a half cache
  std::vector<std::byte> out_;             ///< attention_out in the cache dtype
  std::vector<std::byte> workspace_;
  AttentionStats stats_;
};

}  // namespace fia::model
