// The soundness check every tensor view passes before fia reads or writes it (FIA-SPEC 20.1).
#pragma once

#include <cstdint>
#include <string>

#include "validate/context.hpp"

namespace fia::detail {

inline constexpr std::size_t kMaxRank = 8;
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 48;

/// A view must describe a real array: sane rank, non-negative dims, a size that fits, strides of
/// the right count, data unless it is empty, and (for operands read row by row) a unit innermost
/// stride. Errors name `name`: kInvalidArgument, kNullArgument for null data, kUnsupported for
/// another innermost stride. For TensorView and MutableTensorView.
template <class View>
Status check_view(const std::string& name, const View& t, bool rows = true) {
  if (t.rank() > kMaxRank) return invalid(name, cat("rank must be <= ", kMaxRank, ", got ", t.rank()));
  if (!t.strides.empty() && t.strides.size() != t.rank())
    return invalid(name, cat("strides must have one entry per axis (", t.rank(), "), got ", t.strides.size()));
  // Bound the product of the non-zero dims too, so that strides and sizes derived from an empty
  // tensor's shape cannot overflow.
  std::int64_t numel = 1, nonzero = 1;
  for (auto d : t.shape) {
    if (d < 0) return invalid(name, cat("dimensions must be >= 0, got shape ", shape_str(t.shape)));
    if (d != 0 && nonzero > kMaxElements / d)
      return invalid(name, cat("too many elements, got shape ", shape_str(t.shape)));
    if (d != 0) nonzero *= d;
    numel *= d;
  }
  if (numel > 0 && t.data == nullptr) return null_argument(name, cat("data must not be null for shape ", shape_str(t.shape), ", got null"));
  if (rows && numel > 0 && t.rank() > 0 && t.shape.back() > 1 && t.stride(t.rank() - 1) != 1)
    return unsupported(name, cat("the innermost axis must have stride 1, got stride ", t.stride(t.rank() - 1)));
  return Status::Ok();
}

}  // namespace fia::detail
