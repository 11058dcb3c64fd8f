// Case folders (CASE-FORMAT.md): params.json + inputs.safetensors (+ NAME.npy) -> FiaArgs.
#pragma once

#include <map>
#include <string>

#include "fia/args.hpp"
#include "fia/fia.hpp"
#include "fia/status.hpp"

namespace fia::io {

/// A loaded case: the call's arguments and the tensors they view.
struct Case {
  FiaArgs args;
  std::map<std::string, OwnedTensor> tensors;  ///< owns every tensor `args` points into

  Case() = default;
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;
};

/// Parses params.json text into the attributes and host arrays of `args`. Unknown keys, wrong
/// JSON types, and `scale` given together with its alias `scale_value` are errors naming the key;
/// so are NaN, Infinity, numbers beyond the double range and values nested deeper than 64
/// levels, where the key is known (else "params.json", with the line and column). All errors
/// are kInvalidArgument.
Status parse_params(const std::string& json_text, FiaArgs* args);

/// Loads CASE_DIR: params.json (optional), inputs.safetensors (optional) and NAME.npy files.
/// Tensor names are the torch_npu names; `key.0`, `key.1`, ... (and `value.N`) form a tensor list.
/// A name given twice (safetensors and .npy), an unknown tensor name, or a malformed file is an
/// error naming the offending key, tensor or file.
Status load_case(const std::string& dir, Case* out);

/// Writes a call as a case folder: params.json with every attribute that differs from FIA's
/// default, and inputs.safetensors with every present tensor (contiguous copies; tensor lists as
/// key.N / value.N). The inverse of load_case. The tensors are not validated (save_case writes
/// invalid calls too, for tests of the rules). Errors: kInternal naming CASE_DIR, params.json or
/// the safetensors path when a folder or file cannot be written.
Status save_case(const std::string& dir, const FiaArgs& args);

/// Writes OUT_DIR/outputs.safetensors with attention_out and softmax_lse (creates OUT_DIR).
/// Errors: kInternal naming OUT_DIR or the file when it cannot be written.
Status write_outputs(const std::string& out_dir, const Outputs& outputs);

}  // namespace fia::io
