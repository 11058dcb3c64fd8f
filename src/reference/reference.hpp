// The reference backend: a float64 transcription of FIA-SPEC sections 1 and 5.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "problem/problem.hpp"

namespace fia::detail {

/// Exact (float64) outputs before the final cast to the output dtype.
struct ReferenceResult {
  std::vector<double> out;  ///< attention_out, row-major in Problem::out_shape
  std::vector<double> lse;  ///< softmax_lse, row-major in Problem::lse_shape (empty without the flag)
};

/// Computes attention per FIA-SPEC 5 in float64: scores from exact inputs (int8/int4 K and V
/// dequantized exactly, 12.1), scale (as float32)
/// then pse, band and mask, softmax with the unnormalised exponentials rounded to the query dtype
/// (step 7, or per the path's rule, 25.3), P·V, the learnable sink in the denominator (16),
/// LSE = m + ln(l) (17); fully masked and uncomputed rows give 0 and +inf (25.1 #1-2). Keys whose
/// score is -inf (a pse of -inf) are excluded like masked ones (25.1 #24-25).
ReferenceResult reference_compute(const Problem& p);

/// An LSE as softmax_lse stores it (F32): +inf stays (fully masked rows); finite values beyond
/// float32 saturate at +-FLT_MAX (docs/numerics.md, "Overflow").
inline float lse_as_f32(double lse) {
  if (!std::isfinite(lse)) return static_cast<float>(lse);
  constexpr double kMax = std::numeric_limits<float>::max();
  return static_cast<float>(std::clamp(lse, -kMax, kMax));
}

/// One row of reference_compute: query row i of batch b, query head n. Writes v_dim values to
/// `out` and the LSE to `lse` and returns true, or returns false (writing nothing) when the row is
/// fully masked (0 / +inf). The cpu backend recomputes rows whose f32 intermediates overflow
/// with it (docs/numerics.md).
bool reference_row(const Problem& p, std::int64_t b, std::int64_t n, std::int64_t i, double* out, double* lse);

/// reference_row for int8 full quantization (Problem::full_quant, FIA-SPEC 13.1): 1024-key
/// chunks, an online softmax from fp16 scores, E rounded to fp16, P quantized to int8 with
/// quant_scale1 (half to even, saturated), exact int32 P·V dequantized with dequant_scale2 (the
/// first visible chunk in fp32, later ones in fp16 with fp16 accumulation), O / fp16(l), LSE =
/// ln(l) + m. Masked keys take no part; chunks with no visible key are skipped.
bool reference_full_quant_row(const Problem& p, std::int64_t b, std::int64_t n, std::int64_t i, double* out,
                              double* lse);

/// reference_row for MLA full quantization (Problem::mla_full_quant, FIA-SPEC 13.3): S = (Q_int8 ·
/// K_int8ᵀ + Qrope · Kropeᵀ) * dequant_scale_query[b][n][i] * key_scale * scale, exact; an online
/// softmax over 512-key chunks with P_q = round(127 * exp(S - chunk max)) (half to even) as int8;
/// O = sum over chunks of exp(chunk max - m) * (P_q · V_int8) / 127 / l * value_scale with l the
/// exact sum of exp(S - m); LSE = ln(l) + m. Masked keys take no part.
bool reference_mla_full_quant_row(const Problem& p, std::int64_t b, std::int64_t n, std::int64_t i, double* out,
                                  double* lse);

}  // namespace fia::detail
