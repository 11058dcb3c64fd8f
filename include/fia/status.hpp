// Status: the result of every fia call that can fail.
#pragma once

#include <string>

#include "fia/export.hpp"

namespace fia {

/// What kind of failure a Status reports (FIA-SPEC 2.4).
enum class StatusCode {
  kOk = 0,
  kNullArgument,     ///< a required tensor is missing (aclnn 161001)
  kInvalidArgument,  ///< a validation rule of FIA-SPEC 20 is broken (aclnn 161002)
  kUnsupported,      ///< a valid request for a feature fia does not implement yet
  kInternal,         ///< a bug or resource failure inside fia
};

/// The outcome of a call: a code, the torch_npu name of the offending parameter and a message
/// of the form "<what was expected>, got <what was given>".
struct FIA_API Status {
  StatusCode code = StatusCode::kOk;
  std::string parameter;
  std::string message;

  static Status Ok() { return {}; }
  bool ok() const noexcept { return code == StatusCode::kOk; }
  /// "parameter: message" (or just the message when no parameter is named).
  std::string to_string() const;
};

/// Short name of a status code ("ok", "null argument", "invalid argument", ...).
FIA_API const char* status_code_name(StatusCode code) noexcept;

}  // namespace fia
