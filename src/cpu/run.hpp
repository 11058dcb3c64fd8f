// Layer 5 of the cpu backend: the thread pool over work items.
#pragma once

#include "cpu/attention_item.hpp"
#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

/// Runs every work item of `plan` with up to `threads` oneTBB workers; `workspace` holds
/// plan.workspace_bytes bytes. Output rows no item writes must be pre-filled by the caller.
void cpu_run(const Problem& p, const CpuPlan& plan, const OutputRows& dst, void* workspace, int threads);

}  // namespace fia::detail
