// What a fia::Plan holds.
#pragma once

#include <memory>

#include "fia/args.hpp"
#include "fia/fia.hpp"
#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail {

struct PlanState {
  Problem problem;
  bool strict = false;              ///< how problem was validated
  Backend backend = Backend::kCpu;  ///< resolved (never kDefault)
  int threads = 1;                  ///< workers of the cpu backend
  Options options;                  ///< as plan() took them (run(plan, args) applies them again)
  CpuPlan cpu;
};

/// Wraps a hand-made state into a Plan (tests force schedules this way).
struct PlanAccess {
  static Plan make(std::shared_ptr<const PlanState> state) {
    Plan p;
    p.state_ = std::move(state);
    return p;
  }
};

}  // namespace fia::detail
