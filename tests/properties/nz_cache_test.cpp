// The NZ paged cache (blockNum, KV_N, D/D0, blockSize, D0), FIA-SPEC 3.2 and 9.1, is another
// addressing of the same tokens: an NZ cache and the (blockNum, KV_N, blockSize, D) cache holding
// the same values give the same bits on the cpu backend (every instruction set) and the same
// float64 answer on the reference; with fp16/bf16 K/V, int8 antiquant, int8 full quant, and decode
// MLA with an NZ key_rope.
#include <gtest/gtest.h>

#include <string>

#include "cpu/isa.hpp"
#include "support/call_builder.hpp"
#include "support/full_quant_builder.hpp"
#include "support/nz_cache.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

/// Both calls on the cpu backend on every instruction set (same bits), and on the reference (the
/// same float64 answer).
void expect_same(const FiaArgs& nd, const FiaArgs& nz, const std::string& what) {
  for (const std::string& isa : detail::available_isas()) {
    ASSERT_TRUE(detail::force_isa(isa));
    Outputs x, y;
    const Status sx = run_call(nd, Backend::kCpu, 2, &x), sy = run_call(nz, Backend::kCpu, 2, &y);
    ASSERT_TRUE(sx.ok()) << what << ": " << sx.to_string();
    ASSERT_TRUE(sy.ok()) << what << ": " << sy.to_string();
    EXPECT_EQ(x.attention_out.bytes, y.attention_out.bytes) << what << " on " << isa;
    EXPECT_EQ(x.softmax_lse.bytes, y.softmax_lse.bytes) << what << " on " << isa;
  }
  detail::force_isa("");
  detail::ReferenceResult rx, ry;
  ASSERT_TRUE(reference_exact(nd, &rx).ok()) << what;
  ASSERT_TRUE(reference_exact(nz, &ry).ok()) << what;
  EXPECT_EQ(rx.out, ry.out) << what;
  EXPECT_EQ(rx.lse, ry.lse) << what;
}

/// A paged call over a (block_num, N, block_size, D) cache from the storage sweep's seed.
CallSpec paged_spec(int seed) {
  CallSpec spec = storage_spec(static_cast<std::uint64_t>(seed) + 300, KvStorage::kPaged);
  spec.paged_bnbsd = true;
  return spec;
}

TEST(NzCache, FloatKvGivesTheNdBits) {
  for (int seed = 0; seed < 12; ++seed) {
    const CallSpec spec = paged_spec(seed);
    const TestCall nd = build_call(spec, static_cast<std::uint64_t>(seed));
    const TestCall nz = as_nz(nd.args);
    expect_same(nd.args, nz.args, describe(spec));
  }
}

TEST(NzCache, Int8AntiquantGivesTheNdBits) {
  int n = 0;
  for (AntiquantKind kind : kAntiquantKinds) {
    CallSpec spec = paged_spec(n);
    spec.qk_dim = 32 << (n % 2);  // D0 = 32 for int8
    set_antiquant(spec, KvQuant::kInt8, kind, static_cast<std::uint64_t>(n));
    const TestCall nd = build_call(spec, static_cast<std::uint64_t>(n) + 50);
    const TestCall nz = as_nz(nd.args);
    expect_same(nd.args, nz.args, describe(spec));
    ++n;
  }
}

TEST(NzCache, DecodeMlaWithNzKeyRopeGivesTheNdBits) {
  for (int seed = 0; seed < 3; ++seed) {
    CallSpec spec;
    spec.layout = seed == 1 ? "BSH" : "BSND";
    spec.dtype = seed % 2 ? DType::BF16 : DType::F16;
    spec.batch = 2;
    spec.num_heads = 16;
    spec.num_kv_heads = 1;
    spec.qk_dim = 512;
    spec.rope_dim = 64;
    spec.q_seq = 1 + seed;
    spec.kv_seq = 300;
    spec.act_kv = std::vector<std::int64_t>{300, 129 - seed};
    spec.sparse_mode = spec.q_seq > 1 ? 3 : 0;
    spec.mask = spec.q_seq > 1 ? MaskKind::kCompressed : MaskKind::kNone;
    spec.storage = KvStorage::kPaged;
    spec.paged_bnbsd = true;
    spec.block_size = seed == 2 ? 16 : 128;
    spec.lse = true;
    const TestCall nd = build_call(spec, static_cast<std::uint64_t>(seed) + 7);
    const TestCall nz = as_nz(nd.args);
    expect_same(nd.args, nz.args, describe(spec));
  }
}

TEST(NzCache, Int8FullQuantGivesTheNdBits) {
  for (int seed = 0; seed < 3; ++seed) {
    FullQuantSpec fs;
    fs.spec = paged_spec(seed);
    fs.spec.qk_dim = 32 << seed % 2;
    fs.int8_out = seed == 2;
    const FullQuantCall nd = build_full_quant_call(fs, static_cast<std::uint64_t>(seed));
    const TestCall nz = as_nz(nd.call.args);
    expect_same(nd.call.args, nz.args, describe(fs.spec));
  }
}

}  // namespace
}  // namespace fia::test
