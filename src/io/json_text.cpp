#include "io/json_text.hpp"

#include <set>
#include <vector>

#include "validate/printable.hpp"

namespace fia::io {

namespace {

using json = nlohmann::json;

/// Thrown by the parser callback at the first array or object nested deeper than kMaxJsonDepth.
struct TooDeep {};

/// "line L, column C" of the 0-based byte offset `pos`.
std::string line_column(const std::string& text, std::size_t pos) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

/// Why nlohmann stopped at 0-based offset `at`, without its "[json.exception...] parse error at
/// line L, column C: " prefix.
std::string syntax_reason(const std::string& text, std::size_t at, const json::parse_error& e) {
  if (at < text.size() && text[at] == '\0') return "a NUL byte";
  for (const char* word : {"NaN", "Infinity"})
    if (text.compare(at, std::char_traits<char>::length(word), word) == 0) return "JSON has no NaN or Infinity";
  const std::string what = e.what();
  const auto start = what.find(": ", what.find("parse error"));
  return detail::printable(start == std::string::npos ? what : what.substr(start + 2), 160);
}

/// The number nlohmann could not hold, from "number overflow parsing '1e400'".
std::string overflowing_number(const json::out_of_range& e) {
  const std::string what = e.what();
  const auto open = what.find('\''), close = what.rfind('\'');
  if (open == std::string::npos || close <= open) return "a number";
  return detail::printable(what.substr(open + 1, close - open - 1), 40);
}

}  // namespace

JsonObject parse_json_object(const std::string& text) {
  JsonObject r;
  std::string pending;                      // the top-level key whose value is being read
  std::vector<std::set<std::string>> open;  // keys seen, one set per open object
  std::string duplicate;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) throw TooDeep{};
        if (event == json::parse_event_t::object_start) open.emplace_back();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (event == json::parse_event_t::object_end && !open.empty()) open.pop_back();
        if (depth == 1) pending.clear();
        break;
      case json::parse_event_t::key: {
        std::string k = parsed.get<std::string>();
        if (!open.empty() && !open.back().insert(k).second && duplicate.empty()) duplicate = k;
        if (depth == 1) pending = std::move(k);
        break;
      }
      case json::parse_event_t::value:
        if (depth == 1) pending.clear();
        break;
    }
    return true;
  };
  auto fail = [&](JsonObject::Error error, std::string message) {
    r.value = json();
    r.error = error;
    r.key = detail::printable(pending, 64);
    r.message = std::move(message);
    return std::move(r);
  };
  try {
    r.value = json::parse(text, callback, /*allow_exceptions=*/true);
  } catch (const TooDeep&) {
    return fail(JsonObject::Error::kTooDeep, "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  } catch (const json::parse_error& e) {
    const std::size_t at = e.byte > 0 ? e.byte - 1 : 0;
    return fail(JsonObject::Error::kSyntax,
                "not valid JSON at " + line_column(text, at) + ": " + syntax_reason(text, at, e));
  } catch (const json::out_of_range& e) {
    return fail(JsonObject::Error::kNotFinite, overflowing_number(e) + " is not a finite number");
  } catch (const json::exception& e) {
    return fail(JsonObject::Error::kSyntax, "not valid JSON: " + detail::printable(e.what(), 160));
  }
  pending.clear();
  // nlohmann ends its input at a NUL byte; JSON text cannot hold one.
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    return fail(JsonObject::Error::kSyntax, "not valid JSON at " + line_column(text, nul) + ": a NUL byte");
  if (!r.value.is_object()) return fail(JsonObject::Error::kNotObject, "must hold a JSON object");
  if (!duplicate.empty()) {
    pending = duplicate;
    return fail(JsonObject::Error::kDuplicate, "given twice");
  }
  return r;
}

std::string json_brief(const nlohmann::json& value) {
  return detail::printable(value.dump(-1, ' ', false, json::error_handler_t::replace), 60);
}

}  // namespace fia::io
