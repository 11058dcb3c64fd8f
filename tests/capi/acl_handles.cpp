#include "acl_handles.hpp"

#include <gtest/gtest.h>

namespace fia::test {
namespace {

template <class View>
AclTensor make(const View& v) {
  if (!v.present()) return nullptr;
  std::vector<std::int64_t> strides(v.rank());
  std::int64_t span = 1;
  for (std::size_t i = 0; i < v.rank(); ++i) {
    strides[i] = v.stride(i);
    if (v.shape[i] > 0) span += (v.shape[i] - 1) * strides[i];
    if (v.shape[i] == 0) span = 0;
  }
  std::int64_t storage[1] = {span};
  return AclTensor(aclCreateTensor(v.shape.data(), v.rank(), acl_dtype(v.dtype), strides.data(), 0, ACL_FORMAT_ND,
                                   storage, 1, const_cast<void*>(static_cast<const void*>(v.data))));
}

}  // namespace

aclDataType acl_dtype(DType dtype) {
  switch (dtype) {
    case DType::F16:
      return ACL_FLOAT16;
    case DType::BF16:
      return ACL_BF16;
    case DType::F32:
      return ACL_FLOAT;
    case DType::F64:
      return ACL_DOUBLE;
    case DType::I8:
      return ACL_INT8;
    case DType::U8:
      return ACL_UINT8;
    case DType::Bool:
      return ACL_BOOL;
    case DType::I32:
      return ACL_INT32;
    case DType::I64:
      return ACL_INT64;
    case DType::U64:
      return ACL_UINT64;
  }
  return ACL_DT_UNDEFINED;
}

AclTensor acl_tensor(const TensorView& v) { return make(v); }
AclTensor acl_tensor(const MutableTensorView& v) { return make(v); }

AclList acl_list(const std::vector<TensorView>& views) {
  if (views.empty()) return nullptr;
  std::vector<AclTensor> owned;
  std::vector<const aclTensor*> raw;
  for (const auto& v : views) {
    owned.push_back(acl_tensor(v));
    raw.push_back(owned.back().get());
  }
  return AclList(aclCreateTensorList(raw.data(), raw.size()));  // the list keeps copies
}

AclInts acl_ints(const std::optional<std::vector<std::int64_t>>& values) {
  if (!values) return nullptr;
  return AclInts(aclCreateIntArray(values->data(), values->size()));
}

Outputs cpp_outputs(const FiaArgs& args) {
  Outputs o;
  Plan plan;
  const Status st = fia::plan(args, Options{}, &plan);
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok()) return o;
  o.attention_out = OwnedTensor(plan.attention_out_dtype(), plan.attention_out_shape());
  o.softmax_lse = OwnedTensor(DType::F32, plan.softmax_lse_shape());
  std::vector<std::byte> ws(plan.workspace_bytes());
  const Status rs = run(plan, o.attention_out.mutable_view(), o.softmax_lse.mutable_view(), ws.data(), ws.size());
  EXPECT_TRUE(rs.ok()) << rs.to_string();
  return o;
}

}  // namespace fia::test
