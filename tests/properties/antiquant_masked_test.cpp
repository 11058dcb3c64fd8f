// Masked keys contribute nothing, whatever their antiquant scale and offset slots hold
// (FIA-SPEC 25.1 #24): NaN token scales and offsets of masked columns leave the output finite and
// equal to the float64 reference, which never reads them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/run_helpers.hpp"

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
  detail::ReferenceResult exact;
  Status st = reference_exact(a, &exact);
  ASSERT_TRUE(st.ok()) << st.to_string();
  Outputs out;
  st = run_call(a, Backend::kCpu, 2, &out);
  ASSERT_TRUE(st.ok()) << st.to_string();
  const Verdict v = criterion_a(out.attention_out, exact.out);
  EXPECT_TRUE(v.pass) << v.detail << "\n" << describe(s);
  const Verdict l = lse_match(out.softmax_lse, exact.lse);
  EXPECT_TRUE(l.pass) << l.detail << "\n" << describe(s);
}

INSTANTIATE_TEST_SUITE_P(Cases, MaskedTokenScales, ::testing::Range(0, 8));

}  // namespace
}  // namespace fia::test
