// Which instruction set the cpu kernels run on (Highway dynamic dispatch).
#pragma once

#include <string>
#include <vector>

namespace fia::detail {

struct Problem;

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
/// multiply-adds of bf16 pairs into f32 lanes per instruction).
bool bf16_dots_supported();

/// True when the CPU runs them faster than fp32 FMAs, read off its vendor (CPUID) so that a call
/// gives the same bits in every process on one machine: AMD (Zen 4 and later), where one
/// vdpbf16ps issues at the rate of one 16-lane FMA and so does twice its multiply-adds (463
/// against 233 GFLOP/s on a 2-core Zen 4 VM). Not on Intel: a 2-core Emerald Rapids VM ran them at
/// half its FMA rate (145 against 291 GFLOP/s; decode MLA took 1.6x the time with them, bf16 TND
/// prefill 1.33x).
bool bf16_dots_faster();

/// True when the AVX-512 kernels use them (the dispatched target being an AVX-512 one: FIA_ISA=AVX2
/// takes none): the CPU has them, and the setting asks for them (by default bf16_dots_faster();
/// FIA_BF16_DOTS=0 forbids them, FIA_BF16_DOTS=1 asks for them on any CPU that has them;
/// set_bf16_dots overrides both). plan() reads it into the plan. The in-place
/// wide kernels (16-row items: decode MLA, 16 GQA heads, multi-token GQA decode) and bf16 prefill
/// then compute Q·Kᵀ of bf16 query and K rows (prefill's on AMX tiles instead where the plan takes
/// them: cpu/amx.hpp), and P·V of bf16 V rows where P is E rounded to bf16 (prefill's on the tiles
/// where the plan takes them), as sums of the same exact products in another order
/// (cpu/bf16_dots-inl.h).
bool bf16_dots_enabled();

/// False when FIA_BF16_DOTS, as last read (at start-up or by reset_bf16_dots), is neither unset,
/// empty, 0 nor 1: plan() then fails with kInvalidArgument naming FIA_BF16_DOTS.
bool bf16_dots_setting_valid();

/// Asks for (true) or forbids (false) the bf16 dot products in plans made from now on, whatever
/// the CPU's default; for tests and benchmarks.
void set_bf16_dots(bool on);

/// Returns to the default setting: FIA_BF16_DOTS, else bf16_dots_faster().
void reset_bf16_dots();

/// Reads the kernels' settings into `p` as plan() does, so that a plan computes one way however
/// they change while it runs: Problem::bf16_dots (bf16_dots_enabled(), on kernels that have them:
/// none under FIA_ISA=AVX2, so that the plan says what the kernels do) and Problem::amx
/// (cpu/amx.hpp amx_enabled(), asked only for bf16 query and K rows on kernels that can take the
/// tiles, so that Linux is asked for them only then).
void read_kernel_settings(Problem* p);

}  // namespace fia::detail
