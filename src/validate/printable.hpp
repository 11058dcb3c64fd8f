// User text echoed in error messages: control bytes escaped, length bounded.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fia::detail {

/// `text` as it may appear in an error line: bytes below 0x20, 0x7F and bytes that are not part of
/// well-formed UTF-8 are written as `\xNN` (so a NUL or a newline can neither cut nor split the
/// line), and text longer than `max_chars` characters is cut, followed by "... (N bytes)".
std::string printable(std::string_view text, std::size_t max_chars = 80);

}  // namespace fia::detail
