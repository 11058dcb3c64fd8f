// The public two-phase API: plan() (layers 2 and 4) and run() (layer 5 of the chosen backend).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/plan_state.hpp"
#include "cpu/amx.hpp"
#include "cpu/isa.hpp"
#include "cpu/run.hpp"
#include "cpu/threads.hpp"
#include "fia/fia.hpp"
#include "numeric/half.hpp"
#include "numeric/post_quant.hpp"
#include "reference/reference.hpp"
#include "validate/build_problem.hpp"
#include "validate/context.hpp"
#include "validate/partial.hpp"

namespace fia {

using detail::PlanState;
using detail::Problem;

Plan::Plan() = default;
Plan::~Plan() = default;
Plan::Plan(const Plan&) = default;
Plan& Plan::operator=(const Plan&) = default;

std::size_t Plan::workspace_bytes() const noexcept {
  return state_ && state_->backend == Backend::kCpu ? state_->cpu.workspace_bytes : 0;
}
const std::vector<std::int64_t>& Plan::attention_out_shape() const noexcept { return state_->problem.out_shape; }
DType Plan::attention_out_dtype() const noexcept { return state_->problem.out_dtype; }
const std::vector<std::int64_t>& Plan::softmax_lse_shape() const noexcept { return state_->problem.lse_shape; }
bool Plan::softmax_lse_flag() const noexcept { return state_->problem.lse; }

namespace {

Status resolve_backend(Backend requested, Backend* out) {
  if (requested != Backend::kDefault) {
    *out = requested;
    return Status::Ok();
  }
  const char* env = std::getenv("FIA_BACKEND");
  const std::string v = env ? env : "";
  if (v.empty() || v == "cpu") {
    *out = Backend::kCpu;
  } else if (v == "reference") {
    *out = Backend::kReference;
  } else {
    return {StatusCode::kInvalidArgument, "FIA_BACKEND", "must be 'cpu' or 'reference', got '" + v + "'"};
  }
  return Status::Ok();
}

/// Calls fn(linear index, element offset) for every element of a strided view, row-major.
template <class Fn>
void for_each_element(const std::vector<std::int64_t>& shape, const MutableTensorView& v, Fn fn) {
  std::int64_t total = 1;
  for (auto d : shape) total *= d;
  if (total == 0) return;
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::int64_t lin = 0; lin < total; ++lin) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < shape.size(); ++k) off += idx[k] * v.stride(k);
    fn(lin, off);
    for (std::size_t k = shape.size(); k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}

void store(MutableTensorView& v, std::int64_t off, double x) {
  auto* base = static_cast<std::byte*>(v.data);
  switch (v.dtype) {
    case DType::F16: {
      const std::uint16_t h = detail::f64_to_f16(x);
      std::memcpy(base + off * 2, &h, 2);
      break;
    }
    case DType::BF16: {
      const std::uint16_t h = detail::f64_to_bf16(x);
      std::memcpy(base + off * 2, &h, 2);
      break;
    }
    case DType::F32: {
      const float f = static_cast<float>(x);
      std::memcpy(base + off * 4, &f, 4);
      break;
    }
    case DType::I8: base[off] = static_cast<std::byte>(detail::saturate_int8(x)); break;  // fills (0)
    default: break;
  }
}

/// True when no two elements of `v` share memory: with its axes of extent > 1 ordered by stride
/// magnitude, each stride steps past everything the smaller axes span. That holds for every
/// permutation or slice of a dense array; a stride of 0 or axes interleaving into each other fail.
bool elements_distinct(const MutableTensorView& v) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> axes;  // (|stride|, extent)
  for (std::size_t k = 0; k < v.shape.size(); ++k) {
    if (v.shape[k] <= 1) continue;
    const std::int64_t st = v.stride(k);
    axes.emplace_back(st < 0 ? 0 - static_cast<std::uint64_t>(st) : static_cast<std::uint64_t>(st),
                      static_cast<std::uint64_t>(v.shape[k]));
  }
  std::sort(axes.begin(), axes.end());
  std::uint64_t span = 1;  // the largest offset the smaller axes reach, plus one
  for (const auto& [stride, extent] : axes) {
    std::uint64_t reach = 0;
    if (stride < span || __builtin_mul_overflow(stride, extent - 1, &reach) || __builtin_add_overflow(span, reach, &span))
      return false;
  }
  return true;
}

Status check_output(const char* name, const MutableTensorView& v, DType dtype, const std::vector<std::int64_t>& shape) {
  if (!v.present()) return {StatusCode::kNullArgument, name, "required, got an absent view"};
  if (v.dtype != dtype)
    return {StatusCode::kInvalidArgument, name,
            std::string("dtype must be ") + std::string(dtype_name(dtype)) + ", got " + std::string(dtype_name(v.dtype))};
  if (v.shape != shape)
    return {StatusCode::kInvalidArgument, name,
            "shape must be " + detail::shape_str(shape) + ", got " + detail::shape_str(v.shape)};
  if (!v.strides.empty() && v.strides.size() != v.shape.size())
    return {StatusCode::kInvalidArgument, name, "strides must have one entry per axis"};
  if (v.numel() > 0 && v.data == nullptr) return {StatusCode::kNullArgument, name, "data is null"};
  if (v.numel() > 0 && !shape.empty() && shape.back() > 1 && v.stride(shape.size() - 1) != 1)
    return {StatusCode::kUnsupported, name, "the innermost axis must have stride 1"};
  if (v.numel() > 0 && !elements_distinct(v))
    return {StatusCode::kInvalidArgument, name,
            "elements must not overlap in memory (a stride of 0, or strides too small for the axes they step "
            "over), got strides " + detail::shape_str(v.strides)};
  return Status::Ok();
}

/// True when a view with `shape` is row-major contiguous.
bool contiguous(const MutableTensorView& v, const std::vector<std::int64_t>& shape) {
  std::int64_t expect = 1;
  for (std::size_t k = shape.size(); k-- > 0;) {
    if (shape[k] > 1 && v.stride(k) != expect) return false;
    expect *= shape[k];
  }
  return true;
}

/// Sets every element of an output view to `x` (contiguous views in one pass).
void fill(MutableTensorView& v, const std::vector<std::int64_t>& shape, double x) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  if (n == 0) return;
  if (contiguous(v, shape) && x == 0.0) {
    std::memset(v.data, 0, static_cast<std::size_t>(n) * dtype_size(v.dtype));
  } else if (contiguous(v, shape) && v.dtype == DType::F32) {
    std::fill(static_cast<float*>(v.data), static_cast<float*>(v.data) + n, static_cast<float>(x));
  } else {
    for_each_element(shape, v, [&](std::int64_t, std::int64_t off) { store(v, off, x); });
  }
}

/// FIA-SPEC 14 / 25.1 #3: the rows the kernels do not write, quantized: decode rows (Q_S = 1) of
/// batches without keys give quantize(0).
void quantize_zero_kv_rows(const Problem& p, MutableTensorView& out) {
  if (!p.post_quant.zero_kv_rows) return;
  const detail::RowIndex rows = p.out_index(out);
  std::vector<float> zeros(static_cast<std::size_t>(p.v_dim), 0.0f);
  for (std::int64_t b = 0; b < p.batch; ++b)
    if (p.kv_len(b) == 0)
      for (std::int64_t n = 0; n < p.num_heads; ++n)
        for (std::int64_t i = 0; i < p.act_q[b]; ++i)
          detail::post_quant_row(p, n, zeros.data(), static_cast<std::int8_t*>(out.data) + rows.offset(b, n, i));
}

/// The reference's rows quantized (14.1): every row of a batch with keys, fully masked ones
/// (0 before quantization) included; rows never computed stay 0.
void store_reference_post_quant(const Problem& p, const detail::ReferenceResult& r, MutableTensorView& out) {
  fill(out, p.out_shape, 0.0);
  const detail::RowIndex rows = p.out_index(out);
  const detail::RowIndex exact = p.out_index(MutableTensorView(nullptr, p.out_dtype, p.out_shape));
  std::vector<float> row(static_cast<std::size_t>(p.v_dim));
  for (std::int64_t b = 0; b < p.batch; ++b) {
    if (p.kv_len(b) == 0) continue;
    for (std::int64_t n = 0; n < p.num_heads; ++n)
      for (std::int64_t i = 0; i < p.act_q[b]; ++i) {
        const double* src = &r.out[static_cast<std::size_t>(exact.offset(b, n, i))];
        for (std::int64_t d = 0; d < p.v_dim; ++d) row[d] = static_cast<float>(src[d]);
        detail::post_quant_row(p, n, row.data(), static_cast<std::int8_t*>(out.data) + rows.offset(b, n, i));
      }
  }
  quantize_zero_kv_rows(p, out);
}

void run_reference(const Problem& p, MutableTensorView& out, MutableTensorView& lse) {
  const detail::ReferenceResult r = detail::reference_compute(p);
  if (p.post_quant.on)
    store_reference_post_quant(p, r, out);
  else
    for_each_element(p.out_shape, out, [&](std::int64_t lin, std::int64_t off) { store(out, off, r.out[lin]); });
  if (p.lse)
    for_each_element(p.lse_shape, lse,
                     [&](std::int64_t lin, std::int64_t off) { store(lse, off, detail::lse_as_f32(r.lse[lin])); });
}

void run_cpu(const PlanState& s, MutableTensorView& out, MutableTensorView& lse, void* workspace) {
  const Problem& p = s.problem;
  if (!s.cpu.writes_every_row) fill(out, p.out_shape, 0.0);  // the rows no item computes (7.6)
  if (p.lse) fill(lse, p.lse_shape, std::numeric_limits<double>::infinity());
  detail::OutputRows dst{p.out_index(out), p.lse ? p.lse_index(lse) : detail::RowIndex{}};
  detail::cpu_run(p, s.cpu, dst, workspace, s.threads);
  quantize_zero_kv_rows(p, out);
}

constexpr int kMaxThreads = 1024;

Status out_of_memory(const char* what) {
  return {StatusCode::kInternal, "", std::string("out of memory while ") + what};
}

/// What `options` sets in a problem built from the arguments: the post-quant formula and the
/// partial-attention extensions.
Status apply_options(const Options& options, Problem* p) {
  p->post_quant.rounding = options.post_quant_rounding;
  return detail::apply_partial_options(options, p);
}

}  // namespace

static Status plan_impl(const FiaArgs& args, const Options& options, Plan* out_plan) {
  if (out_plan == nullptr) return {StatusCode::kNullArgument, "plan", "plan output is null"};
  auto state = std::make_shared<PlanState>();
  Status st = resolve_backend(options.backend, &state->backend);
  if (!st.ok()) return st;
  if (!detail::apply_isa_cap_from_env()) {
    std::string names;
    for (const auto& n : detail::available_isas()) names += (names.empty() ? "" : ", ") + n;
    return {StatusCode::kInvalidArgument, "FIA_ISA", "must name an instruction set of this build (" + names + ")"};
  }
  if (!detail::bf16_dots_setting_valid()) {
    const char* env = std::getenv("FIA_BF16_DOTS");
    return {StatusCode::kInvalidArgument, "FIA_BF16_DOTS",
            "must be 0 (fp32 multiply-adds), 1 (bf16 dot products where the CPU has them) or unset (where they are "
            "faster), got '" + std::string(env == nullptr ? "" : env) + "'"};
  }
  if (!detail::amx_setting_valid()) {
    const char* env = std::getenv("FIA_AMX");
    return {StatusCode::kInvalidArgument, "FIA_AMX",
            "must be 0 (no AMX tiles), 1 or unset (AMX tiles where the CPU has them), got '" +
                std::string(env == nullptr ? "" : env) + "'"};
  }
  if (options.threads < 0 || options.threads > kMaxThreads)
    return {StatusCode::kInvalidArgument, "threads",
            "threads must be in [0, " + std::to_string(kMaxThreads) + "], got " + std::to_string(options.threads)};
  state->strict = options.strict;
  st = detail::build_problem(args, options.strict, &state->problem);
  if (!st.ok()) return st;
  state->options = options;
  st = apply_options(options, &state->problem);
  if (!st.ok()) return st;
  state->threads = options.threads > 0 ? options.threads : detail::default_threads();
  detail::read_kernel_settings(&state->problem);
  if (state->backend == Backend::kCpu) state->cpu = detail::make_cpu_plan(state->problem, state->threads);
  *out_plan = detail::PlanAccess::make(std::move(state));
  return Status::Ok();
}

static Status run_impl(const Plan& plan, MutableTensorView attention_out, MutableTensorView softmax_lse, void* workspace,
                       std::size_t workspace_bytes) {
  if (!plan.valid()) return {StatusCode::kInvalidArgument, "plan", "plan() has not succeeded on this plan"};
  const PlanState& s = plan.state();
  const Problem& p = s.problem;
  if (p.empty_query) {  // FIA-SPEC 19: nothing to compute into an empty attention_out
    if (attention_out.numel() != 0)
      return {StatusCode::kInvalidArgument, "attention_out",
              "must be empty for an empty query, got shape " + detail::shape_str(attention_out.shape)};
    return Status::Ok();
  }
  Status st = check_output("attention_out", attention_out, p.out_dtype, p.out_shape);
  if (!st.ok()) return st;
  if (p.lse) {
    if (!softmax_lse.present())
      return {StatusCode::kNullArgument, "softmax_lse", "required when softmax_lse_flag is true"};
    st = check_output("softmax_lse", softmax_lse, DType::F32, p.lse_shape);
    if (!st.ok()) return st;
  }
  if (p.softmax_max_rows.base != nullptr) {  // its values may have changed since plan()
    st = detail::check_softmax_max_values(s.options.softmax_max);
    if (!st.ok()) return st;
  }
  if (workspace_bytes < plan.workspace_bytes() || (plan.workspace_bytes() > 0 && workspace == nullptr))
    return {StatusCode::kInvalidArgument, "workspace",
            "needs " + std::to_string(plan.workspace_bytes()) + " bytes, got " + std::to_string(workspace_bytes)};
  if (s.backend == Backend::kReference) run_reference(p, attention_out, softmax_lse);
  else run_cpu(s, attention_out, softmax_lse, workspace);
  return Status::Ok();
}

/// The parameter that makes problem q need another schedule than p, or "" when p's schedule fits
/// it (the fields make_cpu_plan and the kernel table read).
static std::string schedule_difference(const Problem& p, const Problem& q) {
  if (p.batch != q.batch || p.act_q != q.act_q || p.q_start != q.q_start) return "actual_seq_lengths";
  if (p.num_heads != q.num_heads) return "num_heads";
  if (p.num_kv_heads != q.num_kv_heads) return "num_key_value_heads";
  if (p.qk_dim != q.qk_dim || p.v_dim != q.v_dim || p.rope_dim != q.rope_dim || p.dtype != q.dtype) return "query";
  if (p.kv_dtype != q.kv_dtype || p.kv_format != q.kv_format || p.kv_heads_interleaved() != q.kv_heads_interleaved())
    return "key";
  for (std::int64_t b = 0; b < p.batch; ++b)
    if (p.kv_len(b) != q.kv_len(b)) return "actual_seq_lengths_kv";
  if (p.band_lo != q.band_lo || p.band_hi != q.band_hi || p.has_mask != q.has_mask) return "sparse_mode";
  if (p.p_rule.kind != q.p_rule.kind || p.out_shape != q.out_shape || p.lse != q.lse) return "input_layout";
  return "";
}

static Status run_args_impl(const Plan& plan, const FiaArgs& args, MutableTensorView attention_out,
                            MutableTensorView softmax_lse, void* workspace, std::size_t workspace_bytes) {
  if (!plan.valid()) return {StatusCode::kInvalidArgument, "plan", "plan() has not succeeded on this plan"};
  auto state = std::make_shared<PlanState>(plan.state());
  Status st = detail::build_problem(args, state->strict, &state->problem);
  if (!st.ok()) return st;
  st = apply_options(state->options, &state->problem);
  if (!st.ok()) return st;
  const std::string differs = schedule_difference(plan.state().problem, state->problem);
  if (!differs.empty())
    return {StatusCode::kInvalidArgument, differs,
            "this call needs another schedule than the plan's (other shapes, lengths or attributes): make a new plan"};
  return run_impl(detail::PlanAccess::make(std::move(state)), std::move(attention_out), std::move(softmax_lse),
                  workspace, workspace_bytes);
}

static Status fused_impl(const FiaArgs& args, const Options& options, Outputs* outputs) {
  if (outputs == nullptr) return {StatusCode::kNullArgument, "outputs", "outputs is null"};
  Plan pl;
  Status st = plan_impl(args, options, &pl);
  if (!st.ok()) return st;
  outputs->attention_out = OwnedTensor(pl.attention_out_dtype(), pl.attention_out_shape());
  outputs->softmax_lse = OwnedTensor(DType::F32, pl.softmax_lse_shape());  // zeros; {1} without the flag
  // Scratch needs no zeroing: filling a few MiB would cost a decode call tens of microseconds.
  const std::size_t bytes = pl.workspace_bytes();
  const std::unique_ptr<std::byte[]> workspace(bytes ? new std::byte[bytes] : nullptr);
  return run_impl(pl, outputs->attention_out.mutable_view(), outputs->softmax_lse.mutable_view(), workspace.get(),
                  bytes);
}

Status plan(const FiaArgs& args, const Options& options, Plan* out_plan) {
  try {
    return plan_impl(args, options, out_plan);
  } catch (const std::bad_alloc&) {
    return out_of_memory("planning");
  }
}

Status run(const Plan& plan, MutableTensorView attention_out, MutableTensorView softmax_lse, void* workspace,
           std::size_t workspace_bytes) {
  try {
    return run_impl(plan, std::move(attention_out), std::move(softmax_lse), workspace, workspace_bytes);
  } catch (const std::bad_alloc&) {
    return out_of_memory("running");
  }
}

Status run(const Plan& plan, const FiaArgs& args, MutableTensorView attention_out, MutableTensorView softmax_lse,
           void* workspace, std::size_t workspace_bytes) {
  try {
    return run_args_impl(plan, args, std::move(attention_out), std::move(softmax_lse), workspace, workspace_bytes);
  } catch (const std::bad_alloc&) {
    return out_of_memory("running");
  }
}

Status fused_infer_attention_score(const FiaArgs& args, const Options& options, Outputs* outputs) {
  try {
    return fused_impl(args, options, outputs);
  } catch (const std::bad_alloc&) {
    return out_of_memory("allocating the outputs");
  }
}

}  // namespace fia
