#include "fia/status.hpp"

namespace fia {

std::string Status::to_string() const {
  if (parameter.empty()) return message;
  return parameter + ": " + message;
}

const char* status_code_name(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kNullArgument: return "null argument";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kInternal: return "internal error";
  }
  return "?";
}

}  // namespace fia
