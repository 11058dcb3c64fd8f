// The compressed mask of sparse modes 2-4 (FIA-SPEC 6.2).
#include <algorithm>
#include <string>

#include "fia/fia.hpp"

namespace fia {

Status compressed_mask(DType dtype, OwnedTensor* out) {
  if (out == nullptr) return {StatusCode::kNullArgument, "atten_mask", "the output tensor is null"};
  if (dtype != DType::Bool && dtype != DType::U8 && dtype != DType::I8)
    return {StatusCode::kInvalidArgument, "atten_mask",
            "a compressed mask must be BOOL, UINT8 or INT8 (FIA-SPEC 6.1), got " + std::string(dtype_name(dtype))};
  constexpr std::int64_t n = kCompressedMaskSize;
  OwnedTensor mask(dtype, {n, n});  // zero-filled: kept
  for (std::int64_t x = 0; x < n; ++x)
    std::fill(mask.bytes.begin() + x * n + x + 1, mask.bytes.begin() + (x + 1) * n, std::byte{1});
  *out = std::move(mask);
  return Status::Ok();
}

}  // namespace fia
