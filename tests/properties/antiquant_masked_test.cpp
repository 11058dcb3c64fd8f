// Antiquant edge values: masked keys contribute nothing, whatever their scale and offset slots
// hold (FIA-SPEC 25.1 #24); offsets that cancel the stored values give the exact (x + offset) *
// scale of 12.1, not the difference of two large sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "numeric/half.hpp"

#include "support/call_builder.hpp"
#include "support/expectations.hpp"

namespace fia::test {
namespace {

class MaskedTokenScales : public ::testing::TestWithParam<int> {};

TEST_P(MaskedTokenScales, NaNInMaskedSlotsDoesNotLeak) {
  const int i = GetParam();
  CallSpec s;
  s.layout = "BNSD";
  s.dtype = i % 2 ? DType::BF16 : DType::F16;
  s.batch = 2;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.q_seq = 1;
  s.kv_seq = 300 + 250 * i;  // one chunk, and several (decode splits at 512 tokens)
  s.qk_dim = 64;
  s.lse = true;
  s.mask = MaskKind::kFull;
  s.mask_rank = 4;
  s.mask_density = 0.3;
  set_antiquant(s, i % 3 ? KvQuant::kInt8 : KvQuant::kInt4, i % 4 < 2 ? AntiquantKind::kToken : AntiquantKind::kTokenHead,
                static_cast<std::uint64_t>(i));
  s.quant.offsets = true;
  s.quant.combined = false;
  s.quant.token_lead_one = false;
  TestCall call = build_call(s, 7000 + static_cast<std::uint64_t>(i));
  FiaArgs& a = call.args;
  ASSERT_EQ(a.atten_mask.rank(), 4u);
  ASSERT_EQ(a.value_antiquant_scale.rank(), i % 4 < 2 ? 2u : 3u);
  const auto* mask = static_cast<const std::uint8_t*>(a.atten_mask.data);
  const std::int64_t kv = s.kv_seq, heads = i % 4 < 2 ? 1 : s.num_kv_heads;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int poisoned = 0;
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t j = 0; j < kv; ++j) {
      if (mask[(a.atten_mask.shape[0] == 1 ? 0 : b) * a.atten_mask.stride(0) + j * a.atten_mask.stride(3)] == 0) continue;
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t o = heads == 1 ? b * a.value_antiquant_scale.stride(0) + j * a.value_antiquant_scale.stride(1)
                                          : b * a.value_antiquant_scale.stride(0) + h * a.value_antiquant_scale.stride(1) +
                                                j * a.value_antiquant_scale.stride(2);
        for (const TensorView* t : {&a.key_antiquant_scale, &a.key_antiquant_offset, &a.value_antiquant_scale,
                                    &a.value_antiquant_offset})
          static_cast<float*>(const_cast<void*>(t->data))[o] = nan;
        ++poisoned;
      }
    }
  ASSERT_GT(poisoned, 0);
  expect_cpu_matches_reference(a, true, describe(s));
}

INSTANTIATE_TEST_SUITE_P(Cases, MaskedTokenScales, ::testing::Range(0, 8));

/// Per-channel offsets equal to minus the stored value on every channel but the first, a large
/// query: Q·K is then carried by one channel, and any folding of the offsets into separate sums
/// cancels catastrophically (it missed criterion A on up to 73 % of elements).
class CancellingOffsets : public ::testing::TestWithParam<int> {};

TEST_P(CancellingOffsets, MatchTheReference) {
  const int i = GetParam();
  CallSpec s;
  s.layout = "BNSD";
  s.dtype = DType::F16;
  s.num_heads = 2;
  s.num_kv_heads = 1;
  s.q_seq = i % 2 ? 8 : 1;  // decode items, and narrow prefill rows
  s.kv_seq = 64;
  s.qk_dim = 128;
  s.lse = true;
  s.value_range = 100.0f;
  s.scale = 1.0;
  set_antiquant(s, KvQuant::kInt8, AntiquantKind::kChannel, 0);
  s.quant.channel_shape = "ND";
  s.quant.offsets = true;
  s.quant.combined = false;
  TestCall call = build_call(s, 7100 + static_cast<std::uint64_t>(i));
  FiaArgs& a = call.args;
  auto* k = static_cast<std::int8_t*>(const_cast<void*>(a.key[0].data));
  auto* v = static_cast<std::int8_t*>(const_cast<void*>(a.value[0].data));
  std::mt19937_64 rng(static_cast<std::uint64_t>(i));
  // Channel 0 carries small differences between tokens, so the softmax is not one-hot.
  auto* q = static_cast<std::uint16_t*>(const_cast<void*>(a.query.data));
  for (std::int64_t n = 0; n < s.num_heads; ++n)
    for (std::int64_t r = 0; r < s.q_seq; ++r) q[n * a.query.stride(1) + r * a.query.stride(2)] = detail::f32_to_f16(1.0f);
  for (std::int64_t t = 0; t < s.kv_seq; ++t)
    k[t * a.key[0].stride(2)] = static_cast<std::int8_t>(static_cast<int>(rng() % 7) - 3);
  for (std::int64_t d = 1; d < s.qk_dim; ++d) {
    const auto c = static_cast<std::int8_t>((rng() % 2 ? 1 : -1) * static_cast<int>(100 + rng() % 28));
    for (std::int64_t t = 0; t < s.kv_seq; ++t) {
      k[t * a.key[0].stride(2) + d * a.key[0].stride(3)] = c;
      if (i >= 2) v[t * a.value[0].stride(2) + d * a.value[0].stride(3)] = c;
    }
    auto set_offset = [&](const TensorView& t) {
      static_cast<std::uint16_t*>(const_cast<void*>(t.data))[d * t.stride(1)] = detail::f32_to_f16(-static_cast<float>(c));
    };
    set_offset(a.key_antiquant_offset);
    static_cast<std::uint16_t*>(const_cast<void*>(a.key_antiquant_scale.data))[d * a.key_antiquant_scale.stride(1)] =
        detail::f32_to_f16(0.3337f);
    if (i >= 2) set_offset(a.value_antiquant_offset);
  }
  expect_cpu_matches_reference(a, true, describe(s));
}

INSTANTIATE_TEST_SUITE_P(Cases, CancellingOffsets, ::testing::Range(0, 4));

}  // namespace
}  // namespace fia::test
