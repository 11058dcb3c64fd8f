// aclCreateTensor / aclCreateTensorList / aclCreateIntArray / aclCreateBoolArray and their
// destroy functions, and the conversion of handles to fia views.
#include "capi/handles.hpp"

#include <new>
#include <optional>
#include <string>

#include "capi/errors.hpp"

namespace fia::capi {
namespace {

/// Checks aclCreateTensor's arguments; returns "" when they describe a tensor.
std::string tensor_problem(const int64_t* view, uint64_t view_n, const int64_t* stride, int64_t offset,
                           const int64_t* storage, uint64_t storage_n, const void* data) {
  if (view_n > 0 && view == nullptr) return "viewDims is null with viewDimsNum " + std::to_string(view_n);
  if (view_n > 0 && stride == nullptr) return "stride is null with viewDimsNum " + std::to_string(view_n);
  if (storage_n > 0 && storage == nullptr)
    return "storageDims is null with storageDimsNum " + std::to_string(storage_n);
  if (offset < 0) return "offset must be >= 0, got " + std::to_string(offset);
  std::int64_t numel = 1, last = offset;
  for (uint64_t i = 0; i < view_n; ++i) {
    if (view[i] < 0) return "viewDims[" + std::to_string(i) + "] must be >= 0, got " + std::to_string(view[i]);
    if (stride[i] < 0) return "stride[" + std::to_string(i) + "] must be >= 0, got " + std::to_string(stride[i]);
    numel *= view[i];
    if (view[i] > 0) last += (view[i] - 1) * stride[i];
  }
  if (numel == 0) return "";
  std::int64_t storage_numel = 1;
  for (uint64_t i = 0; i < storage_n; ++i) {
    if (storage[i] < 0) return "storageDims[" + std::to_string(i) + "] must be >= 0, got " + std::to_string(storage[i]);
    storage_numel *= storage[i];
  }
  if (last >= storage_numel)
    return "the view (offset " + std::to_string(offset) + ", last element " + std::to_string(last) +
           ") must lie inside the storage of " + std::to_string(storage_numel) + " elements";
  if (data == nullptr) return "tensorData is null for a non-empty tensor";
  return "";
}

bool plain_format(aclFormat f) {
  return f == ACL_FORMAT_ND || f == ACL_FORMAT_NCHW || f == ACL_FORMAT_NHWC || f == ACL_FORMAT_NC ||
         f == ACL_FORMAT_NCL || f == ACL_FORMAT_NCDHW || f == ACL_FORMAT_NDHWC;
}

template <class View>
Status make_view(const aclTensor* t, const char* name, View* out) {
  *out = View{};
  if (t == nullptr) return Status::Ok();
  out->shape = t->shape;  // present even when the dtype is refused, so it is not taken as absent
  DType dtype;
  if (!to_fia_dtype(t->dtype, &dtype))
    return {StatusCode::kInvalidArgument, name, std::string("dtype ") + acl_dtype_name(t->dtype) + " is not supported"};
  if (!plain_format(t->format))
    return {StatusCode::kUnsupported, name,
            "format must be ACL_FORMAT_ND, got aclFormat " + std::to_string(static_cast<int>(t->format))};
  auto* base = static_cast<std::byte*>(t->data);
  out->data = base == nullptr ? nullptr : base + t->offset * static_cast<std::int64_t>(dtype_size(dtype));
  out->dtype = dtype;
  out->shape = t->shape;
  out->strides = t->strides;
  return Status::Ok();
}

}  // namespace

bool to_fia_dtype(aclDataType dtype, DType* out) noexcept {
  switch (dtype) {
    case ACL_FLOAT:
      *out = DType::F32;
      return true;
    case ACL_FLOAT16:
      *out = DType::F16;
      return true;
    case ACL_BF16:
      *out = DType::BF16;
      return true;
    case ACL_DOUBLE:
      *out = DType::F64;
      return true;
    case ACL_INT8:
      *out = DType::I8;
      return true;
    case ACL_UINT8:
      *out = DType::U8;
      return true;
    case ACL_BOOL:
      *out = DType::Bool;
      return true;
    case ACL_INT32:
      *out = DType::I32;
      return true;
    case ACL_INT64:
      *out = DType::I64;
      return true;
    case ACL_UINT64:
      *out = DType::U64;
      return true;
    default:
      return false;
  }
}

const char* acl_dtype_name(aclDataType dtype) noexcept {
  switch (dtype) {
    case ACL_FLOAT:
      return "ACL_FLOAT";
    case ACL_FLOAT16:
      return "ACL_FLOAT16";
    case ACL_BF16:
      return "ACL_BF16";
    case ACL_DOUBLE:
      return "ACL_DOUBLE";
    case ACL_INT8:
      return "ACL_INT8";
    case ACL_UINT8:
      return "ACL_UINT8";
    case ACL_BOOL:
      return "ACL_BOOL";
    case ACL_INT16:
      return "ACL_INT16";
    case ACL_UINT16:
      return "ACL_UINT16";
    case ACL_INT32:
      return "ACL_INT32";
    case ACL_UINT32:
      return "ACL_UINT32";
    case ACL_INT64:
      return "ACL_INT64";
    case ACL_UINT64:
      return "ACL_UINT64";
    case ACL_INT4:
      return "ACL_INT4";
    default:
      return "another aclDataType";
  }
}

Status input_view(const aclTensor* t, const char* name, TensorView* out) { return make_view(t, name, out); }

Status output_view(const aclTensor* t, const char* name, MutableTensorView* out) { return make_view(t, name, out); }

Status list_views(const aclTensorList* list, const char* name, std::vector<TensorView>* out) {
  out->clear();
  if (list == nullptr) return Status::Ok();
  for (const aclTensor& t : list->tensors) {
    TensorView v;
    if (Status st = input_view(&t, name, &v); !st.ok()) return st;
    out->push_back(std::move(v));
  }
  return Status::Ok();
}

std::optional<std::vector<std::int64_t>> int_values(const aclIntArray* a) {
  if (a == nullptr) return std::nullopt;
  return a->values;
}

}  // namespace fia::capi

using fia::capi::set_error;

extern "C" {

aclTensor* aclCreateTensor(const int64_t* viewDims, uint64_t viewDimsNum, aclDataType dataType, const int64_t* stride,
                           int64_t offset, aclFormat format, const int64_t* storageDims, uint64_t storageDimsNum,
                           void* tensorData) {
  const std::string problem =
      fia::capi::tensor_problem(viewDims, viewDimsNum, stride, offset, storageDims, storageDimsNum, tensorData);
  if (!problem.empty()) {
    set_error("aclCreateTensor: " + problem);
    return nullptr;
  }
  auto* t = new (std::nothrow) aclTensor;
  if (t == nullptr) {
    set_error("aclCreateTensor: out of memory");
    return nullptr;
  }
  try {
    t->dtype = dataType;
    t->format = format;
    t->shape.assign(viewDims, viewDims + viewDimsNum);
    t->strides.assign(stride, stride + viewDimsNum);
  } catch (...) {
    delete t;
    set_error("aclCreateTensor: out of memory");
    return nullptr;
  }
  t->offset = offset;
  t->data = tensorData;
  return t;
}

aclnnStatus aclDestroyTensor(const aclTensor* tensor) {
  delete tensor;
  return ACLNN_SUCCESS;
}

aclTensorList* aclCreateTensorList(const aclTensor* const* value, uint64_t size) {
  if (value == nullptr || size == 0) {
    set_error(value == nullptr ? "aclCreateTensorList: value is null"
                               : "aclCreateTensorList: size must be >= 1, got 0");
    return nullptr;
  }
  for (uint64_t i = 0; i < size; ++i)
    if (value[i] == nullptr) {
      set_error("aclCreateTensorList: value[" + std::to_string(i) + "] is null");
      return nullptr;
    }
  try {
    auto* list = new aclTensorList;
    for (uint64_t i = 0; i < size; ++i) list->tensors.push_back(*value[i]);
    return list;
  } catch (...) {
    set_error("aclCreateTensorList: out of memory");
    return nullptr;
  }
}

aclnnStatus aclDestroyTensorList(const aclTensorList* array) {
  delete array;
  return ACLNN_SUCCESS;
}

aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size) {
  if (value == nullptr && size > 0) {
    set_error("aclCreateIntArray: value is null with size " + std::to_string(size));
    return nullptr;
  }
  try {
    auto* a = new aclIntArray;
    if (size > 0) a->values.assign(value, value + size);
    return a;
  } catch (...) {
    set_error("aclCreateIntArray: out of memory");
    return nullptr;
  }
}

aclnnStatus aclDestroyIntArray(const aclIntArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}

aclBoolArray* aclCreateBoolArray(const bool* value, uint64_t size) {
  if (value == nullptr && size > 0) {
    set_error("aclCreateBoolArray: value is null with size " + std::to_string(size));
    return nullptr;
  }
  try {
    auto* a = new aclBoolArray;
    if (size > 0) a->values.assign(value, value + size);
    return a;
  } catch (...) {
    set_error("aclCreateBoolArray: out of memory");
    return nullptr;
  }
}

aclnnStatus aclDestroyBoolArray(const aclBoolArray* array) {
  delete array;
  return ACLNN_SUCCESS;
}

}  // extern "C"
