// Which instruction set the cpu kernels run on (Highway dynamic dispatch).
#pragma once

#include <string>
#include <vector>

namespace fia::detail {

/// Applies FIA_ISA once per process: the best instruction set the kernels may use, by Highway's
/// target name ("AVX3", "AVX2", "SSE4", "SSSE3", "SCALAR" on x86; "NEON", "SVE", ... on Arm).
/// Targets better than it are disabled. Returns false (and changes nothing) for an unknown name.
bool apply_isa_cap_from_env();

/// Instruction sets compiled into this build that the CPU supports, best first.
std::vector<std::string> available_isas();

/// Restricts the kernels to exactly `name` (one of available_isas()); "" restores the default.
/// For tests and benchmarks. Returns false for an unknown or unsupported name.
bool force_isa(const std::string& name);

}  // namespace fia::detail
