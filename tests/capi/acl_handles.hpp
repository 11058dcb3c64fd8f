// Test helpers: aclTensor / aclTensorList / aclIntArray handles over fia views, destroyed
// automatically, and the C++ API's answer for the same FiaArgs.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "aclnn/aclnn_base.h"
#include "fia/fia.hpp"

namespace fia::test {

struct TensorDeleter {
  void operator()(aclTensor* t) const { aclDestroyTensor(t); }
};
struct ListDeleter {
  void operator()(aclTensorList* l) const { aclDestroyTensorList(l); }
};
struct IntArrayDeleter {
  void operator()(aclIntArray* a) const { aclDestroyIntArray(a); }
};
using AclTensor = std::unique_ptr<aclTensor, TensorDeleter>;
using AclList = std::unique_ptr<aclTensorList, ListDeleter>;
using AclInts = std::unique_ptr<aclIntArray, IntArrayDeleter>;

/// The aclDataType of a fia dtype.
aclDataType acl_dtype(DType dtype);

/// A handle over `v` (null when v is absent): its shape and strides, offset 0, ND, storage the
/// elements the view spans.
AclTensor acl_tensor(const TensorView& v);
AclTensor acl_tensor(const MutableTensorView& v);

/// A list over `views` (null when empty).
AclList acl_list(const std::vector<TensorView>& views);

/// An int array of `values` (null when nullopt).
AclInts acl_ints(const std::optional<std::vector<std::int64_t>>& values);

/// The C++ API's outputs for `args` (attention_out, and softmax_lse when the flag is set).
Outputs cpp_outputs(const FiaArgs& args);

}  // namespace fia::test
