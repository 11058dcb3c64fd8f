// Tensor views and element types of the public fia API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fia/export.hpp"

namespace fia {

/// Element types, named as in safetensors (CASE-FORMAT.md).
/// F32 for query/key/value is a fia extension; FIA itself takes F16/BF16/INT8 (FIA-SPEC 20.1 #2).
enum class DType : std::uint8_t { F16, BF16, F32, F64, I8, U8, Bool, I32, I64, U64 };

/// Size of one element in bytes.
FIA_API std::size_t dtype_size(DType dtype) noexcept;
/// The safetensors name of a dtype ("F16", "BF16", "I8", "BOOL", ...).
FIA_API std::string_view dtype_name(DType dtype) noexcept;
/// Parses a safetensors dtype name; returns false when the name is unknown.
FIA_API bool parse_dtype(std::string_view name, DType* out) noexcept;

/// A non-owning view of a strided tensor.
///
/// `shape` and `strides` have the same length (the rank); strides are in elements, not bytes.
/// Empty `strides` means row-major contiguous. A view with `data == nullptr` and rank 0 is
/// "absent" when used for an optional input. fia reads the innermost (last) axis with unit
/// stride; other strides may be anything, including 0 (broadcast).
template <class Ptr>
struct BasicTensorView {
  Ptr data = nullptr;
  DType dtype = DType::F16;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;

  BasicTensorView() = default;
  BasicTensorView(Ptr d, DType t, std::vector<std::int64_t> s, std::vector<std::int64_t> st = {})
      : data(d), dtype(t), shape(std::move(s)), strides(std::move(st)) {}

  /// True when this view describes a tensor (a data pointer or a non-empty shape).
  bool present() const noexcept { return data != nullptr || !shape.empty(); }
  std::size_t rank() const noexcept { return shape.size(); }
  /// Number of elements (product of the shape; 1 for rank 0).
  std::int64_t numel() const noexcept {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  /// Stride of axis `i` in elements (row-major when `strides` is empty).
  std::int64_t stride(std::size_t i) const noexcept {
    if (!strides.empty()) return strides[i];
    std::int64_t s = 1;
    for (std::size_t k = i + 1; k < shape.size(); ++k) s *= shape[k];
    return s;
  }
};

/// Read-only view (inputs).
using TensorView = BasicTensorView<const void*>;
/// Writable view (outputs).
using MutableTensorView = BasicTensorView<void*>;

/// A tensor that owns its (row-major, contiguous) storage.
struct FIA_API OwnedTensor {
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;

  OwnedTensor() = default;
  OwnedTensor(DType t, std::vector<std::int64_t> s);
  std::int64_t numel() const noexcept;
  TensorView view() const { return {bytes.data(), dtype, shape}; }
  MutableTensorView mutable_view() { return {bytes.data(), dtype, shape}; }
  template <class T> T* as() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T> const T* as() const { return reinterpret_cast<const T*>(bytes.data()); }
};

}  // namespace fia
