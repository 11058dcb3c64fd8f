// Output views of fia::run (FIA-SPEC 3.1, 17): any strides with a contiguous innermost axis give
// the contiguous result; a view whose elements overlap in memory is refused naming the output.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "support/call_builder.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

CallSpec spec() {
  CallSpec s;
  s.layout = "BNSD";
  s.dtype = DType::F16;
  s.batch = 2;
  s.num_heads = 2;
  s.q_seq = 3;
  s.kv_seq = 20;
  s.lse = true;
  return s;
}

TEST(OutputViews, StridedOutputsGiveTheContiguousResult) {
  TestCall call = build_call(spec(), 1);
  Outputs dense;
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &dense).ok());
  // attention_out (2, 2, 3, 16) inside a (2, 3, 3, 24) buffer; softmax_lse (2, 2, 3, 1) every other float.
  std::vector<std::uint16_t> out_buf(2 * 3 * 3 * 24, 0xFFFF);
  std::vector<float> lse_buf(2 * 2 * 3 * 2, -1.0f);
  MutableTensorView out(out_buf.data(), DType::F16, {2, 2, 3, 16}, {3 * 3 * 24, 3 * 24, 24, 1});
  MutableTensorView lse(lse_buf.data(), DType::F32, {2, 2, 3, 1}, {12, 6, 2, 1});
  ASSERT_TRUE(run_into(call.args, out, lse).ok());
  const auto* want = reinterpret_cast<const std::uint16_t*>(dense.attention_out.bytes.data());
  const auto* want_lse = reinterpret_cast<const float*>(dense.softmax_lse.bytes.data());
  for (std::int64_t r = 0; r < 12; ++r) {
    EXPECT_EQ(std::memcmp(&out_buf[(r / 6) * 216 + (r / 3) % 2 * 72 + (r % 3) * 24], want + r * 16, 32), 0) << r;
    EXPECT_EQ(lse_buf[2 * r], want_lse[r]) << r;
  }
}

TEST(OutputViews, OverlappingOutputsAreRefused) {
  TestCall call = build_call(spec(), 1);
  std::vector<std::uint16_t> out_buf(2 * 2 * 3 * 16);
  std::vector<float> lse_buf(2 * 2 * 3);
  const MutableTensorView lse(lse_buf.data(), DType::F32, {2, 2, 3, 1});
  const std::vector<std::vector<std::int64_t>> overlapping = {
      {0, 48, 16, 1},      // the batches on each other
      {96, 48, 8, 1},      // rows half a row apart
      {96, 16, 48, 1},     // heads and rows interleaving into each other
  };
  for (const auto& strides : overlapping) {
    const MutableTensorView out(out_buf.data(), DType::F16, {2, 2, 3, 16}, strides);
    const Status st = run_into(call.args, out, lse);
    EXPECT_EQ(st.code, StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_EQ(st.parameter, "attention_out") << st.to_string();
  }
  // Heads and rows swapped (a permutation) do not overlap.
  const MutableTensorView permuted(out_buf.data(), DType::F16, {2, 2, 3, 16}, {96, 16, 32, 1});
  EXPECT_TRUE(run_into(call.args, permuted, lse).ok());
  const MutableTensorView out(out_buf.data(), DType::F16, {2, 2, 3, 16});
  const MutableTensorView lse_overlap(lse_buf.data(), DType::F32, {2, 2, 3, 1}, {6, 3, 0, 1});
  const Status st = run_into(call.args, out, lse_overlap);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_EQ(st.parameter, "softmax_lse") << st.to_string();
}

}  // namespace
}  // namespace fia::test
