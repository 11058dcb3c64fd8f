#include "generate/transformer.hpp"

#include <cmath>
#include <cstring>

namespace fia::model {

namespace {

/// out = weight * x / sqrt(mean(x^2) + 1e-5), in run.c's order of float operations.
void rmsnorm(float* out, const float* x, const float* weight, int size) {
  float ss = 0.0f;
  for (int j = 0; j < size; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(size);
  ss += 1e-5f;
  ss = 1.0f / std::sqrt(ss);
  for (int j = 0; j < size; ++j) out[j] = weight[j] * (ss * x[j]);
}

/// out[d] = W[d, :] . x for W of shape [d_out, n], summed left to right in float.
void matmul(float* out, const float* x, const float* w, int n, int d_out) {
  for (int i = 0; i < d_out; ++i) {
    const float* row = w + static_cast<std::size_t>(i) * n;
    float val = 0.0f;
    for (int j = 0; j < n; ++j) val += row[j] * x[j];
    out[i] = val;
  }
}

}  // namespace

Transformer::Transformer(const Checkpoint& checkpoint, PagedKvCache& cache, Options options)
    : ck_(checkpoint), cache_(cache), attention_(checkpoint.config, cache, options) {
  const ModelConfig& c = ck_.config;
  const int half = c.head_size() / 2;
  rope_cos_.resize(static_cast<std::size_t>(c.seq_len) * half);
  rope_sin_.resize(rope_cos_.size());
  for (int pos = 0; pos < c.seq_len; ++pos) {
    for (int i = 0; i < half; ++i) {
      // run.c: freq = 1 / 10000^(head_dim / head_size) for the pair (head_dim, head_dim + 1)
      const float freq = 1.0f / std::pow(10000.0f, static_cast<float>(2 * i) / static_cast<float>(c.head_size()));
      const float val = static_cast<float>(pos) * freq;
      rope_cos_[static_cast<std::size_t>(pos) * half + i] = std::cos(val);
      rope_sin_[static_cast<std::size_t>(pos) * half + i] = std::sin(val);
    }
  }
}

Status Transformer::prefill(int seq, std::span<const int> tokens, float* logits) {
  std::vector<int> positions(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) positions[i] = static_cast<int>(i);
  const int seqs[1] = {seq};
  return forward(seqs, static_cast<int>(tokens.size()), tokens, positions, logits, true);
}

Status Transformer::decode(std::span<const int> seqs, std::span<const int> tokens, std::span<const int> positions,
                           float* logits) {
  return forward(seqs, 1, tokens, positions, logits, false);
}

Status Transformer::forward(std::span<const int> seqs, int q_len, std::span<const int> tokens,
                            std::span<const int> positions, float* logits, bool prefill) {
  const ModelConfig& c = ck_.config;
  const int dim = c.dim, kv_dim = c.kv_dim(), hidden = c.hidden_dim, head = c.head_size();
  const std::size_t rows = tokens.size();

  // Room in the cache for the new tokens, and the block table every layer's call shares.
  std::vector<std::int64_t> lengths(seqs.size());
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    lengths[b] = static_cast<std::int64_t>(positions[(b + 1) * q_len - 1]) + 1;
    if (Status st = cache_.reserve(seqs[b], lengths[b]); !st.ok()) return st;
  }
  const BlockTable table = cache_.block_table(seqs, lengths);

  x_.resize(rows * dim);
  xb_.resize(rows * dim);
  q_.resize(rows * dim);
  att_.resize(rows * dim);
  k_.resize(kv_dim);
  v_.resize(kv_dim);
  hb_.resize(hidden);
  hb2_.resize(hidden);
  for (std::size_t r = 0; r < rows; ++r)
    std::memcpy(&x_[r * dim], ck_.token_embedding + static_cast<std::size_t>(tokens[r]) * dim, dim * sizeof(float));

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = ck_.layers[l];
    for (std::size_t r = 0; r < rows; ++r) {
      float* xb = &xb_[r * dim];
      float* q = &q_[r * dim];
      rmsnorm(xb, &x_[r * dim], w.rms_att, dim);
      matmul(q, xb, w.wq, dim, dim);
      matmul(k_.data(), xb, w.wk, dim, kv_dim);
      matmul(v_.data(), xb, w.wv, dim, kv_dim);
      // RoPE: rotate the pairs (i, i + 1) of every head of q and k by pos * freq(i % head_size).
      const std::size_t pos = static_cast<std::size_t>(positions[r]);
      for (int i = 0; i < dim; i += 2) {
        const std::size_t t = pos * (head / 2) + (i % head) / 2;
        const float fcr = rope_cos_[t], fci = rope_sin_[t];
        for (float* vec : {q, i < kv_dim ? k_.data() : nullptr}) {
          if (vec == nullptr) continue;
          const float v0 = vec[i], v1 = vec[i + 1];
          vec[i] = v0 * fcr - v1 * fci;
          vec[i + 1] = v0 * fci + v1 * fcr;
        }
      }
      cache_.write(l, seqs[r / q_len], positions[r], k_.data(), v_.data());
    }

    if (Status st = attention_.run(l, table, q_len, q_.data(), att_.data(), prefill); !st.ok()) return st;

    for (std::size_t r = 0; r < rows; ++r) {
      float* x = &x_[r * dim];
      float* xb = &xb_[r * dim];
      matmul(xb, &att_[r * dim], w.wo, dim, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb[i];
      rmsnorm(xb, x, w.rms_ffn, dim);
      matmul(hb_.data(), xb, w.w1, dim, hidden);
      matmul(hb2_.data(), xb, w.w3, dim, hidden);
      for (int i = 0; i < hidden; ++i) {  // SwiGLU: silu(w1 x) * (w3 x)
        float val = hb_[i];
        val *= (1.0f / (1.0f + std::exp(-val)));
        val *= hb2_[i];
        hb_[i] = val;
      }
      matmul(xb, hb_.data(), w.w2, hidden, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb[i];
    }
  }

  for (std::size_t b = 0; b < seqs.size(); ++b) {
    const std::size_t r = (b + 1) * q_len - 1;
    rmsnorm(&xb_[r * dim], &x_[r * dim], ck_.rms_final, dim);
    matmul(logits + b * static_cast<std::size_t>(c.vocab_size), &xb_[r * dim], ck_.classifier, dim, c.vocab_size);
  }
  return Status::Ok();
}

}  // namespace fia::model
