#include "generate/checkpoint.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace fia::model {

namespace {

constexpr const char* kParam = "--model";
constexpr std::uint64_t kHeaderBytes = 7 * sizeof(std::int32_t);
constexpr std::int32_t kVersionedMagic = 0x616b3432;  // "ak42": llama2.c export.py version 1 and 2
constexpr std::int32_t kMaxField = 1 << 20;           // no llama2.c model comes near this

Status error(const std::string& message) { return {StatusCode::kInvalidArgument, kParam, message}; }

std::string describe(const ModelConfig& c) {
  std::ostringstream s;
  s << "dim " << c.dim << ", hidden_dim " << c.hidden_dim << ", n_layers " << c.n_layers << ", n_heads " << c.n_heads
    << ", n_kv_heads " << c.n_kv_heads << ", vocab_size " << c.vocab_size << ", seq_len " << c.seq_len;
  return s.str();
}

/// Why a header cannot be a llama2.c model, or "" when it can.
std::string implausible(const std::int32_t h[7]) {
  static const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    const std::int64_t v = i == 5 ? std::abs(static_cast<std::int64_t>(h[i])) : h[i];
    if (v <= 0 || v > kMaxField)
      return std::string(names[i]) + " must lie in [1, " + std::to_string(kMaxField) + "], got " + std::to_string(h[i]);
  }
  const std::int32_t dim = h[0], n_heads = h[3], n_kv_heads = h[4];
  if (dim % n_heads != 0)
    return "dim (" + std::to_string(dim) + ") must be a multiple of n_heads (" + std::to_string(n_heads) + ")";
  if (n_heads % n_kv_heads != 0)
    return "n_heads (" + std::to_string(n_heads) + ") must be a multiple of n_kv_heads (" + std::to_string(n_kv_heads) +
           ")";
  if ((dim / n_heads) % 2 != 0) return "the head size (" + std::to_string(dim / n_heads) + ") must be even for RoPE";
  return "";
}

}  // namespace

std::uint64_t checkpoint_bytes(const ModelConfig& c) {
  const std::uint64_t dim = c.dim, hidden = c.hidden_dim, layers = c.n_layers, vocab = c.vocab_size,
                      kv_dim = static_cast<std::uint64_t>(c.kv_dim()), head = static_cast<std::uint64_t>(c.head_size());
  std::uint64_t floats = vocab * dim;  // token embedding
  floats += layers * (2 * dim + 2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden);
  floats += dim;                                                   // final RMSNorm
  floats += 2 * static_cast<std::uint64_t>(c.seq_len) * head / 2;  // unused freq_cis_real / freq_cis_imag
  if (!c.shared_classifier) floats += vocab * dim;
  return kHeaderBytes + floats * sizeof(float);
}

Status load_checkpoint(const std::string& path, Checkpoint* out) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  std::ifstream f(path, std::ios::binary);
  if (ec || !f) return error("cannot open " + path + ": " + (ec ? ec.message() : std::strerror(errno)));
  if (size < kHeaderBytes)
    return error(path + " is truncated: a llama2.c checkpoint starts with a 28-byte header, the file has " +
                 std::to_string(size) + " bytes");
  std::int32_t h[7];
  f.read(reinterpret_cast<char*>(h), sizeof h);
  if (!f) return error("cannot read " + path);
  if (h[0] == kVersionedMagic)
    return error(path + " is a versioned llama2.c export (magic \"ak42\", version " + std::to_string(h[1]) +
                 "); only the legacy format (export.py --version 0) is supported");
  if (const std::string why = implausible(h); !why.empty())
    return error(path + " is not a llama2.c checkpoint: " + why);

  ModelConfig c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab_size = h[5] > 0 ? h[5] : -h[5];
  c.seq_len = h[6];
  const std::uint64_t expected = checkpoint_bytes(c);
  if (size < expected)
    return error(path + " is truncated: its header (" + describe(c) + ") needs " + std::to_string(expected) +
                 " bytes, the file has " + std::to_string(size));
  if (size > expected)
    return error(path + " is not a llama2.c checkpoint: its header (" + describe(c) + ") needs " +
                 std::to_string(expected) + " bytes, the file has " + std::to_string(size));

  Checkpoint ck;
  ck.config = c;
  ck.data.resize((expected - kHeaderBytes) / sizeof(float));
  f.read(reinterpret_cast<char*>(ck.data.data()), static_cast<std::streamsize>(ck.data.size() * sizeof(float)));
  if (!f) return error("cannot read " + path + ": the file ended early");

  const std::size_t dim = c.dim, hidden = c.hidden_dim, kv_dim = c.kv_dim(), layers = c.n_layers;
  const float* p = ck.data.data();
  auto take = [&p](std::size_t n) {
    const float* r = p;
    p += n;
    return r;
  };
  ck.token_embedding = take(static_cast<std::size_t>(c.vocab_size) * dim);
  ck.layers.resize(layers);
  // Legacy order: each tensor for all layers, one tensor after the other.
  for (auto& l : ck.layers) l.rms_att = take(dim);
  for (auto& l : ck.layers) l.wq = take(dim * dim);
  for (auto& l : ck.layers) l.wk = take(kv_dim * dim);
  for (auto& l : ck.layers) l.wv = take(kv_dim * dim);
  for (auto& l : ck.layers) l.wo = take(dim * dim);
  for (auto& l : ck.layers) l.rms_ffn = take(dim);
  for (auto& l : ck.layers) l.w1 = take(hidden * dim);
  for (auto& l : ck.layers) l.w2 = take(dim * hidden);
  for (auto& l : ck.layers) l.w3 = take(hidden * dim);
  ck.rms_final = take(dim);
  take(static_cast<std::size_t>(c.seq_len) * c.head_size());  // freq_cis_real and freq_cis_imag
  ck.classifier = c.shared_classifier ? ck.token_embedding : take(static_cast<std::size_t>(c.vocab_size) * dim);
  *out = std::move(ck);
  return Status::Ok();
}

}  // namespace fia::model
