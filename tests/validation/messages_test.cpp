// What error messages say beyond the parameter name: hints for likely mistakes, echoed text that
// stays printable, and missing outputs named as missing.
#include <gtest/gtest.h>

#include "support/call_builder.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

/// A GQA call: 16 query heads of dim 64 over a cache of 4 KV heads.
CallSpec gqa(const std::string& layout) {
  CallSpec s;
  s.layout = layout;
  s.num_heads = 16;
  s.num_kv_heads = 4;
  s.q_seq = 1;
  s.kv_seq = 8;
  s.qk_dim = 64;
  return s;
}

TEST(ErrorMessages, ForgottenNumKeyValueHeadsSuggestsTheCachesHeadCount) {
  for (const std::string layout : {"BSH", "BNSD"}) {
    TestCall call = build_call(gqa(layout), 1);
    ASSERT_TRUE(plan_status(call.args).ok()) << layout;
    call.args.num_key_value_heads = 0;  // forgotten: taken as num_heads
    const Status st = plan_status(call.args);
    EXPECT_EQ(st.parameter, "key") << layout;
    const std::string hint = " (if the cache has 4 KV heads, set num_key_value_heads=4)";
    EXPECT_EQ(st.message, layout == "BSH" ? "key head dim 16 != query head dim 64" + hint
                                          : "key head count 4 != num_key_value_heads 16" + hint)
        << layout;
  }
  // A wrong count that does not divide the cache's hidden size gets the hint too.
  TestCall call = build_call(gqa("BSH"), 1);
  call.args.num_key_value_heads = 8;  // H 256 = 8 x 32: head dim 32 != 64
  EXPECT_EQ(plan_status(call.args).message,
            "key head dim 32 != query head dim 64 (if the cache has 4 KV heads, set num_key_value_heads=4)");
}

TEST(ErrorMessages, NoHintWhenNoKvHeadCountFits) {
  CallSpec s = gqa("BSH");
  s.num_heads = 6;
  s.num_kv_heads = 6;
  TestCall call = build_call(s, 1);
  call.args.key[0].shape[2] = 5 * 64;  // 5 heads of 64: 5 does not divide num_heads 6
  call.args.value[0].shape[2] = 5 * 64;
  EXPECT_EQ(plan_status(call.args).message, "key hidden size 320 is not a multiple of num_key_value_heads 6");
}

TEST(ErrorMessages, EchoedLayoutEscapesNulBytes) {
  TestCall call = build_call(gqa("BSH"), 1);
  call.args.input_layout = std::string("BS\0H", 4);
  const Status st = plan_status(call.args);
  EXPECT_EQ(st.parameter, "input_layout");
  EXPECT_EQ(st.message.rfind("unsupported layout 'BS\\x00H' (expected one of BSH, ", 0), 0u) << st.message;
  EXPECT_EQ(st.message.find('\0'), std::string::npos);
}

TEST(ErrorMessages, RunNamesAMissingSoftmaxLseAsMissing) {
  CallSpec s = gqa("BSH");
  s.lse = true;
  TestCall call = build_call(s, 1);
  Plan pl;
  ASSERT_TRUE(plan(call.args, Options{}, &pl).ok());
  OwnedTensor out(pl.attention_out_dtype(), pl.attention_out_shape());
  std::vector<std::byte> ws(pl.workspace_bytes());
  Status st = run(pl, out.mutable_view(), {}, ws.data(), ws.size());
  EXPECT_EQ(st.code, StatusCode::kNullArgument);
  EXPECT_EQ(st.to_string(), "softmax_lse: required when softmax_lse_flag is true");
  OwnedTensor lse(DType::F32, pl.softmax_lse_shape());
  st = run(pl, {}, lse.mutable_view(), ws.data(), ws.size());
  EXPECT_EQ(st.code, StatusCode::kNullArgument);
  EXPECT_EQ(st.to_string(), "attention_out: required, got an absent view");
  EXPECT_TRUE(run(pl, out.mutable_view(), lse.mutable_view(), ws.data(), ws.size()).ok());
}

}  // namespace
}  // namespace fia::test
