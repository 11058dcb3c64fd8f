// Running calls in tests: through the public API, and the exact float64 reference.
#pragma once

#include <vector>

#include "fia/fia.hpp"
#include "plan/plan.hpp"
#include "reference/reference.hpp"

namespace fia::test {

/// Plans and runs `args` on `backend` with `threads` workers into freshly allocated outputs.
Status run_call(const FiaArgs& args, Backend backend, int threads, Outputs* out, bool strict = false);

/// Plans `args` on the cpu backend with `threads` workers and runs it into the caller's `out` and
/// `lse` views (any strides, any prior contents), with a workspace of its own.
Status run_into(const FiaArgs& args, MutableTensorView out, MutableTensorView lse, int threads = 2);

/// The exact (pre-cast) float64 answer of the reference for a valid call.
Status reference_exact(const FiaArgs& args, detail::ReferenceResult* out);

/// Runs `args` on the cpu backend with a schedule built from `limits` for `threads` workers (tests
/// force chunk sizes, budgets, or multithreading of small calls this way); the plan used goes to
/// `used` when given. Of `options`, only the partial-attention extensions apply.
Outputs run_with_limits(const FiaArgs& args, const detail::PlanLimits& limits, int threads,
                        detail::CpuPlan* used = nullptr, const Options& options = {});

/// Only validates: the status fia::plan returns (default mode unless `strict`).
Status plan_status(const FiaArgs& args, bool strict = false);

/// Tensor helpers for hand-written calls: values given row-major in `shape`.
OwnedTensor tensor_of(DType dtype, std::vector<std::int64_t> shape, const std::vector<float>& values);

}  // namespace fia::test
