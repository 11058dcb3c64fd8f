// Valid KV-antiquant calls for the validation tests (FIA-SPEC 12): a float call from the call
// builder whose key/value become int8 or packed int4, with scales of the chosen modes.
#pragma once

#include <algorithm>
#include <optional>
#include <random>

#include "args/layout.hpp"
#include "numeric/half.hpp"
#include "support/call_builder.hpp"

namespace fia::test {

struct AqSpec {
  CallSpec call;
  DType kv = DType::I8;                      ///< I8, or I32 (eight int4 per word)
  bool combined = false;                     ///< antiquant_scale/offset; key_mode is antiquant_mode
  std::int64_t key_mode = 0, value_mode = 0;
  bool offsets = false;
  bool per_tensor = false;                   ///< mode 0 as per-tensor: shape (1), combined (2)
  std::optional<DType> channel_dtype;        ///< modes 0 and 2; default the query dtype
};

/// Columns a per-token scale row covers for `a`: KV_S (paged: max_blocks * block_size; list:
/// max S_b; token layouts: max act_kv) plus the shared prefix.
inline std::int64_t kv_columns(const FiaArgs& a) {
  detail::LayoutPair lp;
  detail::parse_layout(a.input_layout, &lp);
  const detail::AxisPos p = detail::axis_positions(lp.in);
  std::int64_t s = 0;
  if (a.block_table.present()) {
    s = a.block_table.shape[1] * a.block_size;
  } else if (detail::is_token_layout(lp.in)) {
    std::int64_t prev = 0;
    for (auto e : *a.actual_seq_lengths_kv) s = std::max(s, e - std::exchange(prev, e));
  } else {
    for (const auto& k : a.key) s = std::max(s, k.shape[p.s]);
  }
  if (a.key_shared_prefix.present()) s += a.key_shared_prefix.shape[p.s];
  return s;
}

/// A tensor whose element i holds first + step * i (rounded to dtype).
inline TensorView ramp(TestCall& c, DType t, std::vector<std::int64_t> shape, float first, float step) {
  OwnedTensor x(t, std::move(shape));
  for (std::int64_t i = 0; i < x.numel(); ++i) set_value(x, i, first + step * static_cast<float>(i % 512));
  return c.keep(std::move(x));
}

/// Element `i` of a F16/BF16/F32 view as a float.
inline float read(const TensorView& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::F16: return detail::f16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
    case DType::BF16: return detail::bf16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
    default: return static_cast<const float*>(t.data)[i];
  }
}

/// Random int8 (or packed int4: last axis / 8, INT32) with the shape of `t`.
inline TensorView quantized_like(TestCall& c, const TensorView& t, DType kv, std::mt19937_64& rng) {
  std::vector<std::int64_t> shape = t.shape;
  if (kv == DType::I32) shape.back() /= 8;
  OwnedTensor x(kv, shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    if (kv == DType::I8) x.as<std::int8_t>()[i] = static_cast<std::int8_t>(rng() % 256 - 128);
    else x.as<std::int32_t>()[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(rng()));
  }
  return c.keep(std::move(x));
}

/// The scale shape of `mode` for side `side` of `a` (FIA-SPEC 12.3), split form.
inline std::vector<std::int64_t> scale_shape(const AqSpec& s, const FiaArgs& a, std::int64_t mode, int side) {
  const std::int64_t N = s.call.num_kv_heads ? s.call.num_kv_heads : s.call.num_heads;
  const std::int64_t D = side == 0 || !s.call.v_dim ? s.call.qk_dim : s.call.v_dim;
  const std::int64_t B = s.call.batch, S = kv_columns(a);
  const std::int64_t blocks = a.key[0].shape[0], bs = a.block_size;
  switch (mode) {
    case 0: return s.per_tensor ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{N, D};
    case 1: return {B, S};
    case 2: return {N};
    case 3: return {B, N, S};
    case 4: return {blocks, bs};
    default: return {blocks, N, bs};
  }
}

/// Builds the antiquant call of `s`: every key/value (and shared-prefix) tensor quantized, scales
/// (and offsets) of the chosen modes attached.
inline TestCall build_aq(const AqSpec& s, std::uint64_t seed = 7) {
  TestCall c = build_call(s.call, seed);
  FiaArgs& a = c.args;
  std::mt19937_64 rng(seed + 1);
  for (auto* list : {&a.key, &a.value})
    for (auto& t : *list) t = quantized_like(c, t, s.kv, rng);
  if (a.key_shared_prefix.present()) {
    a.key_shared_prefix = quantized_like(c, a.key_shared_prefix, s.kv, rng);
    a.value_shared_prefix = quantized_like(c, a.value_shared_prefix, s.kv, rng);
  }
  const DType channel = s.channel_dtype.value_or(s.call.dtype);
  auto dtype_of = [&](std::int64_t mode) { return mode == 0 || mode == 2 ? channel : DType::F32; };
  if (s.combined) {
    a.antiquant_mode = s.key_mode;
    std::vector<std::int64_t> shape = scale_shape(s, a, s.key_mode, 0);
    if (s.key_mode == 0 && s.per_tensor) shape.clear();
    shape.insert(shape.begin(), 2);
    a.antiquant_scale = ramp(c, dtype_of(s.key_mode), shape, 0.5f, 0.001f);
    if (s.offsets) a.antiquant_offset = ramp(c, dtype_of(s.key_mode), shape, -2.0f, 0.01f);
    return c;
  }
  a.key_antiquant_mode = s.key_mode;
  a.value_antiquant_mode = s.value_mode;
  a.key_antiquant_scale = ramp(c, dtype_of(s.key_mode), scale_shape(s, a, s.key_mode, 0), 0.5f, 0.001f);
  a.value_antiquant_scale = ramp(c, dtype_of(s.value_mode), scale_shape(s, a, s.value_mode, 1), 0.25f, 0.002f);
  if (s.offsets) {
    a.key_antiquant_offset = ramp(c, dtype_of(s.key_mode), scale_shape(s, a, s.key_mode, 0), -2.0f, 0.01f);
    a.value_antiquant_offset = ramp(c, dtype_of(s.value_mode), scale_shape(s, a, s.value_mode, 1), 1.0f, -0.01f);
  }
  return c;
}

}  // namespace fia::test
