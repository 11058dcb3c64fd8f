// The reference backend: a float64 transcription of FIA-SPEC sections 1 and 5.
#pragma once

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
/// (step 7), P·V, the learnable sink in the denominator (16), LSE = m + ln(l) (17); fully masked
/// and uncomputed rows give 0 and +inf (25.1 #1-2).
ReferenceResult reference_compute(const Problem& p);

}  // namespace fia::detail
