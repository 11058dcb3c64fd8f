// The aclOpExecutor of the C API (a planned call) and the two phases every operator shares.
#pragma once

#include <cstdint>

#include "aclnn/aclnn_base.h"
#include "capi/errors.hpp"
#include "capi/handles.hpp"
#include "fia/fia.hpp"

/// A planned call: what phase 1 made and phase 2 runs (then frees).
struct aclOpExecutor {
  fia::capi::EntryName entry;
  fia::Plan plan;
  fia::MutableTensorView attention_out;
  fia::MutableTensorView softmax_lse;  ///< absent unless softmax_lse_flag
};

namespace fia::capi {

/// Collects the views of an operator's handles, keeping the first conversion error.
class Converter {
 public:
  void tensor(const aclTensor* t, const char* torch_name, TensorView* out);
  void list(const aclTensorList* l, const char* torch_name, std::vector<TensorView>* out);
  /// A single tensor (PFA's key/value) as a one-element list (empty when t is null).
  void single(const aclTensor* t, const char* torch_name, std::vector<TensorView>* out);
  const Status& status() const { return status_; }

 private:
  Status status_;
};

/// The full-quant and post-quant tensors every operator takes (FIA-SPEC 13, 14), from a call
/// record with the fields dequant_scale1, quant_scale1, dequant_scale2, quant_scale2, quant_offset2.
template <class Call>
void quant_tensors(Converter& cv, const Call& c, FiaArgs* a) {
  cv.tensor(c.dequant_scale1, "dequant_scale1", &a->dequant_scale1);
  cv.tensor(c.quant_scale1, "quant_scale1", &a->quant_scale1);
  cv.tensor(c.dequant_scale2, "dequant_scale2", &a->dequant_scale2);
  cv.tensor(c.quant_scale2, "quant_scale2", &a->quant_scale2);
  cv.tensor(c.quant_offset2, "quant_offset2", &a->quant_offset2);
}

/// Phase 1 shared by every entry point: checks the out-pointers, the conversion status, the
/// required query/key/value/attentionOut (161001) and the inputLayout string, plans `args`
/// (strict when the environment has FIA_ACLNN_STRICT=1), checks attentionOut (and softmaxLse
/// when the flag is set) against the plan, and makes the executor.
aclnnStatus plan_call(const EntryName& entry, const Converter& conv, const char* input_layout, FiaArgs& args,
                      const aclTensor* attention_out, const aclTensor* softmax_lse, uint64_t* workspace_size,
                      aclOpExecutor** executor);

/// Phase 2 shared by every entry point: runs `executor` with the workspace and frees it.
aclnnStatus run_call(const char* function, void* workspace, uint64_t workspace_size, aclOpExecutor* executor);

}  // namespace fia::capi
