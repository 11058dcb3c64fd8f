#include <cstring>

#include "fia/tensor.hpp"

namespace fia {

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::F16:
    case DType::BF16: return 2;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F64:
    case DType::I64:
    case DType::U64: return 8;
    case DType::I8:
    case DType::U8:
    case DType::Bool: return 1;
  }
  return 1;
}

std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::Bool: return "BOOL";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U64: return "U64";
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType* out) noexcept {
  constexpr DType all[] = {DType::F16, DType::BF16, DType::F32, DType::F64, DType::I8,
                           DType::U8,  DType::Bool, DType::I32, DType::I64, DType::U64};
  for (DType t : all) {
    if (dtype_name(t) == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

OwnedTensor::OwnedTensor(DType t, std::vector<std::int64_t> s) : dtype(t), shape(std::move(s)) {
  bytes.resize(static_cast<std::size_t>(numel()) * dtype_size(dtype));
}

std::int64_t OwnedTensor::numel() const noexcept {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

}  // namespace fia
