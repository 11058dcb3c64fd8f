// The llama2.c tokenizer (tokenizer.bin format): sentencepiece-style BPE encoding by merge score
// with byte fallback, and decoding to printable text, exactly as llama2.c's run.c does it.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fia/status.hpp"

namespace fia::model {

/// Token id of BOS ("<s>"); llama2.c starts every sequence with it and stops when it is generated.
inline constexpr int kBosToken = 1;

/// A llama2.c vocabulary: pieces and merge scores.
class Tokenizer {
 public:
  /// Encodes `text` as run.c does: BOS, then (for non-empty text) the token of " " as the dummy
  /// prefix, then every UTF-8 code point as its token or, when it has none, as byte tokens
  /// (<0xNN> = id NN + 3); then merges the adjacent pair with the best score until none remains.
  std::vector<int> encode(std::string_view text) const;

  /// The bytes `token` stands for after `prev`: the leading space of a piece is dropped right
  /// after BOS, and <0xNN> pieces become the raw byte NN.
  std::string_view decode(int prev, int token) const;

  /// What run.c prints for a piece (its safe_printf): nothing for an empty piece or a single
  /// byte that is neither printable nor whitespace, the piece up to its first NUL otherwise.
  static std::string_view printable(std::string_view piece);

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  const std::string& piece(int token) const { return pieces_[token]; }
  float score(int token) const { return scores_[token]; }
  /// The id of an exact piece, or -1.
  int lookup(std::string_view piece) const;

 private:
  friend Status load_tokenizer(const std::string& path, int vocab_size, Tokenizer* out);
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int> ids_;
};

/// Reads a llama2.c tokenizer.bin with `vocab_size` tokens (the model's). Errors
/// (kInvalidArgument, parameter "--tokenizer"): a missing or unreadable file, a header or token
/// length that no llama2.c tokenizer has, a file that ends early (truncated) or has bytes after
/// the last token (it belongs to another vocabulary).
Status load_tokenizer(const std::string& path, int vocab_size, Tokenizer* out);

}  // namespace fia::model
