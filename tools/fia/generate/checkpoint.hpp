// Loading a llama2.c checkpoint (Karpathy's legacy "version 0" .bin format) and checking that the
// file is one: a 7-int32 header, then every fp32 weight in a fixed order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fia/status.hpp"

namespace fia::model {

/// The model's shape, from the checkpoint header.
struct ModelConfig {
  int dim = 0;         ///< transformer width
  int hidden_dim = 0;  ///< FFN width
  int n_layers = 0;
  int n_heads = 0;     ///< query heads
  int n_kv_heads = 0;  ///< key/value heads (GQA when fewer than n_heads)
  int vocab_size = 0;  ///< always positive here; see shared_classifier
  int seq_len = 0;     ///< the longest sequence the model was trained for
  /// True when the header's vocab_size was positive: the classifier is the token embedding.
  bool shared_classifier = true;

  /// Dimension of one attention head.
  int head_size() const { return dim / n_heads; }
  /// Width of the keys (and values) of one token: n_kv_heads * head_size.
  int kv_dim() const { return n_kv_heads * head_size(); }
};

/// The weights of one layer, row-major [out, in] matrices as in llama2.c.
struct LayerWeights {
  const float* rms_att = nullptr;  ///< [dim]
  const float* wq = nullptr;       ///< [dim, dim]
  const float* wk = nullptr;       ///< [kv_dim, dim]
  const float* wv = nullptr;       ///< [kv_dim, dim]
  const float* wo = nullptr;       ///< [dim, dim]
  const float* rms_ffn = nullptr;  ///< [dim]
  const float* w1 = nullptr;       ///< [hidden_dim, dim]
  const float* w2 = nullptr;       ///< [dim, hidden_dim]
  const float* w3 = nullptr;       ///< [hidden_dim, dim]
};

/// A loaded checkpoint. Movable, not copyable (the weight pointers point into `data`).
struct Checkpoint {
  ModelConfig config;
  std::vector<float> data;                 ///< every float after the header
  const float* token_embedding = nullptr;  ///< [vocab_size, dim]
  std::vector<LayerWeights> layers;
  const float* rms_final = nullptr;   ///< [dim]
  const float* classifier = nullptr;  ///< [vocab_size, dim]

  Checkpoint() = default;
  Checkpoint(Checkpoint&&) = default;
  Checkpoint& operator=(Checkpoint&&) = default;
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
};

/// Number of bytes a legacy llama2.c checkpoint with this header has (header included).
std::uint64_t checkpoint_bytes(const ModelConfig& config);

/// Reads a llama2.c legacy checkpoint. Errors (kInvalidArgument, parameter "--model"): the file is
/// missing or unreadable, it is a versioned export ("ak42" magic), its header is not a plausible
/// model, or its size differs from what the header describes (truncated or foreign file).
Status load_checkpoint(const std::string& path, Checkpoint* out);

}  // namespace fia::model
