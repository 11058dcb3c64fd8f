// The two phases of every aclnn operator of the C API.
#include "capi/executor.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

namespace fia::capi {
namespace {

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// attentionOut / softmaxLse must have the dtype and shape the plan computed (FIA-SPEC 3.1, 17).
Status check_output(const char* name, const MutableTensorView& v, DType dtype, const std::vector<std::int64_t>& shape) {
  if (v.dtype != dtype)
    return {StatusCode::kInvalidArgument, name,
            "dtype must be " + std::string(dtype_name(dtype)) + ", got " + std::string(dtype_name(v.dtype))};
  if (v.shape != shape)
    return {StatusCode::kInvalidArgument, name, "shape must be " + shape_str(shape) + ", got " + shape_str(v.shape)};
  return Status::Ok();
}

bool strict_from_env() {
  const char* v = std::getenv("FIA_ACLNN_STRICT");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

void Converter::tensor(const aclTensor* t, const char* torch_name, TensorView* out) {
  Status st = input_view(t, torch_name, out);
  if (status_.ok()) status_ = std::move(st);
}

void Converter::list(const aclTensorList* l, const char* torch_name, std::vector<TensorView>* out) {
  Status st = list_views(l, torch_name, out);
  if (status_.ok()) status_ = std::move(st);
}

void Converter::single(const aclTensor* t, const char* torch_name, std::vector<TensorView>* out) {
  out->clear();
  if (t == nullptr) return;
  TensorView v;
  tensor(t, torch_name, &v);
  out->push_back(std::move(v));
}

aclnnStatus plan_call(const EntryName& entry, const Converter& conv, const char* input_layout, FiaArgs& args,
                      const aclTensor* attention_out, const aclTensor* softmax_lse, uint64_t* workspace_size,
                      aclOpExecutor** executor) {
  if (workspace_size == nullptr) return fail(entry.function, ACLNN_ERR_PARAM_NULLPTR, "workspaceSize is null");
  if (executor == nullptr) return fail(entry.function, ACLNN_ERR_PARAM_NULLPTR, "executor is null");
  *executor = nullptr;
  try {
    if (!args.query.present()) return report(entry, {StatusCode::kNullArgument, "query", "required, got null"});
    if (args.key.empty()) return report(entry, {StatusCode::kNullArgument, "key", "required, got null"});
    if (args.value.empty()) return report(entry, {StatusCode::kNullArgument, "value", "required, got null"});
    if (attention_out == nullptr)
      return report(entry, {StatusCode::kNullArgument, "attention_out", "required, got null"});
    if (args.softmax_lse_flag && softmax_lse == nullptr)
      return report(entry,
                    {StatusCode::kNullArgument, "softmax_lse", "required when softmax_lse_flag is true, got null"});
    if (input_layout == nullptr)
      return report(entry, {StatusCode::kNullArgument, "input_layout", "required, got null"});
    if (!conv.status().ok()) return report(entry, conv.status());
    args.input_layout = input_layout;

    auto exec = std::make_unique<aclOpExecutor>();
    exec->entry = entry;
    if (Status st = output_view(attention_out, "attention_out", &exec->attention_out); !st.ok())
      return report(entry, st);
    if (args.softmax_lse_flag)
      if (Status st = output_view(softmax_lse, "softmax_lse", &exec->softmax_lse); !st.ok()) return report(entry, st);

    Options options;
    options.strict = strict_from_env();
    if (Status st = plan(args, options, &exec->plan); !st.ok()) return report(entry, st);
    const Plan& p = exec->plan;
    const bool empty = args.query.numel() == 0 && exec->attention_out.numel() == 0;  // FIA-SPEC 19: no checks
    if (Status st = empty ? Status::Ok() :
            check_output("attention_out", exec->attention_out, p.attention_out_dtype(), p.attention_out_shape());
        !st.ok())
      return report(entry, st);
    if (args.softmax_lse_flag && !empty)
      if (Status st = check_output("softmax_lse", exec->softmax_lse, DType::F32, p.softmax_lse_shape()); !st.ok())
        return report(entry, st);
    *workspace_size = p.workspace_bytes();
    *executor = exec.release();
    return ACLNN_SUCCESS;
  } catch (const std::bad_alloc&) {
    return fail(entry.function, ACLNN_ERR_RUNTIME_ERROR, "out of memory");
  } catch (const std::exception& e) {
    return fail(entry.function, ACLNN_ERR_RUNTIME_ERROR, std::string("internal error: ") + e.what());
  }
}

aclnnStatus run_call(const char* function, void* workspace, uint64_t workspace_size, aclOpExecutor* executor) {
  if (executor == nullptr) return fail(function, ACLNN_ERR_PARAM_NULLPTR, "executor is null");
  std::unique_ptr<aclOpExecutor> exec(executor);
  const std::size_t need = exec->plan.workspace_bytes();
  if (workspace_size < need)
    return fail(function, ACLNN_ERR_PARAM_INVALID,
                "workspaceSize must be at least " + std::to_string(need) + ", got " + std::to_string(workspace_size));
  if (workspace == nullptr && need > 0)
    return fail(function, ACLNN_ERR_PARAM_NULLPTR, "workspace is null, " + std::to_string(need) + " bytes needed");
  try {
    const Status st = run(exec->plan, exec->attention_out, exec->softmax_lse, workspace, workspace_size);
    return report(exec->entry, st, /*run_phase=*/true);
  } catch (const std::bad_alloc&) {
    return fail(function, ACLNN_ERR_RUNTIME_ERROR, "out of memory");
  } catch (const std::exception& e) {
    return fail(function, ACLNN_ERR_RUNTIME_ERROR, std::string("internal error: ") + e.what());
  }
}

}  // namespace fia::capi

extern "C" aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor* executor) {
  delete executor;
  return ACLNN_SUCCESS;
}
