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

/// True when the CPU has bf16 dot-product instructions (x86 AVX512_BF16: vdpbf16ps, 32
/// multiply-adds of bf16 pairs into f32 lanes per instruction, twice the fp32 FMA rate on Zen 4).
bool bf16_dots_supported();

/// True when the AVX-512 kernels may use them (bf16_dots_supported(), and not forbidden by
/// allow_bf16_dots(false) or by the environment: FIA_BF16_DOTS=0); plan() reads it into the
/// plan. The in-place wide kernels (16-row items: decode MLA, 16 GQA heads, multi-token GQA
/// decode) then compute Q·Kᵀ of bf16 query and K rows, and P·V of bf16 V rows where P is E
/// rounded to bf16, as sums of the same exact products in another order (cpu/bf16_dots-inl.h).
bool bf16_dots_enabled();

/// Allows (the default) or forbids the bf16 dot products in plans made from now on; for tests and
/// benchmarks.
void allow_bf16_dots(bool allowed);

}  // namespace fia::detail
