// FIA-SPEC 12.3, 25.1 #8: the antiquant scales and offsets of a validated call as
// Problem::key_antiquant / value_antiquant (problem.hpp, struct Antiquant).
#include "numeric/half.hpp"
#include "validate/antiquant_layout.hpp"
#include "validate/context.hpp"

namespace fia::detail {

namespace {

float element(const TensorView& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::F16: return f16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
    case DType::F32: return static_cast<const float*>(t.data)[i];
    default: return 0.0f;  // excluded by check_antiquant_params
  }
}

/// Per-channel, per-tensor and per-head modes: a dense KV_N x D table, element [h * D + d].
std::vector<float> channel_table(const TensorView& t, const ScaleLayout& l, std::int64_t heads, std::int64_t dim) {
  std::vector<float> v(static_cast<std::size_t>(heads * dim));
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t d = 0; d < dim; ++d) v[h * dim + d] = element(t, l.base + h * l.h_stride + d * l.d_stride);
  return v;
}

Antiquant side(const Ctx& c, int s) {
  const Ctx::Antiquant& q = c.aq;
  const ScaleSizes z = scale_sizes(c, s);
  ScaleLayout l;
  scale_layout(*q.scale[s], !q.split, s, q.mode[s], z, &l);  // checked by check_antiquant_shapes
  Antiquant r;
  if (!l.per_token()) {
    r.channel_scale = channel_table(*q.scale[s], l, z.heads, z.head_dim);
    if (q.offset[s]) {
      ScaleLayout o;
      scale_layout(*q.offset[s], !q.split, s, q.mode[s], z, &o);
      r.channel_offset = channel_table(*q.offset[s], o, z.heads, z.head_dim);
    }
    return r;
  }
  // Per-token modes: the offset has the scale's shape and strides (check_antiquant_shapes).
  r.per_token = true;
  r.token_scale = static_cast<const float*>(q.scale[s]->data) + l.base;
  r.token_offset = q.offset[s] ? static_cast<const float*>(q.offset[s]->data) + l.base : nullptr;
  r.head_stride = l.h_stride;
  r.token_stride = l.t_stride;
  if (l.paged()) {
    r.paged = true;
    r.block_stride = l.b_stride;
    r.column_offset.assign(c.batch, 0);
  } else {
    r.batch_stride = l.b_stride;
    // 25.1 #8: under KV left padding the scale row is indexed by the physical column.
    r.column_offset = c.storage == Storage::kContiguous ? c.kv_start : std::vector<std::int64_t>(c.batch, 0);
  }
  return r;
}

}  // namespace

/// FIA-SPEC 12.3: fills p->key_antiquant (side 0) and p->value_antiquant (side 1); channel tables
/// hold float copies, per-token views point into the caller's FLOAT32 tensors.
void fill_antiquant(const Ctx& c, Problem* p) {
  p->key_antiquant = side(c, 0);
  p->value_antiquant = side(c, 1);
}

}  // namespace fia::detail
