// Layer 2: validation of FiaArgs into the canonical Problem (DESIGN.md "Validate once, then trust").
#pragma once

#include "fia/args.hpp"
#include "fia/status.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// Checks every rule of FIA-SPEC 20 that concerns the implemented features (semantic rules
/// always, Ascend hardware limits when `strict`), then resolves layouts, lengths, storage, masks
/// and sparse modes into `out`. Returns the first broken rule, naming the torch_npu parameter.
Status build_problem(const FiaArgs& args, bool strict, Problem* out);

}  // namespace fia::detail
