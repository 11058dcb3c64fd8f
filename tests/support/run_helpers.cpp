#include "support/run_helpers.hpp"

#include "support/call_builder.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {

Status run_call(const FiaArgs& args, Backend backend, int threads, Outputs* out, bool strict) {
  Options o;
  o.backend = backend;
  o.threads = threads;
  o.strict = strict;
  return fused_infer_attention_score(args, o, out);
}

Status reference_exact(const FiaArgs& args, detail::ReferenceResult* out) {
  detail::Problem p;
  Status st = detail::build_problem(args, false, &p);
  if (st.ok()) *out = detail::reference_compute(p);
  return st;
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
