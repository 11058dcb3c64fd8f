// JSON text as fia reads it (params.json, safetensors headers): bounded nesting, and errors that
// say which top-level key and which position the text stops being usable at.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace fia::io {

/// The deepest nesting of arrays and objects fia reads. params.json needs 2 levels and a
/// safetensors header 3; anything deeper is rejected before a value is built (a value nested
/// 100,000 levels deep would otherwise overflow the stack when printed or destroyed).
inline constexpr int kMaxJsonDepth = 64;

/// A parsed JSON object, or why the text is not one.
struct JsonObject {
  enum class Error {
    kNone,
    kSyntax,     ///< not JSON (NaN and Infinity included)
    kNotFinite,  ///< a number outside the double range, such as 1e400
    kTooDeep,    ///< nested deeper than kMaxJsonDepth
    kDuplicate,  ///< a key given twice in one object
    kNotObject,  ///< valid JSON, but not an object
  };
  nlohmann::json value;  ///< the object when error is kNone
  Error error = Error::kNone;
  /// The top-level key whose value holds the error, or the duplicated key (kDuplicate); empty
  /// when the error is outside every value (a missing comma, a NUL byte between keys, ...).
  std::string key;
  /// Why, printable and bounded: "not valid JSON at line 1, column 11 (...)", "1e400 is not a
  /// finite number", "nested deeper than 64 levels", "given twice", "must hold a JSON object".
  std::string message;

  bool ok() const noexcept { return error == Error::kNone; }
};

/// Parses `text`, which must be one JSON object (RFC 8259; a NUL byte anywhere is an error).
JsonObject parse_json_object(const std::string& text);

/// A short printable rendering of a JSON value for error messages (at most about 60 characters,
/// control characters escaped).
std::string json_brief(const nlohmann::json& value);

}  // namespace fia::io
