#include "support/mla_full_quant_builder.hpp"

#include <random>

#include "numeric/half.hpp"

namespace fia::test {

namespace {

OwnedTensor f32_scalar(float v) {
  OwnedTensor t(DType::F32, {1});
  t.as<float>()[0] = v;
  return t;
}

}  // namespace

MlaFullQuantCall build_mla_full_quant_call(const CallSpec& spec_in, std::uint64_t seed, bool unit_scales) {
  CallSpec spec = spec_in;
  spec.dtype = DType::BF16;
  MlaFullQuantCall out{build_call(spec, seed), build_call(spec, seed)};
  FiaArgs& a = out.call.args;
  FiaArgs& t = out.twin.args;
  std::mt19937_64 rng(seed * 7 + 3);
  const int qk_max = unit_scales ? 3 : 127;
  std::uniform_int_distribution<int> qk(-qk_max, qk_max), rope_int(-2, 2);
  std::uniform_real_distribution<float> rope_real(-100.0f, 100.0f), row_scale(0.5f, 1.5f);
  // Integer tensors: INT8 in the call, the same integers as BF16 in the twin.
  auto integers = [&](TensorView* int8_view, TensorView* bf16_view) {
    OwnedTensor i8(DType::I8, int8_view->shape), bf(DType::BF16, int8_view->shape);
    for (std::int64_t k = 0; k < i8.numel(); ++k) {
      const int v = qk(rng);
      i8.as<std::int8_t>()[k] = static_cast<std::int8_t>(v);
      set_value(bf, k, static_cast<float>(v));
    }
    *int8_view = out.call.keep(std::move(i8));
    *bf16_view = out.twin.keep(std::move(bf));
  };
  auto rope = [&](TensorView* view, TensorView* twin_view) {
    OwnedTensor r(DType::BF16, view->shape);
    for (std::int64_t k = 0; k < r.numel(); ++k)
      set_value(r, k, unit_scales ? static_cast<float>(rope_int(rng)) : rope_real(rng));
    OwnedTensor copy(DType::BF16, view->shape);
    copy.bytes = r.bytes;
    *view = out.call.keep(std::move(r));
    *twin_view = out.twin.keep(std::move(copy));
  };
  integers(&a.query, &t.query);
  integers(&a.key[0], &t.key[0]);
  integers(&a.value[0], &t.value[0]);
  rope(&a.query_rope, &t.query_rope);
  rope(&a.key_rope, &t.key_rope);
  if (unit_scales) {
    // Every latent row (and its rope row) is one of four patterns: a row's scores take at most
    // four integer values, several keys share the row max.
    const std::int64_t D = spec.qk_dim, R = spec.rope_dim;
    const std::int64_t rows = a.key[0].numel() / D;
    std::vector<std::int64_t> pattern(static_cast<std::size_t>(rows));
    for (auto& x : pattern) x = static_cast<std::int64_t>(rng() % 4);
    OwnedTensor keys(DType::I8, a.key[0].shape), key_rope(DType::BF16, a.key_rope.shape);
    OwnedTensor twin_keys(DType::BF16, a.key[0].shape), twin_rope(DType::BF16, a.key_rope.shape);
    const auto* k0 = static_cast<const std::int8_t*>(a.key[0].data);
    const auto* r0 = static_cast<const std::uint16_t*>(a.key_rope.data);
    for (std::int64_t k = 0; k < keys.numel(); ++k) {
      const std::int8_t v = k0[pattern[k / D] * D + k % D];
      keys.as<std::int8_t>()[k] = v;
      set_value(twin_keys, k, v);
    }
    for (std::int64_t k = 0; k < key_rope.numel(); ++k)
      key_rope.as<std::uint16_t>()[k] = twin_rope.as<std::uint16_t>()[k] = r0[pattern[k / R] * R + k % R];
    a.key[0] = out.call.keep(std::move(keys));
    t.key[0] = out.twin.keep(std::move(twin_keys));
    a.key_rope = out.call.keep(std::move(key_rope));
    t.key_rope = out.twin.keep(std::move(twin_rope));
  }

  // 13.3: dequant_scale_query has the query's shape without D ((B, S, N) for BSH).
  std::vector<std::int64_t> shape(a.query.shape.begin(), a.query.shape.end() - 1);
  if (spec.layout.rfind("BSH", 0) == 0) shape.push_back(spec.num_heads);
  OwnedTensor dq(DType::F32, shape);
  const float key_scale = unit_scales ? 1.0f : 1.0f / 64.0f, value_scale = unit_scales ? 1.0f : 1.0f / 50.0f;
  // Scores (Q·K + rope) have a spread of about 1.25e5 here: scale them to about 2.
  const float base = static_cast<float>(2.0 / 1.25e5 / (key_scale * a.scale));
  for (std::int64_t k = 0; k < dq.numel(); ++k) dq.as<float>()[k] = unit_scales ? 1.0f : base * row_scale(rng);
  a.dequant_scale_query = out.call.keep(std::move(dq));
  a.query_quant_mode = 3;
  a.key_antiquant_scale = out.call.keep(f32_scalar(key_scale));
  a.value_antiquant_scale = out.call.keep(f32_scalar(value_scale));
  return out;
}

}  // namespace fia::test
