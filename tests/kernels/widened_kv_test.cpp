// K and V columns widened once per KV head and kept across a worker's wide items (WidenedKv,
// cpu/attention_item.hpp), on every instruction set this build compiles and this CPU supports:
// the store changes no bit of any result (a store that holds every column an item needs, one
// that holds only the first of them, and none), whatever the mask, the storage, the dtype or the
// antiquantization, and a V row zeroed while one item excludes its key comes back for the items
// that see it (25.1 #24).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu/isa.hpp"
#include "fia/half.hpp"
#include "plan/plan.hpp"
#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/isa_params.hpp"
#include "support/run_helpers.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

/// Prefill calls with several wide items per KV head: 64 packed rows per item.
std::vector<CallSpec> prefill_specs() {
  std::vector<CallSpec> specs;
  CallSpec mha;  // no mask: every item spans every key
  mha.batch = 2;
  mha.num_heads = 2;
  mha.q_seq = 200;
  mha.kv_seq = 300;
  mha.qk_dim = 64;
  mha.lse = true;
  specs.push_back(mha);
  CallSpec causal = mha;  // GQA 4:1, causal: each item sees more keys than the one before
  causal.layout = "BSND";
  causal.dtype = DType::BF16;
  causal.num_heads = 8;
  causal.num_kv_heads = 2;
  causal.q_seq = causal.kv_seq = 333;
  causal.sparse_mode = 3;
  causal.mask = MaskKind::kCompressed;
  causal.sink = true;
  specs.push_back(causal);
  CallSpec band = mha;  // a sliding window: the items' first keys move on
  band.q_seq = band.kv_seq = 400;
  band.sparse_mode = 4;
  band.mask = MaskKind::kCompressed;
  band.pre_tokens = 150;
  band.next_tokens = 10;
  specs.push_back(band);
  CallSpec paged = causal;  // a paged cache, head dim 128 (padded V tile rows), pse
  paged.dtype = DType::F16;
  paged.storage = KvStorage::kPaged;
  paged.block_size = 32;
  paged.qk_dim = 128;
  paged.pse = true;
  specs.push_back(paged);
  CallSpec varlen = causal;  // TND, requests of unequal lengths
  varlen.layout = "TND";
  varlen.sink = false;
  varlen.act_q = std::vector<std::int64_t>{150, 333};
  varlen.act_kv = std::vector<std::int64_t>{150, 333};
  specs.push_back(varlen);
  CallSpec int8 = mha;  // int8 K/V dequantized per channel into the store
  int8.quant.format = KvQuant::kInt8;
  int8.quant.offsets = true;
  specs.push_back(int8);
  CallSpec masked = mha;  // a full mask: visibility per element
  masked.mask = MaskKind::kFull;
  masked.mask_density = 0.3;
  specs.push_back(masked);
  return specs;
}

detail::PlanLimits with_store(std::int64_t bytes) {
  detail::PlanLimits lim;
  lim.serial_work = 0;  // small calls run on the workers too
  lim.widened_kv_bytes = bytes;
  return lim;
}

/// Bytes of a store of `cols` columns for spec s.
std::int64_t store_bytes(const CallSpec& s, std::int64_t cols) {
  return cols * (s.qk_dim + detail::v_tile_stride(s.v_dim > 0 ? s.v_dim : s.qk_dim)) * 4;
}

class WidenedKvPerIsa : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_TRUE(detail::force_isa(GetParam())) << GetParam(); }
  void TearDown() override { detail::force_isa(""); }
};

TEST_P(WidenedKvPerIsa, TheStoreChangesNoBit) {
  std::uint64_t seed = 1;
  for (const CallSpec& spec : prefill_specs()) {
    const TestCall call = build_call(spec, seed++);
    detail::ReferenceResult exact;
    ASSERT_TRUE(reference_exact(call.args, &exact).ok()) << describe(spec);
    detail::CpuPlan plan;
    const Outputs none = run_with_limits(call.args, with_store(0), 2, &plan);
    EXPECT_EQ(plan.widened_kv_cols, 0);
    const Verdict v = criterion_a(none.attention_out, exact.out);
    EXPECT_TRUE(v.pass) << v.detail << "\n" << describe(spec);
    // bf16 dot products for both products (P rounded to bf16: not TND), or AMX tiles for P·V (P
    // in bf16 or f32), read K and V where they are stored: no store then.
    detail::Problem p;
    ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
    detail::read_kernel_settings(&p);
    const bool pairs = detail::bf16_wide_key_dots(p) || detail::amx_wide_keys(p);
    const bool in_place = pairs && (detail::amx_wide_values(p) || detail::bf16_value_dots(p));
    for (const std::int64_t cols : {std::int64_t{10000}, std::int64_t{130}}) {  // every column; the first ones
      for (const int threads : {1, 2}) {
        const Outputs held = run_with_limits(call.args, with_store(store_bytes(spec, cols)), threads, &plan);
        EXPECT_EQ(plan.kernels.wide_reads_kv_in_place, in_place) << describe(spec);
        if (in_place) {
          EXPECT_EQ(plan.widened_kv_cols, 0) << describe(spec);
        } else {
          EXPECT_GT(plan.widened_kv_cols, 0) << describe(spec);
        }
        EXPECT_LE(plan.widened_kv_cols, cols);
        EXPECT_EQ(held.attention_out.bytes, none.attention_out.bytes) << cols << " columns, " << threads
                                                                      << " threads\n" << describe(spec);
        EXPECT_EQ(held.softmax_lse.bytes, none.softmax_lse.bytes) << cols << " columns\n" << describe(spec);
      }
    }
  }
}

// Causal MHA over 256 keys, 64 rows per item, one worker: the item of rows 64-127 excludes key 100
// from rows 64-99 and zeroes its V row where the store holds it; the items after it see key 100
// from every row and must read the stored values again (NaN and inf reach them), while the rows
// before 100 keep their bits.
TEST_P(WidenedKvPerIsa, AZeroedValueRowComesBackForTheItemsThatSeeIt) {
  CallSpec spec;
  spec.num_heads = 1;
  spec.q_seq = spec.kv_seq = 256;
  spec.qk_dim = 64;
  spec.sparse_mode = 3;
  spec.mask = MaskKind::kCompressed;
  TestCall call = build_call(spec, 5);
  const Outputs clean = run_with_limits(call.args, with_store(0), 1);
  detail::Problem p;
  ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
  constexpr std::int64_t kKey = 100, kElement = 7;
  for (const float poison : {std::nanf(""), INFINITY}) {
    set_stored_value(p.locate(0, 0, kKey).value, p.kv_dtype, kElement, poison);
    detail::CpuPlan plan;
    const Outputs out = run_with_limits(call.args, with_store(1 << 19), 1, &plan);
    ASSERT_GT(plan.widened_kv_cols, 0);
    const auto* a = reinterpret_cast<const std::uint16_t*>(clean.attention_out.bytes.data());
    const auto* b = reinterpret_cast<const std::uint16_t*>(out.attention_out.bytes.data());
    for (std::int64_t i = 0; i < spec.q_seq; ++i) {
      const std::int64_t row = i * spec.qk_dim;
      if (i < kKey) {
        for (std::int64_t x = 0; x < spec.qk_dim; ++x) ASSERT_EQ(a[row + x], b[row + x]) << "row " << i << " element " << x;
      } else {
        EXPECT_FALSE(std::isfinite(f16_to_f32(b[row + kElement]))) << "poison " << poison << " row " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Compiled, WidenedKvPerIsa, ::testing::ValuesIn(detail::available_isas()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fia::test
