// Checks shared by the kernel and property tests: the cpu backend against the float64 reference,
// thread-count invariance, and two forms of one call giving the same bits.
#pragma once

#include <string>

#include "fia/fia.hpp"

namespace fia::test {

/// Runs `args` on the cpu backend (`threads` workers) and the exact reference: attention_out
/// meets FIA-SPEC 21.1 criterion A and, when `lse`, softmax_lse matches. With `isa` non-empty the
/// kernels must have run on that instruction set. `context` describes the call in failures.
void expect_cpu_matches_reference(const FiaArgs& args, bool lse, const std::string& context, int threads = 2,
                                  const std::string& isa = "");

/// Runs `args` with forced multithreading and chunking on 1, 2 and 5 workers: the outputs and LSE
/// are the same bits (DESIGN.md: split sizes never depend on the thread count).
void expect_thread_invariant(const FiaArgs& args, const std::string& context);

/// Runs two calls that give the same logical inputs in different forms (a KV cache stored two
/// ways, say) on the cpu backend with 2 workers: both succeed, and their outputs and LSE are the
/// same bits. `a_what` and `b_what` name the forms, `context` the call, in failures.
void expect_same_bits(const FiaArgs& a, const std::string& a_what, const FiaArgs& b, const std::string& b_what,
                      const std::string& context);

}  // namespace fia::test
