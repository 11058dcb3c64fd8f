// fia::compressed_mask (FIA-SPEC 6.2): its content, and causal prefill with it equals the same
// call with the explicit full mask.
#include <gtest/gtest.h>

#include "support/call_builder.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

TEST(CompressedMask, IsTheStrictUpperTriangleOf2048) {
  for (DType dtype : {DType::Bool, DType::U8, DType::I8}) {
    OwnedTensor m;
    ASSERT_TRUE(compressed_mask(dtype, &m).ok());
    EXPECT_EQ(m.dtype, dtype);
    ASSERT_EQ(m.shape, (std::vector<std::int64_t>{2048, 2048}));
    const auto* v = m.as<std::uint8_t>();
    std::int64_t wrong = 0;
    for (std::int64_t x = 0; x < 2048; ++x)
      for (std::int64_t y = 0; y < 2048; ++y) wrong += v[x * 2048 + y] != (y > x ? 1 : 0);
    EXPECT_EQ(wrong, 0) << dtype_name(dtype);
  }
}

TEST(CompressedMask, RejectsOtherDtypes) {
  OwnedTensor m(DType::F32, {1});
  const Status st = compressed_mask(DType::F16, &m);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(st.to_string(), "atten_mask: a compressed mask must be BOOL, UINT8 or INT8 (FIA-SPEC 6.1), got F16");
  EXPECT_EQ(m.shape, (std::vector<std::int64_t>{1}));
  EXPECT_EQ(compressed_mask(DType::Bool, nullptr).code, StatusCode::kNullArgument);
}

/// The explicit (Q_S, KV_S) mask of a causal call whose diagonal is shifted right by `shift`
/// (FIA-SPEC 6.4: sparse_mode 2 is shift 0, sparse_mode 3 is KV_S - Q_S): 1 iff j > i + shift.
OwnedTensor explicit_causal(std::int64_t q, std::int64_t kv, std::int64_t shift) {
  OwnedTensor m(DType::Bool, {q, kv});
  for (std::int64_t i = 0; i < q; ++i)
    for (std::int64_t j = 0; j < kv; ++j) m.as<std::uint8_t>()[i * kv + j] = j > i + shift ? 1 : 0;
  return m;
}

TEST(CompressedMask, CausalPrefillEqualsTheExplicitFullMask) {
  CallSpec s;
  s.layout = "BNSD";
  s.batch = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.q_seq = 37;
  s.kv_seq = 100;
  s.qk_dim = 64;
  s.lse = true;
  for (const std::int64_t mode : {2, 3}) {
    for (const DType dtype : {DType::Bool, DType::U8, DType::I8}) {
      TestCall compressed = build_call(s, 9), full = build_call(s, 9);
      OwnedTensor mask;
      ASSERT_TRUE(compressed_mask(dtype, &mask).ok());
      compressed.args.sparse_mode = mode;
      compressed.args.atten_mask = compressed.keep(std::move(mask));
      full.args.atten_mask = full.keep(explicit_causal(s.q_seq, s.kv_seq, mode == 2 ? 0 : s.kv_seq - s.q_seq));
      for (const Backend backend : {Backend::kCpu, Backend::kReference}) {
        Outputs a, b;
        ASSERT_TRUE(run_call(compressed.args, backend, 2, &a).ok()) << mode;
        ASSERT_TRUE(run_call(full.args, backend, 2, &b).ok()) << mode;
        EXPECT_EQ(a.attention_out.bytes, b.attention_out.bytes) << "sparse_mode " << mode << " " << dtype_name(dtype);
        EXPECT_EQ(a.softmax_lse.bytes, b.softmax_lse.bytes) << "sparse_mode " << mode << " " << dtype_name(dtype);
      }
    }
  }
}

}  // namespace
}  // namespace fia::test
