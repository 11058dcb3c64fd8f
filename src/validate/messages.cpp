#include "validate/context.hpp"

#include <algorithm>
#include <cstdio>

namespace fia::detail {

namespace {

/// Length of the well-formed UTF-8 sequence of two to four bytes at `s[i]`, or 0 (RFC 3629).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  const auto c1 = static_cast<unsigned char>(s[i + 1]);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
    return 0;  // overlong, surrogate, or past U+10FFFF
  return n;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_chars) {
  std::string out;
  std::size_t i = 0;
  for (std::size_t chars = 0; i < text.size() && chars < max_chars; ++chars) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t n = c >= 0x80 ? utf8_length(text, i) : 1;
    if ((c >= 0x20 && c != 0x7F) && n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
      ++i;
    }
  }
  if (i < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string shape_str(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status invalid(const std::string& parameter, const std::string& message) {
  return {StatusCode::kInvalidArgument, parameter, message};
}

Status unsupported(const std::string& parameter, const std::string& message) {
  return {StatusCode::kUnsupported, parameter, message};
}

Status null_argument(const std::string& parameter, const std::string& message) {
  return {StatusCode::kNullArgument, parameter, message};
}

}  // namespace fia::detail
