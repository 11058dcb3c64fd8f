// The partial-attention extensions of fia::Options (docs/distributed.md).
#pragma once

#include "fia/args.hpp"
#include "fia/status.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// Applies Options::float32_out and Options::softmax_max to a problem built by build_problem:
/// out_dtype F32, and the softmax_max rows (FIA-SPEC 17's LSE addressing). Errors name
/// float32_out (with quant_scale2) or softmax_max (without softmax_lse_flag, not F32, not
/// softmax_lse's shape, a NaN or +inf element, a path that does not round E: kUnsupported).
/// An empty query (FIA-SPEC 19) only takes float32_out's output dtype: nothing else is checked.
Status apply_partial_options(const Options& options, Problem* p);

/// Every value of a softmax_max view finite or -inf (else kInvalidArgument naming softmax_max and
/// the element); run() checks them again, since they may change after plan().
Status check_softmax_max_values(const TensorView& t);

}  // namespace fia::detail
