// Rows no item computes (FIA-SPEC 7.6: query rows past actual_seq_lengths, batches without keys,
// rows the band leaves no key) are 0 in attention_out, +inf in softmax_lse, whatever the caller's
// buffers held; run() zeroes attention_out first only when the plan's items leave such rows
// (CpuPlan::writes_every_row), and every row the items cover is written over.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "support/call_builder.hpp"
#include "support/full_quant_builder.hpp"
#include "support/run_helpers.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

constexpr int kThreads = 2;

/// The call run into attention_out and softmax_lse buffers shaped as `like`'s whose every byte is
/// 0xFF (NaN in F16/BF16/F32, -1 in int8), as a buffer reused from an earlier call may hold anything.
Outputs run_into_poisoned(const FiaArgs& args, const Outputs& like) {
  Outputs o;
  o.attention_out = OwnedTensor(like.attention_out.dtype, like.attention_out.shape);
  o.softmax_lse = OwnedTensor(DType::F32, like.softmax_lse.shape);
  std::memset(o.attention_out.bytes.data(), 0xFF, o.attention_out.bytes.size());
  std::memset(o.softmax_lse.bytes.data(), 0xFF, o.softmax_lse.bytes.size());
  const Status ran = run_into(args, o.attention_out.mutable_view(), o.softmax_lse.mutable_view(), kThreads);
  EXPECT_TRUE(ran.ok()) << ran.to_string();
  return o;
}

/// The call's schedule.
detail::CpuPlan plan_of(const FiaArgs& args) {
  detail::Problem p;
  const Status st = detail::build_problem(args, false, &p);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return detail::make_cpu_plan(p, kThreads);
}

struct Case {
  std::string name;
  TestCall call;
  bool every_row;  ///< the plan's items cover every row of attention_out
};

CallSpec base() {
  CallSpec s;
  s.layout = "BSND";
  s.dtype = DType::F16;
  s.batch = 2;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.q_seq = 40;
  s.kv_seq = 40;
  s.lse = true;
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](std::string name, const CallSpec& s, bool every_row) {
    out.push_back({std::move(name), build_call(s, 7), every_row});
  };
  auto add_full_quant = [&](std::string name, const FullQuantSpec& fs, bool every_row) {
    out.push_back({std::move(name), build_full_quant_call(fs, 7).call, every_row});
  };
  CallSpec causal = base();  // wide items over every row
  causal.mask = MaskKind::kCompressed;
  causal.sparse_mode = 3;
  add("causal_prefill", causal, true);
  CallSpec varlen = causal;
  varlen.layout = "TND";
  varlen.act_q = std::vector<std::int64_t>{17, 40};
  varlen.act_kv = std::vector<std::int64_t>{17, 40};
  add("tnd_prefill", varlen, true);
  CallSpec split = base();  // one long decode row per KV head: split into chunks
  split.batch = 1;
  split.q_seq = 1;
  split.kv_seq = 3000;
  add("split_decode", split, true);
  CallSpec grouped = base();  // decode items spanning both KV heads of a BSH token row
  grouped.layout = "BSH";
  grouped.q_seq = 1;
  grouped.kv_seq = 50;
  add("bsh_decode", grouped, true);
  CallSpec short_rows = causal;  // query rows past actual_seq_lengths
  short_rows.act_q = std::vector<std::int64_t>{40, 23};
  add("rows_past_actual_seq_lengths", short_rows, false);
  CallSpec no_keys = base();  // a batch without keys
  no_keys.act_kv = std::vector<std::int64_t>{40, 0};
  add("batch_without_keys", no_keys, false);
  CallSpec some_rows = base();  // rows 0-4 see no key, within the first row block's item
  some_rows.mask = MaskKind::kFull;
  some_rows.mask_density = 0.0;
  some_rows.pre_tokens = 100;
  some_rows.next_tokens = -5;
  add("band_rows_without_keys_in_an_item", some_rows, true);
  CallSpec band = base();  // rows 0-19 see no key: the first row block has no item
  band.mask = MaskKind::kFull;
  band.mask_density = 0.0;
  band.pre_tokens = 100;
  band.next_tokens = -20;
  add("band_without_keys", band, false);
  FullQuantSpec fq;  // int8 full quantization, int8 output; a decode batch without keys
  fq.spec = base();
  fq.int8_out = true;
  add_full_quant("full_quant", fq, true);
  FullQuantSpec fq16;  // int8 full quantization, fp16 output, rows 0-4 without keys in an item
  fq16.spec = some_rows;
  add_full_quant("full_quant_rows_without_keys_in_an_item", fq16, true);
  fq.spec.q_seq = 1;
  fq.spec.act_kv = std::vector<std::int64_t>{40, 0};
  add_full_quant("full_quant_decode_without_keys", fq, false);
  return out;
}

TEST(UnwrittenRows, AreZeroAndTheRestWrittenOverWhateverTheBuffersHeld) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const detail::CpuPlan plan = plan_of(c.call.args);
    EXPECT_EQ(plan.writes_every_row, c.every_row);
    if (c.name == "split_decode") {
      EXPECT_FALSE(plan.splits.empty());
    }
    if (c.name == "bsh_decode") {
      EXPECT_GT(plan.items.front().kv_heads, 1);
    }
    Outputs fresh;
    ASSERT_TRUE(run_call(c.call.args, Backend::kCpu, kThreads, &fresh).ok());
    const Outputs reused = run_into_poisoned(c.call.args, fresh);
    ASSERT_EQ(reused.attention_out.bytes.size(), fresh.attention_out.bytes.size());
    EXPECT_TRUE(reused.attention_out.bytes == fresh.attention_out.bytes);
    EXPECT_TRUE(reused.softmax_lse.bytes == fresh.softmax_lse.bytes);
  }
}

TEST(UnwrittenRows, RowsWithoutKeysAreZeroWithAnInfiniteLse) {
  CallSpec s = base();
  s.act_kv = std::vector<std::int64_t>{40, 0};
  const TestCall call = build_call(s, 3);
  Outputs fresh;
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, kThreads, &fresh).ok());
  const Outputs o = run_into_poisoned(call.args, fresh);
  const std::int64_t row = s.num_heads * s.qk_dim;  // BSND: batch 1 starts after batch 0's 40 rows
  const auto* out = reinterpret_cast<const std::uint16_t*>(o.attention_out.bytes.data());
  const auto* lse = reinterpret_cast<const float*>(o.softmax_lse.bytes.data());
  const std::int64_t per_batch = s.q_seq * row;
  for (std::int64_t k = 0; k < per_batch; ++k) ASSERT_EQ(out[per_batch + k], 0u) << k;
  for (std::int64_t k = 0; k < s.num_heads * s.q_seq; ++k)
    ASSERT_EQ(lse[s.num_heads * s.q_seq + k], INFINITY) << k;
  std::int64_t nonzero = 0;
  for (std::int64_t k = 0; k < per_batch; ++k) nonzero += out[k] != 0;
  EXPECT_GT(nonzero, per_batch / 2);  // batch 0 computed
}

}  // namespace
}  // namespace fia::test
