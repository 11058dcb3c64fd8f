// Row conversions between the element types and float32 (round to nearest even on the way down).
#pragma once

#include <cstdint>
#include <cstring>

#include "fia/tensor.hpp"
#include "numeric/half.hpp"

namespace fia::detail {

/// dst[0:n) = float(src[0:n)) for src of dtype F16, BF16 or F32.
inline void load_row(const void* src, DType t, std::int64_t n, float* dst) {
  switch (t) {
    case DType::F16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      break;
    }
    case DType::BF16: {
      const auto* s = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      break;
    }
    case DType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float)); break;
    default: break;
  }
}

/// dst[0:n) = src[0:n) rounded to dtype F16, BF16 or F32.
inline void store_row(const float* src, std::int64_t n, DType t, void* dst) {
  switch (t) {
    case DType::F16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      break;
    }
    case DType::BF16: {
      auto* d = static_cast<std::uint16_t*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      break;
    }
    case DType::F32: std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float)); break;
    default: break;
  }
}

/// One value of a F16/BF16/F32 tensor as float.
inline float load_one(const void* base, DType t, std::int64_t i) {
  switch (t) {
    case DType::F16: return f16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    case DType::F32: return static_cast<const float*>(base)[i];
    default: return 0.0f;
  }
}

/// x rounded to the precision of dtype t (identity for F32): the P cast of FIA-SPEC 5 step 7.
inline float round_to_dtype(float x, DType t) {
  switch (t) {
    case DType::F16: return round_to_f16(x);
    case DType::BF16: return round_to_bf16(x);
    default: return x;
  }
}

}  // namespace fia::detail
