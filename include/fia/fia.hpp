// fia: FusedInferAttentionScore on CPUs. The public C++ API.
//
// Two phases, in the aclnn spirit:
//   fia::Plan plan;
//   fia::Status st = fia::plan(args, options, &plan);    // validate, size outputs and workspace
//   ... allocate attention_out (plan.attention_out_shape()), softmax_lse, workspace ...
//   st = fia::run(plan, out_view, lse_view, workspace, plan.workspace_bytes());
// or, in one call that allocates everything: fia::fused_infer_attention_score(args, options, &outputs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fia/args.hpp"
#include "fia/export.hpp"
#include "fia/half.hpp"
#include "fia/merge.hpp"
#include "fia/status.hpp"
#include "fia/tensor.hpp"

namespace fia {

namespace detail {
struct PlanState;
struct PlanAccess;
}

/// A validated call: the canonical problem, its output shapes and the workspace it needs.
/// Cheap to copy (shared, immutable). Holds views of the FiaArgs tensors, which must outlive it.
///
/// Thread safety: a Plan is immutable once fia::plan() has filled it, and copies share that state.
/// run() may be called on one Plan (or its copies) from several threads at once, provided each
/// call has its own attention_out, softmax_lse and workspace memory; the results are the same
/// bits as one call at a time. run() keeps nothing between calls; the cpu backend's workers come
/// from one process-wide oneTBB arena per worker count, which concurrent calls share (so they
/// compete for those `options.threads` workers instead of each getting as many). The input
/// tensors must not change while any call runs. plan() may also be called from several threads.
/// Assigning to a Plan object while another thread runs it is a data race, as for any object.
class FIA_API Plan {
 public:
  Plan();
  ~Plan();
  Plan(const Plan&);
  Plan& operator=(const Plan&);

  /// True after a successful fia::plan().
  bool valid() const noexcept { return state_ != nullptr; }
  /// Bytes of scratch memory run() needs (64-byte alignment is best, 16 is required).
  std::size_t workspace_bytes() const noexcept;
  /// Shape and dtype attention_out must have (FIA-SPEC 3.1: the output layout, head dim V_D).
  const std::vector<std::int64_t>& attention_out_shape() const noexcept;
  DType attention_out_dtype() const noexcept;
  /// Shape softmax_lse must have when softmax_lse_flag is set: (B, Q_N, Q_S, 1), or (T, Q_N, 1)
  /// for the TND/NTD family (FIA-SPEC 17). When the flag is false: {1}.
  const std::vector<std::int64_t>& softmax_lse_shape() const noexcept;
  bool softmax_lse_flag() const noexcept;

  const detail::PlanState& state() const noexcept { return *state_; }

 private:
  friend struct detail::PlanAccess;
  std::shared_ptr<const detail::PlanState> state_;
};

/// Phase 1: validates `args` (FIA-SPEC 20; also the hardware limits when options.strict),
/// resolves layouts, lengths, masks and storage into one canonical problem, and sizes the
/// outputs and the workspace. Reads host-side data of small tensors (block_table, padding sizes).
///
/// Errors: kNullArgument when query/key/value is missing; kInvalidArgument naming the torch_npu
/// parameter; kUnsupported naming a feature fia does not implement yet (quantization, tree mask).
FIA_API Status plan(const FiaArgs& args, const Options& options, Plan* out_plan);

/// Phase 2: computes attention_out (and softmax_lse when softmax_lse_flag is set) into
/// caller-provided memory. attention_out must have plan.attention_out_shape() and dtype; when the
/// flag is set softmax_lse must be F32 with plan.softmax_lse_shape(), otherwise it may be absent
/// and is left untouched. `workspace` must hold plan.workspace_bytes() bytes (nullptr if 0).
/// Output views may have any strides with a contiguous innermost axis, as long as no two of their
/// elements share memory.
///
/// Safe to call from several threads at once on one Plan with separate outputs and workspaces
/// (see Plan).
///
/// Errors: kNullArgument naming attention_out, or softmax_lse when the flag is set, when that view
/// is absent (not present()); kInvalidArgument naming attention_out / softmax_lse / workspace
/// when they do not fit, or an output whose elements overlap (a stride of 0, for instance);
/// kUnsupported for an output whose innermost axis is not contiguous.
/// Deterministic: the result does not depend on options.threads.
FIA_API Status run(const Plan& plan, MutableTensorView attention_out, MutableTensorView softmax_lse,
                   void* workspace, std::size_t workspace_bytes);

/// Plan reuse (as FlashInfer's plan/run): runs `plan` on `args`, a call that differs from the
/// planned one only in its data — new data pointers (the next layer's K/V cache, a new query) of
/// the same shapes, dtypes, attributes, lengths and block tables. One plan per model step serves
/// every layer, with one workspace. `args` is validated again (cheap, and it keeps every rule,
/// such as block ids, checked against the data actually read); the schedule is reused. Outputs and
/// workspace as for run() above.
///
/// Errors: as plan() for an invalid `args`; kInvalidArgument naming the parameter when `args`
/// needs another schedule than the plan's (other shapes, lengths or attributes: make a new plan).
/// Thread safety: a Plan is immutable; run() may be called on one Plan from several threads at
/// once with separate outputs and workspaces.
FIA_API Status run(const Plan& plan, const FiaArgs& args, MutableTensorView attention_out,
                   MutableTensorView softmax_lse, void* workspace, std::size_t workspace_bytes);

/// The two outputs of a call, owned.
struct Outputs {
  OwnedTensor attention_out;
  OwnedTensor softmax_lse;  ///< F32; shape {1} holding 0 when softmax_lse_flag is false
};

/// Rows and columns of the compressed mask of sparse modes 2, 3 and 4 (FIA-SPEC 6.2).
inline constexpr std::int64_t kCompressedMaskSize = 2048;

/// Builds the compressed mask FIA requires as `atten_mask` for sparse_mode 2 (causal from the top
/// left), 3 (causal from the bottom right) and 4 (band) (FIA-SPEC 6.2): shape
/// (kCompressedMaskSize, kCompressedMaskSize) = (2048, 2048), element [x][y] 1 (masked) iff
/// y > x, i.e. the strict upper triangle (numpy `triu(ones((2048, 2048)), k=1)`). FIA does not
/// read it as a positional mask: which keys a query row sees follows from sparse_mode,
/// pre_tokens, next_tokens and the actual lengths (FIA-SPEC 6.4), so one mask serves a causal
/// prefill of any length. Build it once and reuse it across calls.
///
/// `dtype`: Bool, U8 or I8 (FIA-SPEC 6.1). Errors: kInvalidArgument naming atten_mask for any
/// other dtype (`out` is then left as it was); kNullArgument when `out` is null.
FIA_API Status compressed_mask(DType dtype, OwnedTensor* out);

/// plan() + allocation + run() in one call, returning what torch_npu's
/// npu_fused_infer_attention_score returns. Same errors as plan() and run().
FIA_API Status fused_infer_attention_score(const FiaArgs& args, const Options& options, Outputs* outputs);

}  // namespace fia
