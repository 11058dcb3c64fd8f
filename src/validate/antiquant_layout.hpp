// Where the antiquant scale (or offset) of one side (key or value) lives, read from the tensor's
// shape and mode (FIA-SPEC 12.3). Shared by the checks and by fill_antiquant.
#pragma once

#include <cstdint>
#include <string>

#include "validate/context.hpp"

namespace fia::detail {

/// The sizes a scale's shape is matched against.
struct ScaleSizes {
  std::int64_t heads = 0;       ///< N = KV_N
  std::int64_t head_dim = 0;    ///< D of this side (logical: 8 x the int32 words for int4)
  std::int64_t batch = 0;       ///< B
  std::int64_t block_num = 0;   ///< paged: blocks in the key/value pool
  std::int64_t block_size = 0;  ///< paged
};

/// One side of a scale tensor as element offsets from its data pointer. Axes of size 1 get stride
/// 0, so two tensors of one shape but different strides on such axes compare equal.
struct ScaleLayout {
  enum class Kind { kChannel, kTensor, kHead, kToken, kTokenHead, kPagedToken, kPagedTokenHead };
  Kind kind = Kind::kChannel;
  const char* form = "";     ///< the matched shape, e.g. "(N, D)"; combined forms without the leading 2
  std::int64_t base = 0;     ///< the side's slice: side * stride(0) for combined parameters, else 0
  // kChannel / kTensor / kHead: element (h, d) at base + h * h_stride + d * d_stride.
  // kToken / kTokenHead: element (b, h, s) at base + b * b_stride + h * h_stride + s * t_stride.
  // kPaged*: element (block, h, slot) at base + block * b_stride + h * h_stride + slot * t_stride.
  std::int64_t h_stride = 0, d_stride = 0, b_stride = 0, t_stride = 0;
  std::int64_t seq = 0;  ///< S' of the per-token modes 1 and 3

  bool per_token() const { return kind >= Kind::kToken; }
  bool paged() const { return kind == Kind::kPagedToken || kind == Kind::kPagedTokenHead; }
  bool same_strides(const ScaleLayout& o) const {
    return base == o.base && h_stride == o.h_stride && d_stride == o.d_stride && b_stride == o.b_stride &&
           t_stride == o.t_stride;
  }
};

/// True for the per-token modes (1, 3, 4, 5), whose scales are FLOAT32 (12.3).
inline bool per_token_mode(std::int64_t mode) { return mode == 1 || mode >= 3; }

/// Reads side `side` (0 key, 1 value) of scale or offset `t` in antiquant `mode` (FIA-SPEC 12.3);
/// `combined` parameters carry a leading axis of size 2. Returns false when the shape is not one
/// the mode allows.
bool scale_layout(const TensorView& t, bool combined, int side, std::int64_t mode, const ScaleSizes& z,
                  ScaleLayout* out);

/// The shapes `mode` allows, for messages: "(1, N, 1, D), ..., with N = 2, D = 64".
std::string allowed_scale_shapes(bool combined, std::int64_t mode, const ScaleSizes& z);

/// The sizes of side `side` of a validated context.
ScaleSizes scale_sizes(const Ctx& c, int side);

}  // namespace fia::detail
