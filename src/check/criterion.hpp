// FIA-SPEC 21.1 criterion A: how a result is judged against an exact answer.
#pragma once

#include <string>
#include <vector>

#include "fia/tensor.hpp"

namespace fia::check {

struct Verdict {
  bool pass = true;
  std::string detail;      ///< why it failed (empty on success)
  double fraction = 1.0;   ///< share of elements within tolerance
  double worst_rel = 0.0;  ///< largest relative error among the elements outside it
};

/// attention_out judged against exact (pre-cast) values: |a - e| <= atol + rtol|e| on >= 99.5 %
/// of elements and no failing element with relative error >= 10 (rtol/atol per dtype: bf16
/// 2^-7 / 1e-4, others 0.005 / 2.5e-5). NaN where a number is expected fails.
Verdict criterion_a(const OwnedTensor& got, const std::vector<double>& expected);

/// softmax_lse: +inf exactly where expected, finite values within 1e-4 absolute + 1e-4 relative.
Verdict lse_match(const OwnedTensor& got, const std::vector<double>& expected);

/// The elements of a F16/BF16/F32/F64 tensor as doubles.
std::vector<double> to_doubles(const OwnedTensor& t);

}  // namespace fia::check
