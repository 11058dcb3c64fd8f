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

TEST(ErrorMessages, EchoedLayoutEscapesNulBytes) {
  TestCall call = build_call(gqa("BSH"), 1);
  call.args.input_layout = std::string("BS\0H", 4);
  const Status st = plan_status(call.args);
  EXPECT_EQ(st.parameter, "input_layout");
  EXPECT_EQ(st.message.rfind("unsupported layout 'BS\\x00H' (expected one of BSH, ", 0), 0u) << st.message;
  EXPECT_EQ(st.message.find('\0'), std::string::npos);
}

}  // namespace
}  // namespace fia::test
