// The aclnn handle types behind the C API's opaque typedefs, and their conversion to fia views.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "aclnn/acl_meta.h"
#include "fia/status.hpp"
#include "fia/tensor.hpp"

/// A tensor handle: caller memory described as aclCreateTensor received it.
struct aclTensor {
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_ND;
  std::vector<std::int64_t> shape;    ///< view dims
  std::vector<std::int64_t> strides;  ///< in elements
  std::int64_t offset = 0;            ///< in elements, from `data`
  void* data = nullptr;
};

/// A tensor list handle: copies of the tensors' descriptions (independent of their handles).
struct aclTensorList {
  std::vector<aclTensor> tensors;
};

struct aclIntArray {
  std::vector<std::int64_t> values;
};

struct aclBoolArray {
  std::vector<bool> values;
};

namespace fia::capi {

/// The fia dtype of an aclDataType; false when fia has none (ACL_INT16, ACL_INT4, FP8, ...).
bool to_fia_dtype(aclDataType dtype, DType* out) noexcept;

/// CANN's name of an aclDataType ("ACL_FLOAT16"), or "aclDataType(<n>)".
const char* acl_dtype_name(aclDataType dtype) noexcept;

/// The view of tensor `t` (absent when t is null). `name` is the torch_npu name that errors
/// carry (the C API translates it to the aclnn argument name). kInvalidArgument for a dtype fia
/// has no element type for, kUnsupported for a storage format other than ND (or its 4-D names).
Status input_view(const aclTensor* t, const char* name, TensorView* out);

/// As input_view, for an output.
Status output_view(const aclTensor* t, const char* name, MutableTensorView* out);

/// The views of a tensor list (empty when the list is null).
Status list_views(const aclTensorList* list, const char* name, std::vector<TensorView>* out);

/// The values of an int array (nullopt when the array is null).
std::optional<std::vector<std::int64_t>> int_values(const aclIntArray* a);

}  // namespace fia::capi
