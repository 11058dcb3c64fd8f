// Errors of the C API: the thread-local message of aclGetRecentErrMsg, the aclnn status codes of
// fia's Status (FIA-SPEC 2.4), and the translation of torch_npu parameter names into the aclnn
// argument names of the operator called.
#pragma once

#include <string>

#include "aclnn/aclnn_base.h"
#include "fia/status.hpp"

namespace fia::capi {

/// Records `message` as this thread's most recent error (aclGetRecentErrMsg).
void set_error(std::string message);

/// The operators and versions of the C API.
enum class Op { kFia, kIfa, kPfa };

/// One entry point: the operator, its version (1-4) and the name of its phase-1 function.
struct EntryName {
  Op op;
  int version;
  const char* function;      ///< "aclnnFusedInferAttentionScoreV4GetWorkspaceSize", ...
  const char* run_function;  ///< "aclnnFusedInferAttentionScoreV4", ...
};

/// The aclnn argument name of a torch_npu parameter (FiaArgs field or attention_out /
/// softmax_lse / workspace) in `entry`; the torch name itself when the entry has no such argument.
std::string aclnn_name(const EntryName& entry, const std::string& torch_name);

/// `message` with every torch_npu parameter name in it (identifiers with an underscore) replaced
/// by its aclnn name in `entry`.
std::string translate_names(const EntryName& entry, const std::string& message);

/// The aclnn status of `st` (kNullArgument 161001, kInvalidArgument/kUnsupported 161002,
/// kInternal 361001, ok 0); on failure records "<function>: <aclnn name>: <message>" with the
/// names translated, `function` being phase 1's or (run_phase) phase 2's name.
aclnnStatus report(const EntryName& entry, const Status& st, bool run_phase = false);

/// Records "<function>: <message>" and returns `code`.
aclnnStatus fail(const char* function, aclnnStatus code, const std::string& message);

}  // namespace fia::capi
