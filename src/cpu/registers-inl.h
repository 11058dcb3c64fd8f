// How many vector registers the Highway target has: the register blocks of the kernels (how many
// accumulators a block keeps live) follow it, not the vector width. NEON has 32 registers of 16
// bytes, AVX2 16 of 32 bytes, AVX-512 32 of 64 bytes, SVE 32 of any width.
// Included per Highway target by cpu/attention_item.cpp and cpu/full_quant.cpp (the toggle guard
// lets foreach_target re-include it once per target).
#if defined(FIA_CPU_REGISTERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_REGISTERS_INL_H_
#undef FIA_CPU_REGISTERS_INL_H_
#else
#define FIA_CPU_REGISTERS_INL_H_
#endif

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {

#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
inline constexpr int kVectorRegisters = 16;  // emulated vectors: keep the blocks small
#elif HWY_ARCH_X86
// Lower target bits are better targets: every x86 target from AVX3 down is AVX-512 (zmm0-31).
inline constexpr int kVectorRegisters = HWY_TARGET <= HWY_AVX3 ? 32 : 16;
#else
inline constexpr int kVectorRegisters = 32;  // Arm NEON (v0-v31) and SVE (z0-z31); RISC-V V
#endif

/// Keeps v in a register. Otherwise GCC folds a vector loaded once into every multiply-add that
/// uses it, as a memory operand: two loads for two multiply-adds, which keeps the products waiting
/// on the load ports (the in-place P·V's broadcast P; AVX2 decode's query vectors: D1 about 0.95x
/// and D2 0.99x the time with it, medians of 15 alternating runs whose single runs spread by 20 %,
/// Zen 4 capped at AVX2). Only x86 multiply-adds take memory operands.
template <class V>
HWY_INLINE void keep_in_register(V& v) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  asm("" : "+v"(v.raw));
#else
  (void)v;
#endif
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_REGISTERS_INL_H_
