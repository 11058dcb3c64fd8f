// KV element formats: widening loads of fp16/bf16/f32 rows and int8/int4 antiquant rows (FIA-SPEC 12).
// Included per Highway target by cpu/attention_item.cpp (the toggle guard below lets foreach_target
// re-include it once per target).
#if defined(FIA_CPU_KV_FORMATS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_KV_FORMATS_INL_H_
#undef FIA_CPU_KV_FORMATS_INL_H_
#else
#define FIA_CPU_KV_FORMATS_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// ---- element sources: element d of a stored row as f32, one or a vector of lanes at a time ------
// A source has the stored element type T (rows are T pointers; strides count T elements) and
//   one(row, d):      element d as float;
//   load(df, row, d): elements [d, d + Lanes) as floats, d a multiple of Lanes.
// Integer sources give the stored integers; antiquant scales and offsets are applied around them
// (cpu/antiquant.hpp in decode, dequant_row in prefill).

/// fp16 rows. Where Highway 1.0.3 widens fp16 in integer arithmetic (x86 below AVX2, SCALAR,
/// EMU128: no conversion instructions), it gives inf and NaN (exponent 31) finite values of
/// 65536 to 131008; those lanes are rebuilt here (sign, exponent 255, mantissa).
struct F16Src {
  static constexpr bool kSkipZeroWeights = false;  ///< see DequantF32Src (decode_rows-inl.h)
  using T = hwy::float16_t;
  static float one(const T* row, std::int64_t d) { return f16_to_f32(reinterpret_cast<const std::uint16_t*>(row)[d]); }
  static VF load(DF df, const T* row, std::int64_t d) {
    const auto h = hn::LoadU(hn::Rebind<T, DF>(), row + d);
#if (HWY_ARCH_X86 && HWY_TARGET >= HWY_SSE4) || HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
    const hn::RebindToUnsigned<DF> du;
    const auto bits = hn::PromoteTo(du, hn::BitCast(hn::Rebind<std::uint16_t, DF>(), h));
    const auto special = hn::Eq(hn::And(bits, hn::Set(du, 0x7C00u)), hn::Set(du, 0x7C00u));
    const auto rebuilt = hn::Or(hn::Or(hn::ShiftLeft<16>(hn::And(bits, hn::Set(du, 0x8000u))), hn::Set(du, 0x7F800000u)),
                                hn::ShiftLeft<13>(hn::And(bits, hn::Set(du, 0x3FFu))));
    return hn::IfThenElse(hn::RebindMask(df, special), hn::BitCast(df, rebuilt), hn::PromoteTo(df, h));
#else
    return hn::PromoteTo(df, h);
#endif
  }
};
struct BF16Src {
  static constexpr bool kSkipZeroWeights = false;  ///< see DequantF32Src (decode_rows-inl.h)
  using T = hwy::bfloat16_t;
  static float one(const T* row, std::int64_t d) { return bf16_to_f32(reinterpret_cast<const std::uint16_t*>(row)[d]); }
  static VF load(DF df, const T* row, std::int64_t d) { return hn::PromoteTo(df, hn::LoadU(hn::Rebind<T, DF>(), row + d)); }
};
struct F32Src {
  static constexpr bool kSkipZeroWeights = false;  ///< see DequantF32Src (decode_rows-inl.h)
  using T = float;
  static float one(const T* row, std::int64_t d) { return row[d]; }
  static VF load(DF df, const T* row, std::int64_t d) { return hn::LoadU(df, row + d); }
};

/// int8 K/V: sign-extended in registers.
struct I8Src {
  static constexpr bool kSkipZeroWeights = false;  ///< see DequantF32Src (decode_rows-inl.h)
  using T = std::int8_t;
  static float one(const T* row, std::int64_t d) { return row[d]; }
  static VF load(DF df, const T* row, std::int64_t d) {
    const hn::Rebind<std::int32_t, DF> di;
    return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(hn::Rebind<std::int8_t, DF>(), row + d)));
  }
};

/// int4 K/V packed eight to an int32, lowest nibble first (FIA-SPEC 12.6): element d is nibble
/// d % 8 of word d / 8, two's complement.
struct I4Src {
  static constexpr bool kSkipZeroWeights = false;  ///< see DequantF32Src (decode_rows-inl.h)
  using T = std::int32_t;
  static float one(const T* row, std::int64_t d) {
    const auto w = static_cast<std::uint32_t>(row[d / 8]);
    const auto x = static_cast<std::int32_t>((w >> (4 * (d % 8))) & 0xFu);
    return static_cast<float>(x >= 8 ? x - 16 : x);
  }
  /// Lanes / 2 bytes hold the lanes' nibbles (byte k: elements 2k, low nibble, and 2k + 1). Each
  /// byte goes to two 32-bit lanes, shifted so that its nibble is on top, then shifted down with
  /// sign extension. Vectors of 4, 8 or 16 floats; other widths take the scalar path.
  template <class D>
  static hn::Vec<D> load(D df, const T* row, std::int64_t d) {
#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
    constexpr std::size_t kLanes = hn::MaxLanes(D());
    if constexpr (kLanes == 4 || kLanes == 8 || kLanes == 16) {
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(row) + d / 2;
      std::uint64_t w = 0;
      std::memcpy(&w, bytes, kLanes / 2);
      const hn::Full128<std::uint8_t> d8;
      const auto v = hn::BitCast(d8, hn::Set(hn::Full128<std::uint64_t>(), w));
      const auto pairs = hn::InterleaveLower(v, v);  // b0 b0 b1 b1 ...
      const hn::RebindToUnsigned<D> du;
      const hn::Rebind<std::uint8_t, D> dbytes;
      hn::Vec<decltype(dbytes)> lanes;
      if constexpr (kLanes == 16) lanes = pairs;
      else if constexpr (kLanes == 8) lanes = hn::LowerHalf(pairs);
      else lanes = hn::LowerHalf(hn::LowerHalf(pairs));
      const auto x = hn::PromoteTo(du, lanes);
      const auto shifts = hn::OddEven(hn::Set(du, 24u), hn::Set(du, 28u));  // odd lanes: high nibble
      const hn::RebindToSigned<D> di;
      return hn::ConvertTo(df, hn::ShiftRight<28>(hn::BitCast(di, hn::Shl(x, shifts))));
    }
#endif
    HWY_ALIGN float tmp[HWY_MAX_BYTES / sizeof(float)];
    for (std::size_t k = 0; k < hn::Lanes(df); ++k) tmp[k] = one(row, d + static_cast<std::int64_t>(k));
    return hn::Load(df, tmp);
  }
};

/// Elements per stored word of a row source: 8 for int4 rows (eight values packed per int32),
/// else 1.
template <class Src>
constexpr std::int64_t kElementsPerWord = std::is_same_v<typename Src::T, std::int32_t> ? 8 : 1;

// int4 rows read in place through a 16-entry table on AVX-512 (vpermps looks at the low 4 bits of
// each index lane, so a lane holding a whole byte indexes by its low nibble).
#undef FIA_INT4_LANES
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3_ZEN4 || HWY_TARGET == HWY_AVX3_SPR
#define FIA_INT4_LANES 1

/// The logical element at position d of a row in I4LanesSrc's lane order: per block of 32, the
/// even elements, then the odd ones.
HWY_INLINE std::int64_t lane_order_element(std::int64_t d) {
  return (d & ~std::int64_t{31}) + 2 * (d & 15) + ((d >> 4) & 1);
}

/// int4 K/V (FIA-SPEC 12.6) read in place, a block of 32 elements (16 bytes) at a time in lane
/// order: the block's even elements (the low nibbles) in one vector, its odd elements (the high
/// nibbles) in the next. Per 32 elements: one byte-to-lane widening, one shift and two table
/// lookups, with no unpacked copy of the row. The other operand of a product must be in the same
/// order (permute_lane_order).
struct I4LanesSrc {
  static constexpr bool kSkipZeroWeights = false;  ///< see DequantF32Src (decode_rows-inl.h)
  static constexpr bool kBlockPairs = true;        ///< loaded by load2, two vectors at a time
  using T = std::int32_t;
  static float one(const T* row, std::int64_t d) { return I4Src::one(row, lane_order_element(d)); }
  /// Positions [d, d + 32) in lane order, d a multiple of 32.
  static void load2(DF, const T* row, std::int64_t d, VF& even, VF& odd) {
    const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
    const __m512i bytes = _mm512_cvtepu8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const std::uint8_t*>(row) + d / 2)));
    even = VF{_mm512_permutexvar_ps(bytes, table)};
    odd = VF{_mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), table)};
  }
};
#endif  // FIA_INT4_LANES

/// Rows of a source that loads two vectors at a time (load2).
template <class Src>
concept BlockPairSource = requires { Src::kBlockPairs; };

/// Rows of floats in memory, widened a vector at a time (fp16, bf16, f32, dequantized f32), as
/// opposed to int8/int4 rows converted in registers: the decode products take wider blocks of them.
template <class Src>
concept FloatRowSource =
    std::is_same_v<Src, F16Src> || std::is_same_v<Src, BF16Src> || std::is_base_of_v<F32Src, Src>;

#ifdef FIA_INT4_LANES
/// row[0:n) (n a multiple of 32) rearranged from logical order into I4LanesSrc's lane order, or
/// back (kBack): two two-source permutes (`vpermt2ps`/`vpermi2ps`) per block of 32. Permuted
/// element by element, the query rows and accumulators had taken about a fifth of int4 decode's
/// time at 64 tokens per item (in L2, one thread, D5's heads: 0.79x the time; 256 tokens 0.93x;
/// cold D5 within the noise).
template <bool kBack>
HWY_INLINE void permute_lane_order(float* row, std::int64_t n) {
  const __m512i first = kBack ? _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)
                              : _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i second = kBack ? _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)
                               : _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (std::int64_t b = 0; b < n; b += 32) {
    const __m512 lo = _mm512_loadu_ps(row + b), hi = _mm512_loadu_ps(row + b + 16);
    _mm512_storeu_ps(row + b, _mm512_permutex2var_ps(lo, first, hi));
    _mm512_storeu_ps(row + b + 16, _mm512_permutex2var_ps(lo, second, hi));
  }
}
#endif  // FIA_INT4_LANES

/// int4 row -> int8 row: out[0:n) = the n (even) nibbles of `row`, sign-extended (FIA-SPEC 12.6).
/// Whole vectors of bytes at a time: low and high nibbles split, sign-extended with (x ^ 8) - 8,
/// stored interleaved (byte k holds elements 2k and 2k + 1).
HWY_INLINE void unpack_int4_row(const std::int32_t* row, std::int64_t n, std::int8_t* out) {
  const hn::ScalableTag<std::uint8_t> du8;
  const hn::ScalableTag<std::int8_t> di8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(du8));
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(row);
  const auto low = hn::Set(du8, 0x0F);
  const auto eight = hn::Set(di8, 8);
  std::int64_t k = 0;
  for (; k + L <= n / 2; k += L) {
    const auto v = hn::LoadU(du8, bytes + k);
    const auto lo = hn::Sub(hn::BitCast(di8, hn::Xor(hn::And(v, low), hn::BitCast(du8, eight))), eight);
    const auto hi = hn::Sub(hn::BitCast(di8, hn::Xor(hn::ShiftRight<4>(v), hn::BitCast(du8, eight))), eight);
    hn::StoreInterleaved2(lo, hi, di8, out + 2 * k);
  }
  for (std::int64_t d = 2 * k; d < n; ++d) out[d] = static_cast<std::int8_t>(I4Src::one(row, d));
}

/// The antiquant factors of one K or V run of KV head h (FIA-SPEC 12.3): channel tables (null:
/// none) and the token factors of the run's first token (token_stride apart).
struct RunFactors {
  const float* cs = nullptr;
  const float* co = nullptr;
  const float* ts = nullptr;
  const float* to = nullptr;
  std::int64_t stride = 0;

  RunFactors(const Problem& p, const Antiquant& q, std::int64_t dim, std::int64_t b, std::int64_t h, std::int64_t j) {
    if (!q.channel_scale.empty()) cs = q.channel_scale.data() + h * dim;
    if (!q.channel_offset.empty()) co = q.channel_offset.data() + h * dim;
    if (!q.per_token) return;
    const std::int64_t o = p.token_factor_offset(q, b, h, j);
    ts = q.token_scale + o;
    if (q.token_offset) to = q.token_offset + o;
    stride = q.token_stride;
  }
  float scale(std::int64_t t) const { return ts ? ts[t * stride] : 1.0f; }
  float offset(std::int64_t t) const { return to ? to[t * stride] : 0.0f; }
};

/// dst[0:n) = float(row[0:n)).
template <class Src>
HWY_INLINE void widen_row(const typename Src::T* row, std::int64_t n, float* dst) {
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t d = 0;
  for (; d + L <= n; d += L) hn::StoreU(Src::load(df, row, d), df, dst + d);
  for (; d < n; ++d) dst[d] = Src::one(row, d);
}

/// x[d] = (x[d] + co[d] + to) * (cs[d] * ts) for d < n: the antiquant formula (x + offset) * scale
/// of FIA-SPEC 12.1 with the factors of problem.hpp; cs / co null mean 1 / 0.
HWY_INLINE void dequant_row(float* x, std::int64_t n, const float* cs, const float* co, float ts, float to) {
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const VF vts = hn::Set(df, ts), vto = hn::Set(df, to);
  std::int64_t d = 0;
  for (; d + L <= n; d += L) {
    VF v = hn::Add(hn::LoadU(df, x + d), vto);
    if (co) v = hn::Add(v, hn::LoadU(df, co + d));
    const VF s = cs ? hn::Mul(hn::LoadU(df, cs + d), vts) : vts;
    hn::StoreU(hn::Mul(v, s), df, x + d);
  }
  for (; d < n; ++d) x[d] = (x[d] + (co ? co[d] : 0.0f) + to) * ((cs ? cs[d] : 1.0f) * ts);
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_KV_FORMATS_INL_H_
