#include "generate/tokenizer.hpp"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fia::model {

namespace {

constexpr const char* kParam = "--tokenizer";
constexpr int kMaxTokenLength = 1 << 16;
constexpr int kByteTokens = 256;
constexpr int kFirstByteToken = 3;  // ids 0, 1, 2 are <unk>, <s>, </s>

Status error(const std::string& message) { return {StatusCode::kInvalidArgument, kParam, message}; }

/// Every byte value as a one-character string (byte 0 gives the empty C string, as in run.c).
const std::array<char, 2 * kByteTokens>& byte_pieces() {
  static const std::array<char, 2 * kByteTokens> table = [] {
    std::array<char, 2 * kByteTokens> t{};
    for (int i = 0; i < kByteTokens; ++i) t[2 * i] = static_cast<char>(i);
    return t;
  }();
  return table;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

int Tokenizer::lookup(std::string_view piece) const {
  const auto it = ids_.find(std::string(piece));
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
  text = text.substr(0, text.find('\0'));  // run.c sees a C string
  std::vector<int> tokens{kBosToken};
  if (!text.empty()) {
    const int space = lookup(" ");
    tokens.push_back(space >= 0 ? space : ' ' + kFirstByteToken);
  }
  // One token per UTF-8 code point (at most 4 bytes), or its bytes when the vocabulary lacks it.
  std::string point;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) point.clear();
    point.push_back(static_cast<char>(c));
    const bool continues = i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
    if (continues && point.size() < 4) continue;
    const int id = lookup(point);
    if (id != -1) {
      tokens.push_back(id);
    } else {
      for (char b : point) tokens.push_back(static_cast<unsigned char>(b) + kFirstByteToken);
    }
    point.clear();
  }
  // Merge the adjacent pair whose merged piece has the highest score (the first such pair on ties).
  std::string merged;
  for (;;) {
    float best_score = -1e10f;
    int best_id = -1;
    std::size_t best_index = 0;
    for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
      merged = pieces_[tokens[i]];
      merged += pieces_[tokens[i + 1]];
      const int id = lookup(merged);
      if (id != -1 && scores_[id] > best_score) {
        best_score = scores_[id];
        best_id = id;
        best_index = i;
      }
    }
    if (best_id == -1) break;
    tokens[best_index] = best_id;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_index) + 1);
  }
  return tokens;
}

std::string_view Tokenizer::decode(int prev, int token) const {
  std::string_view piece = pieces_[token];
  if (prev == kBosToken && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
  // run.c: sscanf(piece, "<0x%02hhX>", &byte) -- "<0x" and one or two hex digits.
  if (piece.size() >= 4 && piece.substr(0, 3) == "<0x" && hex_digit(piece[3]) >= 0) {
    int byte = hex_digit(piece[3]);
    if (piece.size() >= 5 && hex_digit(piece[4]) >= 0) byte = byte * 16 + hex_digit(piece[4]);
    return {&byte_pieces()[2 * byte], byte == 0 ? 0u : 1u};
  }
  return piece;
}

std::string_view Tokenizer::printable(std::string_view piece) {
  piece = piece.substr(0, piece.find('\0'));
  if (piece.size() == 1) {
    const auto b = static_cast<unsigned char>(piece[0]);
    const bool print = b >= 0x20 && b <= 0x7E;                // isprint in the C locale
    const bool space = b == ' ' || (b >= 0x09 && b <= 0x0D);  // isspace in the C locale
    if (!print && !space) return {};
  }
  return piece;
}

Status load_tokenizer(const std::string& path, int vocab_size, Tokenizer* out) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  std::ifstream f(path, std::ios::binary);
  if (ec || !f) return error("cannot open " + path + ": " + (ec ? ec.message() : std::strerror(errno)));
  if (vocab_size < kFirstByteToken + kByteTokens)
    return error("a llama2.c tokenizer has at least 259 tokens (3 special, 256 bytes), the model's vocab_size is " +
                 std::to_string(vocab_size));
  std::int32_t max_len = 0;
  if (!f.read(reinterpret_cast<char*>(&max_len), sizeof max_len))
    return error(path + " is truncated: it has " + std::to_string(size) + " bytes, less than its 4-byte header");
  if (max_len <= 0 || max_len > kMaxTokenLength)
    return error(path + " is not a llama2.c tokenizer: max_token_length must lie in [1, " +
                 std::to_string(kMaxTokenLength) + "], got " + std::to_string(max_len));
  Tokenizer t;
  t.pieces_.reserve(vocab_size);
  t.scores_.reserve(vocab_size);
  std::string bytes;
  for (int i = 0; i < vocab_size; ++i) {
    float score = 0;
    std::int32_t len = 0;
    f.read(reinterpret_cast<char*>(&score), sizeof score);
    f.read(reinterpret_cast<char*>(&len), sizeof len);
    if (f && (len < 0 || len > max_len))
      return error(path + " is not a llama2.c tokenizer: token " + std::to_string(i) + " has length " +
                   std::to_string(len) + ", outside [0, max_token_length " + std::to_string(max_len) + "]");
    if (f && !std::isfinite(score))
      return error(path + " is not a llama2.c tokenizer: token " + std::to_string(i) + " has a non-finite score");
    bytes.assign(f ? static_cast<std::size_t>(len) : 0, '\0');
    if (f) f.read(bytes.data(), len);
    if (!f)
      return error(path + " is truncated: it ends inside token " + std::to_string(i) + " of the model's " +
                   std::to_string(vocab_size));
    t.pieces_.push_back(bytes.substr(0, bytes.find('\0')));  // run.c uses pieces as C strings
    t.scores_.push_back(score);
    t.ids_.emplace(t.pieces_.back(), i);  // keeps the first id of a repeated piece
  }
  const std::uint64_t used = static_cast<std::uint64_t>(f.tellg());
  if (used != size)
    return error(path + " is not the tokenizer of this model: it has " + std::to_string(size - used) +
                 " bytes after token " + std::to_string(vocab_size - 1) + " (the model's vocab_size is " +
                 std::to_string(vocab_size) + ")");
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace fia::model
