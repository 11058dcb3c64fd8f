#include "support/expectations.hpp"

#include <gtest/gtest.h>

#include <limits>

#include "cpu/attention_item.hpp"
#include "support/criterion.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {

void expect_cpu_matches_reference(const FiaArgs& args, bool lse, const std::string& context, int threads,
                                  const std::string& isa) {
  detail::ReferenceResult exact;
  Status st = reference_exact(args, &exact);
  ASSERT_TRUE(st.ok()) << st.to_string() << "\n" << context;
  Outputs out;
  st = run_call(args, Backend::kCpu, threads, &out);
  ASSERT_TRUE(st.ok()) << st.to_string() << "\n" << context;
  if (!isa.empty()) {
    EXPECT_STREQ(detail::kernel_isa(), isa.c_str());
  }
  const Verdict v = criterion_a(out.attention_out, exact.out);
  EXPECT_TRUE(v.pass) << isa << (isa.empty() ? "" : ": ") << v.detail << "\n" << context;
  if (lse) {
    const Verdict l = lse_match(out.softmax_lse, exact.lse);
    EXPECT_TRUE(l.pass) << isa << (isa.empty() ? "" : ": ") << l.detail << "\n" << context;
  }
}

void expect_thread_invariant(const FiaArgs& args, const std::string& context) {
  // Small calls run on one thread by default: force the workers on.
  detail::PlanLimits parallel;
  parallel.serial_work = 0;
  parallel.chunk_cols = 16;  // split even short rows, of calls of any size, so that the chunk merge runs too
  parallel.chunk_bytes = 0;
  parallel.split_items_below = std::numeric_limits<std::int64_t>::max();
  const Outputs one = run_with_limits(args, parallel, 1);
  const Outputs two = run_with_limits(args, parallel, 2);
  const Outputs many = run_with_limits(args, parallel, 5);
  EXPECT_EQ(one.attention_out.bytes, two.attention_out.bytes) << context;
  EXPECT_EQ(one.softmax_lse.bytes, two.softmax_lse.bytes) << context;
  EXPECT_EQ(one.attention_out.bytes, many.attention_out.bytes) << context;
}

void expect_same_bits(const FiaArgs& a, const std::string& a_what, const FiaArgs& b, const std::string& b_what,
                      const std::string& context) {
  Outputs x, y;
  const Status sa = run_call(a, Backend::kCpu, 2, &x), sb = run_call(b, Backend::kCpu, 2, &y);
  ASSERT_TRUE(sa.ok()) << a_what << ": " << sa.to_string() << "\n" << context;
  ASSERT_TRUE(sb.ok()) << b_what << ": " << sb.to_string() << "\n" << context;
  EXPECT_EQ(x.attention_out.bytes, y.attention_out.bytes) << context;
  EXPECT_EQ(x.softmax_lse.bytes, y.softmax_lse.bytes) << context;
}

}  // namespace fia::test
