// The integer products of the full-quant kernel (cpu/full_quant.cpp), per Highway target. Operands
// are int32 lanes holding G small integers ("groups"), multiplied group by group and summed into
// int32 lanes exactly:
//   G = 2: int16 pairs (x & 0xFFFF) | (y << 16), 16-bit multiply-adds (vpmaddwd, smlal);
//   G = 4: byte quads, u8 x s8 dot products (AVX-512 VNNI / AVX-VNNI vpdpbusd, Arm I8MM usdot),
//          one operand offset by 128 (bits ^ 0x80) and the offset's sum subtracted by the caller.
// Q·Kᵀ runs with rows in lanes (query groups transposed, a K group broadcast per column); P·V with
// V's columns in lanes (a P group broadcast per row). Included by cpu/full_quant.cpp and
// cpu/mla_full_quant.cpp.
#if defined(FIA_CPU_FULL_QUANT_PRODUCTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_FULL_QUANT_PRODUCTS_INL_H_
#undef FIA_CPU_FULL_QUANT_PRODUCTS_INL_H_
#else
#define FIA_CPU_FULL_QUANT_PRODUCTS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DI = hn::ScalableTag<std::int32_t>;
using VI = hn::Vec<DI>;

/// Targets with byte quads (G = 4), on a CPU with the matching instruction: AVX-512 VNNI for the
/// AVX-512 targets, AVX-VNNI (VEX-encoded, 256-bit) for AVX2, the mixed-sign dot product of Armv8.6
/// I8MM (usdot, the same u8 x s8 quads) for NEON, with GCC (clang's assembler rejects usdot in a
/// function compiled without +i8mm, whatever .arch the inline assembly sets: it takes the pairs).
#undef FIA_FULL_QUANT_QUADS
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
#define FIA_FULL_QUANT_QUADS 1
#elif HWY_ARCH_ARM_A64 && HWY_TARGET == HWY_NEON && HWY_COMPILER_GCC_ACTUAL
#define FIA_FULL_QUANT_QUADS 1
#else
#define FIA_FULL_QUANT_QUADS 0
#endif

HWY_INLINE std::int32_t load_group(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

#if HWY_TARGET == HWY_SCALAR
// One-lane target: pairs only, summed in plain integer arithmetic.
template <int G, int NV, int NC>
HWY_INLINE void qk_block(const std::int32_t* q, std::int64_t Rp, const std::byte* k, std::int64_t krow,
                         std::int64_t groups, std::int32_t* out) {
  static_assert(G == 2, "byte quads need VNNI");
  for (std::int64_t c = 0; c < NC; ++c)
    for (std::int64_t r = 0; r < NV; ++r) {
      std::int32_t dot = 0;
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::int32_t a = q[g * Rp + r], b = load_group(k + c * krow + 4 * g);
        dot += static_cast<std::int16_t>(a & 0xFFFF) * static_cast<std::int16_t>(b & 0xFFFF) +
               static_cast<std::int16_t>(a >> 16) * static_cast<std::int16_t>(b >> 16);
      }
      out[c * Rp + r] = dot;
    }
}

template <int G, int NR>
HWY_INLINE void pv_block(const std::int32_t* p, std::int64_t Rp, const std::int32_t* v, std::int64_t VDp,
                         std::int64_t groups, std::int32_t* acc) {
  static_assert(G == 2, "byte quads need VNNI");
  for (std::int64_t r = 0; r < NR; ++r)
    for (std::int64_t d = 0; d < 4; ++d)
      for (std::int64_t g = 0; g < groups; ++g) {
        const std::int32_t a = p[g * Rp + r], b = v[g * VDp + d];
        acc[r * VDp + d] += static_cast<std::int16_t>(a & 0xFFFF) * static_cast<std::int16_t>(b & 0xFFFF) +
                            static_cast<std::int16_t>(a >> 16) * static_cast<std::int16_t>(b >> 16);
      }
}
#else
using DW = hn::Repartition<std::int16_t, DI>;

/// sum += the group products of `u` and `s` (G = 4: u holds the unsigned bytes, s the signed).
template <int G>
HWY_INLINE VI dot(DI di, VI sum, VI u, VI s, VI& sum1) {
#if FIA_FULL_QUANT_QUADS
  if constexpr (G == 4) {  // inline assembly: the targets' compiler flags include neither VNNI nor I8MM
    auto raw = sum.raw;
#if HWY_ARCH_ARM_A64
    // GNU as takes I8MM only on an Armv8.2 base (.arch_extension alone is refused on armv8-a);
    // the .arch stays in force after the statement, a superset of the NEON target's armv8-a+crypto.
    asm(".arch armv8.2-a+crypto+i8mm\n\tusdot %0.4s, %1.16b, %2.16b" : "+w"(raw) : "w"(u.raw), "w"(s.raw));
#elif HWY_TARGET == HWY_AVX2
    asm("%{vex%} vpdpbusd %[s], %[u], %[acc]" : [acc] "+v"(raw) : [u] "v"(u.raw), [s] "v"(s.raw));
#else
    asm("vpdpbusd %[s], %[u], %[acc]" : [acc] "+v"(raw) : [u] "v"(u.raw), [s] "v"(s.raw));
#endif
    return VI{raw};
  }
#endif
  const DW dw;
  return hn::ReorderWidenMulAccumulate(di, hn::BitCast(dw, u), hn::BitCast(dw, s), sum, sum1);
}

/// The sums of dot<G>'s two accumulators, lane by lane: pairs are widened into two partial sums
/// that Highway may have split by halves (NEON: the low and high halves of the vector) and
/// RearrangeToOddPlusEven puts back in lane order; quads hold their sums in `sum` already.
template <int G>
HWY_INLINE VI finish(VI sum, VI sum1) {
  if constexpr (G == 4) return sum;
  return hn::RearrangeToOddPlusEven(sum, sum1);
}

/// Q·Kᵀ of NV row vectors x NC columns into out[c * Rp + rows] (int32, column-major): query groups
/// q[g * Rp + rows] (the signed operand), K groups broadcast from row c at k + c * krow + 4 g.
template <int G, int NV, int NC>
HWY_INLINE void qk_block(const std::int32_t* q, std::int64_t Rp, const std::byte* k, std::int64_t krow,
                         std::int64_t groups, std::int32_t* out) {
  const DI di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(di));
#define FIA_ZERO6(v)                                                                                       \
  VI a##v##0 = hn::Zero(di), a##v##1 = hn::Zero(di), a##v##2 = hn::Zero(di), a##v##3 = hn::Zero(di),      \
     a##v##4 = hn::Zero(di), a##v##5 = hn::Zero(di);                                                      \
  VI b##v##0 = hn::Zero(di), b##v##1 = hn::Zero(di), b##v##2 = hn::Zero(di), b##v##3 = hn::Zero(di),      \
     b##v##4 = hn::Zero(di), b##v##5 = hn::Zero(di);
  FIA_ZERO6(0) FIA_ZERO6(1) FIA_ZERO6(2) FIA_ZERO6(3)
#undef FIA_ZERO6
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int32_t* qg = q + g * Rp;
    const VI q0 = hn::LoadU(di, qg);
    const VI q1 = NV > 1 ? hn::LoadU(di, qg + L) : q0;
    const VI q2 = NV > 2 ? hn::LoadU(di, qg + 2 * L) : q0;
    const VI q3 = NV > 3 ? hn::LoadU(di, qg + 3 * L) : q0;
#define FIA_COLUMN(n)                                                         \
  if constexpr (NC > n) {                                                     \
    const VI kn = hn::Set(di, load_group(k + n * krow + 4 * g));              \
    a0##n = dot<G>(di, a0##n, kn, q0, b0##n);                                 \
    if constexpr (NV > 1) a1##n = dot<G>(di, a1##n, kn, q1, b1##n);           \
    if constexpr (NV > 2) a2##n = dot<G>(di, a2##n, kn, q2, b2##n);           \
    if constexpr (NV > 3) a3##n = dot<G>(di, a3##n, kn, q3, b3##n);           \
  }
    FIA_COLUMN(0) FIA_COLUMN(1) FIA_COLUMN(2) FIA_COLUMN(3) FIA_COLUMN(4) FIA_COLUMN(5)
#undef FIA_COLUMN
  }
#define FIA_STORE(n)                                                                               \
  if constexpr (NC > n) {                                                                          \
    std::int32_t* o = out + n * Rp;                                                                \
    hn::StoreU(finish<G>(a0##n, b0##n), di, o);                                   \
    if constexpr (NV > 1) hn::StoreU(finish<G>(a1##n, b1##n), di, o + L);         \
    if constexpr (NV > 2) hn::StoreU(finish<G>(a2##n, b2##n), di, o + 2 * L);     \
    if constexpr (NV > 3) hn::StoreU(finish<G>(a3##n, b3##n), di, o + 3 * L);     \
  }
  FIA_STORE(0) FIA_STORE(1) FIA_STORE(2) FIA_STORE(3) FIA_STORE(4) FIA_STORE(5)
#undef FIA_STORE
}

/// acc[r * VDp + d] += sum over `groups` of P group (r, g) · V group (g, d) for NR rows and four
/// vectors of d: P groups at p[g * Rp + r] (the signed operand), V groups at v[g * VDp + d].
template <int G, int NR>
HWY_INLINE void pv_block(const std::int32_t* p, std::int64_t Rp, const std::int32_t* v, std::int64_t VDp,
                         std::int64_t groups, std::int32_t* acc) {
  const DI di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(di));
#define FIA_ZERO4(r)                                                                                    \
  VI a##r##0 = hn::Zero(di), a##r##1 = hn::Zero(di), a##r##2 = hn::Zero(di), a##r##3 = hn::Zero(di);    \
  VI b##r##0 = hn::Zero(di), b##r##1 = hn::Zero(di), b##r##2 = hn::Zero(di), b##r##3 = hn::Zero(di);
  FIA_ZERO4(0) FIA_ZERO4(1)
#undef FIA_ZERO4
  for (std::int64_t g = 0; g < groups; ++g) {
    const std::int32_t* vg = v + g * VDp;
    const VI v0 = hn::LoadU(di, vg), v1 = hn::LoadU(di, vg + L), v2 = hn::LoadU(di, vg + 2 * L),
             v3 = hn::LoadU(di, vg + 3 * L);
#define FIA_ROW(r)                                           \
  if constexpr (NR > r) {                                    \
    const VI pr = hn::Set(di, p[g * Rp + r]);                \
    a##r##0 = dot<G>(di, a##r##0, v0, pr, b##r##0);          \
    a##r##1 = dot<G>(di, a##r##1, v1, pr, b##r##1);          \
    a##r##2 = dot<G>(di, a##r##2, v2, pr, b##r##2);          \
    a##r##3 = dot<G>(di, a##r##3, v3, pr, b##r##3);          \
  }
    FIA_ROW(0) FIA_ROW(1)
#undef FIA_ROW
  }
  auto add = [&](VI a, VI b, std::int32_t* dst) {
    hn::StoreU(hn::Add(hn::LoadU(di, dst), finish<G>(a, b)), di, dst);
  };
#define FIA_ADD(r)                                                                                    \
  if constexpr (NR > r) {                                                                             \
    std::int32_t* row = acc + r * VDp;                                                                \
    add(a##r##0, b##r##0, row), add(a##r##1, b##r##1, row + L), add(a##r##2, b##r##2, row + 2 * L),  \
        add(a##r##3, b##r##3, row + 3 * L);                                                           \
  }
  FIA_ADD(0) FIA_ADD(1)
#undef FIA_ADD
}
#endif  // HWY_TARGET == HWY_SCALAR

/// hn::ConvertTo(di, hn::Round(v)) for finite v below 2^31 in magnitude (P's quantization: v
/// clamped to [-128, 127] in cpu/full_quant.cpp, E * 127 with E in [0, 1] in the MLA kernel): on
/// AVX-512 one conversion rounding to nearest even (embedded rounding, whatever MXCSR says)
/// instead of a rounding, a conversion and ConvertTo's overflow fix-up; on AVX2, SSE4 and SSSE3
/// the rounding and a plain conversion. P4 (in-process A/B, Emerald Rapids VM without AMX, 2
/// threads): 0.97x the time on AVX3 (faster in 7 of 8 alternating pairs), 0.95x on AVX2 (8 of 8).
template <class V>
HWY_INLINE VI nearest_int(DI di, V v) {
#if HWY_ARCH_X86 && HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
#if HWY_TARGET <= HWY_AVX3
  if constexpr (sizeof(v.raw) == 64)
    return VI{_mm512_cvt_roundps_epi32(v.raw, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
#endif
#if HWY_TARGET <= HWY_AVX2
  if constexpr (sizeof(v.raw) == 32) return VI{_mm256_cvttps_epi32(hn::Round(v).raw)};
#endif
  if constexpr (sizeof(v.raw) == 16) return VI{_mm_cvttps_epi32(hn::Round(v).raw)};
#endif
  return hn::ConvertTo(di, hn::Round(v));
}

/// `group` with value k of the group set from x (one value per lane): pairs take the low 16 bits,
/// quads the low 8 bits of each (quads of P stay signed). Value k must still be 0 in `group`.
template <int G>
HWY_INLINE VI add_to_group(DI di, VI group, VI x, int k) {
  const VI mask = hn::Set(di, G == 2 ? 0xFFFF : 0xFF);
  return hn::Or(group, hn::ShiftLeftSame(hn::And(x, mask), k * (32 / G)));
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_FULL_QUANT_PRODUCTS_INL_H_
