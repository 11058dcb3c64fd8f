// Mutations of a built FIA call for the plan+run fuzzer (fuzz/call_decoder.hpp): attributes,
// length arrays and tensors changed in ways the validation rules must catch or compute.
#pragma once

#include <ostream>

#include "byte_reader.hpp"
#include "support/call_builder.hpp"

namespace fia::fuzz {

/// At most this many mutations per input.
inline constexpr int kMaxMutations = 8;

/// Reads mutations from `r` and applies them to `call`, describing each on `trace`.
struct Mutator {
  ByteReader& r;
  test::TestCall& call;
  bool extreme;       ///< also NaN / inf / huge values (DecodeMode::extreme)
  float value_range;  ///< bound of the float values of replaced tensors
  std::ostream& trace;

  /// Reads and applies one mutation. Returns false when it may have let values other than
  /// ordinary ones into what fia reads (huge or non-finite values, or the builder's garbage).
  bool apply();
};

}  // namespace fia::fuzz
