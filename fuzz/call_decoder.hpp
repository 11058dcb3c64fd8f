// Decodes a fuzz input into one small, bounded FIA call for the plan+run fuzzer.
//
// The input is read front to back (fuzz/byte_reader.hpp): first a test::CallSpec (layout, dtypes,
// B/N/S/D, lengths, storage, masks, sparse modes, pse, sink, LSE, rope, KV antiquant), mostly in
// the space the test suites draw valid calls from, built by test::build_call with values from a
// seed; then, until the input ends, mutations of the resulting FiaArgs (attributes, length
// arrays, replaced / dropped / broadcast tensors, edited integer tensors) that reach the
// validation rules. Every tensor a mutation makes is allocated at its full size, so a call never
// lies about its buffers: whatever goes wrong below fia::plan is fia's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "fia/fia.hpp"
#include "support/call_builder.hpp"

namespace fia::fuzz {

/// Which inputs the decoder may produce.
struct DecodeMode {
  /// Also NaN / inf / huge values in tensors, rows of -inf position bias and huge scales
  /// (FIA_FUZZ_EXTREME=1). Off by default: the known numerics issues of these inputs are being
  /// fixed separately (fuzz/findings/README.md).
  bool extreme = false;
  /// Print each decoded spec to stderr before it is built (FIA_FUZZ_VERBOSE=1).
  bool verbose = false;
};

/// A decoded call and what the fuzzer may demand of its results.
struct FuzzCall {
  test::TestCall call;
  Options options;  ///< strict and threads as decoded; the fuzzer sets the backend
  /// Every value read is finite and within 10, and no mutation may have exposed the builder's
  /// large "never read" garbage: the cpu result must meet criterion A against the reference
  /// (up to what the P cast explains, fuzz/plan_run_fuzzer.cpp).
  bool ordinary = true;
  /// A bound on |V| (dequantized) over every element fia may read; the fuzzer scales its
  /// allowance for the P cast by it.
  double value_bound = 1.0;
  std::string trace;  ///< the spec and the mutations applied, for reports
};

/// Decodes `data` into a call (never fails: any input is some call, valid or not).
FuzzCall decode_call(const std::uint8_t* data, std::size_t size, const DecodeMode& mode);

}  // namespace fia::fuzz
