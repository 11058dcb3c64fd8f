#include "support/run_helpers.hpp"

#include <gtest/gtest.h>

#include "api/plan_state.hpp"
#include "cpu/isa.hpp"
#include "support/call_builder.hpp"
#include "validate/build_problem.hpp"
#include "validate/partial.hpp"

namespace fia::test {

Status run_call(const FiaArgs& args, Backend backend, int threads, Outputs* out, bool strict) {
  Options o;
  o.backend = backend;
  o.threads = threads;
  o.strict = strict;
  return fused_infer_attention_score(args, o, out);
}

Status run_into(const FiaArgs& args, MutableTensorView out, MutableTensorView lse, int threads) {
  Options options;
  options.backend = Backend::kCpu;
  options.threads = threads;
  Plan planned;
  const Status st = fia::plan(args, options, &planned);
  if (!st.ok()) return st;
  std::vector<std::byte> ws(planned.workspace_bytes());
  return run(planned, out, lse, ws.data(), ws.size());
}

Status reference_exact(const FiaArgs& args, detail::ReferenceResult* out) {
  detail::Problem p;
  Status st = detail::build_problem(args, false, &p);
  if (st.ok()) *out = detail::reference_compute(p);
  return st;
}

Outputs run_with_limits(const FiaArgs& args, const detail::PlanLimits& limits, int threads, detail::CpuPlan* used,
                        const Options& options) {
  auto state = std::make_shared<detail::PlanState>();
  Outputs o;
  Status built = detail::build_problem(args, false, &state->problem);
  if (built.ok()) built = detail::apply_partial_options(options, &state->problem);
  detail::read_kernel_settings(&state->problem);  // as plan() does
  EXPECT_TRUE(built.ok()) << built.to_string();
  if (!built.ok()) return o;
  state->backend = Backend::kCpu;
  state->threads = threads;
  state->options = options;
  state->cpu = detail::make_cpu_plan(state->problem, threads, limits);
  if (used) *used = state->cpu;
  const Plan plan = detail::PlanAccess::make(state);
  o.attention_out = OwnedTensor(plan.attention_out_dtype(), plan.attention_out_shape());
  o.softmax_lse = OwnedTensor(DType::F32, plan.softmax_lse_shape());
  std::vector<std::byte> ws(plan.workspace_bytes());
  const Status st = run(plan, o.attention_out.mutable_view(), o.softmax_lse.mutable_view(), ws.data(), ws.size());
  EXPECT_TRUE(st.ok()) << st.to_string();
  return o;
}

Status plan_status(const FiaArgs& args, bool strict) {
  Plan pl;
  Options o;
  o.strict = strict;
  return plan(args, o, &pl);
}

OwnedTensor tensor_of(DType dtype, std::vector<std::int64_t> shape, const std::vector<float>& values) {
  OwnedTensor t(dtype, std::move(shape));
  for (std::size_t i = 0; i < values.size() && static_cast<std::int64_t>(i) < t.numel(); ++i)
    set_value(t, static_cast<std::int64_t>(i), values[i]);
  return t;
}

}  // namespace fia::test
