#include "support/full_quant_builder.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "numeric/half.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {

namespace {

/// An int8 tensor of `shape` with values from fn(linear index).
template <class Fn>
OwnedTensor int8_tensor(const std::vector<std::int64_t>& shape, Fn fn) {
  OwnedTensor t(DType::I8, shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.as<std::int8_t>()[i] = static_cast<std::int8_t>(fn(i));
  return t;
}

OwnedTensor scalar(float v, bool as_u64) {
  if (!as_u64) {
    OwnedTensor t(DType::F32, {1});
    t.as<float>()[0] = v;
    return t;
  }
  OwnedTensor t(DType::U64, {1});
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  t.as<std::uint64_t>()[0] = bits;
  return t;
}

}  // namespace

FullQuantCall build_full_quant_call(const FullQuantSpec& fs, std::uint64_t seed) {
  CallSpec spec = fs.spec;
  spec.dtype = DType::F16;
  FullQuantCall out{build_call(spec, seed)};
  FiaArgs& a = out.call.args;
  std::mt19937_64 rng(seed * 7 + 1);
  std::uniform_int_distribution<int> u(-127, 127);
  auto random_int8 = [&](const TensorView& v) {
    return out.call.keep(int8_tensor(v.shape, [&](std::int64_t) { return u(rng); }));
  };
  a.query = random_int8(a.query);
  for (auto& k : a.key) k = random_int8(k);
  for (auto& v : a.value) v = random_int8(v);
  for (TensorView* t : {&a.key_shared_prefix, &a.value_shared_prefix})
    if (t->present()) *t = random_int8(*t);
  const double d = static_cast<double>(spec.qk_dim);
  const float dq1 = static_cast<float>(2.0 / (std::sqrt(d) * 5376.0 * a.scale));
  a.dequant_scale1 = out.call.keep(scalar(dq1, seed % 2 == 1));
  a.quant_scale1 = out.call.keep(scalar(127.0f, false));
  a.dequant_scale2 = out.call.keep(scalar(1.0f / (127.0f * 16.0f), seed % 2 == 1));
  if (fs.int8_out) {
    const std::int64_t vd = spec.v_dim ? spec.v_dim : spec.qk_dim;
    const std::vector<std::int64_t> shape =
        fs.per_channel ? std::vector<std::int64_t>{spec.num_heads, vd} : std::vector<std::int64_t>{1};
    OwnedTensor s(DType::F32, shape), o(DType::F32, shape);
    std::uniform_real_distribution<float> sc(5.0f, 15.0f), off(-2.0f, 2.0f);
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      s.as<float>()[i] = fs.per_channel ? sc(rng) : 10.0f;
      o.as<float>()[i] = fs.per_channel ? off(rng) : 1.25f;
    }
    out.offset_value = fs.offset && !fs.per_channel ? 1.25f : 0.0f;
    a.quant_scale2 = out.call.keep(std::move(s));
    if (fs.offset) a.quant_offset2 = out.call.keep(std::move(o));
  }
  return out;
}

FullQuantCall hand_call(std::int64_t L, std::int64_t D) {
  FullQuantCall out;
  FiaArgs& a = out.call.args;
  a.input_layout = "BNSD";
  a.num_heads = 1;
  a.scale = 0.5;
  a.softmax_lse_flag = true;
  a.query = out.call.keep(int8_tensor({1, 1, 1, D}, [](std::int64_t) { return 1; }));
  a.key = {out.call.keep(int8_tensor({1, 1, L, D}, [&](std::int64_t i) { return (i / D) % 5 - 2; }))};
  a.value = {out.call.keep(int8_tensor({1, 1, L, D}, [&](std::int64_t i) { return (i / D + i % D) % 7 - 3; }))};
  a.dequant_scale1 = out.call.keep(scalar(0.01f, false));
  a.quant_scale1 = out.call.keep(scalar(127.0f, false));
  a.dequant_scale2 = out.call.keep(scalar(1.0f / 127.0f, true));
  return out;
}

Outputs run_full_quant(const FiaArgs& args, Backend backend, int threads) {
  Outputs out;
  const Status st = run_call(args, backend, threads, &out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

void put_int8_extremes(const TensorView& t) {
  auto* x = static_cast<std::int8_t*>(const_cast<void*>(t.data));
  for (std::int64_t k = 0; k < t.numel(); k += 7) x[k] = -128;
}

double value_at(const OwnedTensor& t, std::int64_t k) {
  switch (t.dtype) {
    case DType::F16: return f16_to_f32(t.as<std::uint16_t>()[k]);
    case DType::BF16: return bf16_to_f32(t.as<std::uint16_t>()[k]);
    case DType::F32: return t.as<float>()[k];
    case DType::I8: return t.as<std::int8_t>()[k];
    default: return 0.0;
  }
}

}  // namespace fia::test
