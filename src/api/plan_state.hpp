// What a fia::Plan holds.
#pragma once

#include "fia/args.hpp"
#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

struct PlanState {
  Problem problem;
  Backend backend = Backend::kCpu;  ///< resolved (never kDefault)
  int threads = 1;                  ///< workers of the cpu backend
  CpuPlan cpu;
};

}  // namespace fia::detail
