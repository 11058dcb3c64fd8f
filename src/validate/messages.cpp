#include "validate/context.hpp"

namespace fia::detail {

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
