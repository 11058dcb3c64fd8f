// Wide items (prefill) over bf16 rows, whose Q·Kᵀ, and P·V where P is E rounded to bf16, take
// bf16 dot products on AVX-512 CPUs that have them (cpu/prefill_dots-inl.h), on every instruction
// set this build compiles and this CPU supports, AVX-512 both with and without the dot products
// (and, where the CPU has AMX tiles, a third time with both products on the tiles where they
// apply: AVX3_AMX_TILES):
// against the float64 reference (FIA-SPEC 21.1 criterion A) around every register block (row
// blocks of 64, 32 and 16 rows; blocks of 6, 4, 2 and 1 tokens or V dims), tile and paged-block
// edge, odd keys count and first key (token pairs), with rope dims, masks, pse and sinks; paged,
// NZ and contiguous caches and any thread count give the same bits; a query whose products the
// dot products would drop keeps the fp32 ones, also beside items of the same KV head that take
// them; a subnormal P, and a non-finite V row where some row excludes its key, take fp32 products.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu/amx.hpp"
#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "fia/half.hpp"
#include "support/call_builder.hpp"
#include "support/expectations.hpp"
#include "support/isa_params.hpp"
#include "support/nz_cache.hpp"
#include "support/paged_cache.hpp"
#include "support/run_helpers.hpp"
#include "support/subnormal_weight.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

/// A bf16 prefill call: `heads` query heads over `kv_heads`, q_seq query rows over kv keys.
CallSpec prefill(std::int64_t heads, std::int64_t kv_heads, std::int64_t q_seq, std::int64_t kv) {
  CallSpec c;
  c.layout = "BSND";
  c.dtype = DType::BF16;
  c.batch = 2;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.q_seq = q_seq;
  c.kv_seq = kv;
  c.act_kv = std::vector<std::int64_t>{kv, std::max<std::int64_t>(1, kv - 3)};
  c.qk_dim = 64;
  c.lse = true;
  return c;
}

using PrefillDotsPerIsa = PerIsaAndProducts;

// Packed rows per item: 16 query rows x 4 heads (64); a last item of 16, 20 or 44 rows (padded to
// 16, 32, 48: row blocks of 16, 32, 32 + 16); 80, 96 or 144 heads of one query row (64 + 16,
// 64 + 32; where the fp32 products take them, 144 rows are loaded one by one, past the 128 the K
// tile buffer takes; the query pairs of the dot products gather every row's words). Keys: every
// remainder of the token blocks of 6 and the tile edges.
TEST_P(PrefillDotsPerIsa, MatchesTheReferenceAroundEveryBlock) {
  struct Rows {
    std::int64_t heads, kv_heads, q_seq;
  };
  const Rows rows[] = {{8, 2, 20}, {8, 2, 21}, {8, 2, 27}, {4, 1, 32}, {80, 1, 2}, {96, 1, 1}, {144, 1, 1}};
  int variant = 0;
  for (const Rows& r : rows)
    for (const std::int64_t kv : {1, 2, 3, 5, 7, 8, 13, 127, 129, 260}) {
      CallSpec spec = prefill(r.heads, r.kv_heads, r.q_seq, kv);
      switch (variant++ % 5) {
        case 1: spec.sparse_mode = 3, spec.mask = MaskKind::kCompressed; break;  // causal: the band path
        case 2: spec.mask = MaskKind::kFull, spec.mask_density = 0.3; break;
        case 3: spec.pse = true; break;
        case 4: spec.sink = true, spec.storage = KvStorage::kPaged, spec.block_size = 16; break;
        default: break;
      }
      const TestCall call = build_call(spec, static_cast<std::uint64_t>(kv * 37 + variant));
      expect_cpu_matches_reference(call.args, spec.lse, describe(spec), 2, isa());
    }
}

// Rope dims (their pairs after the key dims'), head dims of 2 and 192, V dims of 40 and 17 (the
// interleaving's tails and P·V's blocks of 1), TND (P kept in f32: Q·Kᵀ alone on dot products; on
// AMX tiles, P·V too, in three pieces).
TEST_P(PrefillDotsPerIsa, RopeDimsHeadDimsAndTndMatchTheReference) {
  for (const std::int64_t kv : {9, 131}) {
    CallSpec rope = prefill(8, 1, 20, kv);
    rope.qk_dim = 128;
    rope.rope_dim = 64;
    rope.v_dim = 128;
    CallSpec tiny = prefill(4, 2, 24, kv);
    tiny.qk_dim = 2;
    CallSpec wide = prefill(4, 4, 17, kv);
    wide.qk_dim = 192;
    CallSpec v40 = prefill(8, 2, 20, kv);
    v40.v_dim = 40;
    CallSpec v17 = prefill(4, 1, 16, kv);
    v17.v_dim = 17;
    CallSpec tnd = prefill(8, 2, 40, kv);
    tnd.layout = "TND";
    tnd.sparse_mode = 3;
    tnd.mask = MaskKind::kCompressed;
    tnd.act_q = std::vector<std::int64_t>{std::min<std::int64_t>(kv, 40), std::min<std::int64_t>(kv, 33)};
    tnd.act_kv = tnd.act_q;
    CallSpec tnd16 = prefill(16, 1, 1, kv);  // decode in TND: items of 16 rows, P in f32 (three pieces)
    tnd16.layout = "TND";
    tnd16.act_q = std::vector<std::int64_t>{1, 1};
    for (const CallSpec& spec : {rope, tiny, wide, v40, v17, tnd, tnd16}) {
      const TestCall call = build_call(spec, static_cast<std::uint64_t>(kv + spec.qk_dim));
      expect_cpu_matches_reference(call.args, spec.lse, describe(spec), 2, isa());
    }
  }
}

// A sliding window (sparse mode 4) of 301 keys: the items of rows 320 and on start at key 19 (odd),
// so their token pairs start at odd keys, and in blocks of 16 a pair's rows lie in two blocks.
// Their middle tile (keys 147-274) is fully visible and takes the dot products.
TEST_P(PrefillDotsPerIsa, PairsOfKeysAcrossPagedBlocksMatchTheReference) {
  for (const bool paged : {false, true}) {
    CallSpec spec = prefill(2, 1, 340, 340);
    spec.act_kv.reset();
    spec.sparse_mode = 4;
    spec.mask = MaskKind::kCompressed;
    spec.pre_tokens = 301;
    spec.next_tokens = 0;
    if (paged) spec.storage = KvStorage::kPaged, spec.block_size = 16;
    const TestCall call = build_call(spec, paged ? 8 : 9);
    expect_cpu_matches_reference(call.args, spec.lse, describe(spec), 2, isa());
  }
}

// A key that some rows exclude: key 140 or 141 (the low or the high half of a token pair) of a
// prefill of 150 rows, excluded by the rows before it in a causal prefill (its tile, keys 128-143
// for the item of rows 128-143, crosses the diagonal), by the even rows through a full mask, or
// through a pse of -inf. A NaN, inf or huge value in its V row (element 7, and the last of a V
// row of 72, past the last whole vector of 16, or of 80, whose P·V takes AMX tiles where asked for)
// reaches exactly the rows that see the key; the
// others keep their bits (25.1 #24): the tile takes the dot products whatever its V values, the
// non-finite V row added in fp32 to the rows that weight it and left out of the dot products
// (products_in_fp32). Their LSE keeps its bits too: a row whose P·V went non-finite would be
// recomputed in float64 (docs/numerics.md, "Overflow"), which gives the output within tolerance
// but the LSE rounded once from float64.
TEST_P(PrefillDotsPerIsa, AKeySomeRowsExcludeNeverReachesThemThroughItsValues) {
  for (const std::int64_t key : {140, 141})
    for (const char* kind : {"causal", "full mask", "pse"}) {
      CallSpec spec = prefill(8, 2, 150, 150);
      spec.batch = 1;
      spec.act_kv.reset();
      spec.v_dim = key == 140 ? 72 : 80;  // 80: whole AMX tiles of 16 V dims (products_in_fp32 for them)
      const std::string k = kind;
      if (k == "causal") {
        spec.sparse_mode = 3;
        spec.mask = MaskKind::kCompressed;
      } else if (k == "full mask") {
        spec.mask = MaskKind::kFull;
        spec.mask_rank = 2;
        spec.mask_density = 0.0;
      } else {
        spec.pse = true;
      }
      auto excluded = [&](std::int64_t i) { return k == "causal" ? i < key : i % 2 == 0; };
      TestCall call = build_call(spec, 9);
      for (std::int64_t i = 0; i < spec.q_seq; ++i) {
        if (!excluded(i)) continue;
        if (k == "full mask")
          const_cast<std::uint8_t*>(static_cast<const std::uint8_t*>(call.args.atten_mask.data))[i * spec.kv_seq + key] = 1;
        if (k == "pse")
          for (std::int64_t n = 0; n < spec.num_heads; ++n)
            set_stored_value(call.args.pse_shift.data, DType::BF16, (n * spec.q_seq + i) * spec.kv_seq + key, -INFINITY);
      }
      Outputs clean;
      ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &clean).ok());
      detail::Problem p;
      ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
      const std::int64_t vd = spec.v_dim;
      auto set_value = [&](std::int64_t x, const std::vector<float>& per_head) {
        for (std::int64_t h = 0; h < p.num_kv_heads; ++h) set_stored_value(p.locate(0, h, key).value, p.kv_dtype, x, per_head[h]);
      };
      for (const std::int64_t x0 : {std::int64_t{7}, vd - 1}) {  // one poisoned element at a time
        std::vector<float> was;
        for (std::int64_t h = 0; h < p.num_kv_heads; ++h)
          was.push_back(bf16_to_f32(static_cast<const std::uint16_t*>(p.locate(0, h, key).value)[x0]));
        for (const float poison : {std::nanf(""), INFINITY, 6.0e4f}) {
          set_value(x0, std::vector<float>(was.size(), poison));
          Outputs out;
          ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &out).ok());
          const auto* a = reinterpret_cast<const std::uint16_t*>(clean.attention_out.bytes.data());
          const auto* b = reinterpret_cast<const std::uint16_t*>(out.attention_out.bytes.data());
          const auto* lse_a = reinterpret_cast<const std::uint32_t*>(clean.softmax_lse.bytes.data());
          const auto* lse_b = reinterpret_cast<const std::uint32_t*>(out.softmax_lse.bytes.data());
          ASSERT_EQ(out.softmax_lse.bytes.size(), static_cast<std::size_t>(spec.num_heads * spec.q_seq * 4));
          for (std::int64_t i = 0; i < spec.q_seq; ++i)
            for (std::int64_t n = 0; n < spec.num_heads; ++n) {
              const std::string at = k + " key " + std::to_string(key) + " row " + std::to_string(i) + " head " +
                                     std::to_string(n) + " element " + std::to_string(x0) + " poison " +
                                     std::to_string(poison);
              if (excluded(i)) {
                ASSERT_EQ(lse_a[n * spec.q_seq + i], lse_b[n * spec.q_seq + i]) << at;
              }
              const std::int64_t row = (i * spec.num_heads + n) * vd;  // BSND
              for (std::int64_t x = 0; x < vd; ++x) {
                if (excluded(i)) {
                  ASSERT_EQ(a[row + x], b[row + x]) << at << ": element " << x;
                } else if (x == x0 && poison != 6.0e4f) {
                  EXPECT_FALSE(std::isfinite(bf16_to_f32(b[row + x]))) << at;
                }
              }
            }
        }
        set_value(x0, was);
      }
    }
}

TEST_P(PrefillDotsPerIsa, PagedNzAndContiguousCachesGiveTheSameBits) {
  for (const std::int64_t block : {16, 128}) {
    CallSpec spec = prefill(8, 2, 40, 300);
    spec.layout = "BNSD";  // as_contiguous gathers into BNSD caches
    spec.storage = KvStorage::kPaged;
    spec.block_size = block;
    spec.paged_bnbsd = true;
    const TestCall paged = build_call(spec, 5);
    const TestCall flat = as_contiguous(paged.args);
    const TestCall nz = as_nz(paged.args);
    Outputs x, y, z;
    ASSERT_TRUE(run_call(paged.args, Backend::kCpu, 2, &x).ok());
    ASSERT_TRUE(run_call(flat.args, Backend::kCpu, 2, &y).ok());
    ASSERT_TRUE(run_call(nz.args, Backend::kCpu, 2, &z).ok());
    EXPECT_EQ(x.attention_out.bytes, y.attention_out.bytes) << "block " << block;
    EXPECT_EQ(x.softmax_lse.bytes, y.softmax_lse.bytes) << "block " << block;
    EXPECT_EQ(x.attention_out.bytes, z.attention_out.bytes) << "block " << block << ", NZ";
    EXPECT_EQ(x.softmax_lse.bytes, z.softmax_lse.bytes) << "block " << block << ", NZ";
  }
}

TEST_P(PrefillDotsPerIsa, ResultsDoNotDependOnTheThreadCount) {
  CallSpec spec = prefill(8, 2, 70, 400);
  spec.sparse_mode = 3;
  spec.mask = MaskKind::kCompressed;
  expect_thread_invariant(build_call(spec, 3).args, describe(spec));
}

// bf16 dot products read subnormal inputs as 0, so an item whose query holds a value whose
// products that would change keeps the fp32 products: a subnormal query element (2^-127) against
// keys of 2^127 to 1.875 x 2^127 in that dim, and a query element of 2^127 against subnormal key
// elements, each product between 1 and 1.875 and different for every token (read as 0, the scores
// would all be equal). Only the rows of the middle item of each KV head (query rows 16 to 31) hold
// it, so that items before and after take the dot products over the same keys on the same worker:
// in TND (P in f32) the worker holds the V it widened for the item before, without K. The value
// lies in dim 5 (the high half of a pair) of the key part or of the rope part after it, or in dim
// 40 (a low half, in the last 16 of a head dim of 48, which takes the dot products, not the tiles).
TEST_P(PrefillDotsPerIsa, QueriesWhoseProductsBf16DotsWouldDropMatchTheReference) {
  struct Where {
    bool in_rope;
    std::int64_t qk_dim, dim;
  };
  for (const bool subnormal_query : {true, false})
  for (const Where w : {Where{false, 64, 5}, Where{true, 64, 5}, Where{false, 48, 40}})
  for (const char* layout : {"BSND", "TND"}) {
    CallSpec spec = prefill(8, 2, 48, 150);
    spec.layout = layout;
    spec.qk_dim = w.qk_dim;
    if (w.in_rope) spec.rope_dim = 64;
    if (spec.layout == "TND") spec.act_q = spec.act_kv = std::vector<std::int64_t>{48, 48};
    TestCall call = build_call(spec, 17);
    detail::Problem p;
    ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
    const detail::RowIndex& query = w.in_rope ? p.query_rope : p.query;
    for (std::int64_t b = 0; b < spec.batch; ++b) {
      for (std::int64_t n = 0; n < spec.num_heads; ++n)
        for (std::int64_t i = 16; i < 32; ++i)
          set_stored_value(query.base, p.dtype, query.offset(b, n, i) + w.dim,
                           subnormal_query ? std::ldexp(1.0f, -127) : std::ldexp(1.0f, 127));
      for (std::int64_t h = 0; h < p.num_kv_heads; ++h)
        for (std::int64_t j = 0; j < p.kv_len(b); ++j) {
          const float m = 1.0f + static_cast<float>(j % 7) / 8.0f;
          const auto rows = p.locate(b, h, j);
          set_stored_value(w.in_rope ? rows.key_rope : rows.key, p.kv_dtype, w.dim,
                           subnormal_query ? std::ldexp(m, 127) : std::ldexp(m, -127));
        }
    }
    expect_cpu_matches_reference(call.args, spec.lse,
                                 std::string(layout) + (subnormal_query ? ", subnormal query" : ", query of 2^127") +
                                     (w.in_rope ? " in the rope part" : "") + ", dim " + std::to_string(w.dim),
                                 1, isa());
  }
}

// P·V by bf16 dot products reads a subnormal P as 0, so its products are added in fp32
// (plant_subnormal_weight: key 7's E about 2^-128 against a V row of 2^126), in a tile every row
// sees whole and in one across a causal band's edge.
TEST_P(PrefillDotsPerIsa, SubnormalWeightsOfHugeValuesCountAsTheReferenceCountsThem) {
  for (const bool causal : {false, true}) {
    CallSpec spec = prefill(4, 1, 16, 40);
    spec.batch = 1;
    spec.act_kv.reset();
    if (causal) {
      spec.sparse_mode = 3;
      spec.mask = MaskKind::kCompressed;
    }
    TestCall call = build_call(spec, 23);
    detail::Problem p;
    ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
    plant_subnormal_weight(p, 7);
    expect_cpu_matches_reference(call.args, spec.lse, causal ? "causal, subnormal P against V of 2^126"
                                                              : "subnormal P against V of 2^126", 2, isa());
  }
}

// Where the CPU has bf16 dot products, bf16 prefill takes them when asked for: the two ways give
// other bits for the LSE (Q·Kᵀ's sums in another order) and, with the same scores, for the output
// (P·V's), and the same when forbidden.
TEST(PrefillBf16Dots, TakenWhenAskedForAndNotWhenForbidden) {
  if (!bf16_dots_possible_here()) GTEST_SKIP() << "the kernels cannot take bf16 dot products here (" << detail::kernel_isa() << ")";
  const TestCall call = build_call(prefill(8, 2, 64, 300), 21);
  EXPECT_NE(run_with_bf16_dots(call.args, true).softmax_lse.bytes, run_with_bf16_dots(call.args, false).softmax_lse.bytes);
  EXPECT_EQ(run_with_bf16_dots(call.args, false).softmax_lse.bytes, run_with_bf16_dots(call.args, false).softmax_lse.bytes);
  // A query of one nonzero dim: every score is one exact product, the same bits both ways, so
  // the outputs differ by P·V's sums alone.
  detail::Problem p;
  ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t n = 0; n < p.num_heads; ++n)
      for (std::int64_t i = 0; i < p.act_q[b]; ++i)
        for (std::int64_t d = 1; d < p.qk_dim; ++d) set_stored_value(p.query.base, p.dtype, p.query.offset(b, n, i) + d, 0.0f);
  const Outputs dots = run_with_bf16_dots(call.args, true), fp32 = run_with_bf16_dots(call.args, false);
  EXPECT_EQ(dots.softmax_lse.bytes, fp32.softmax_lse.bytes);
  EXPECT_NE(dots.attention_out.bytes, fp32.attention_out.bytes);
}

// Where the CPU has AMX tiles, bf16 prefill takes them for Q·Kᵀ when asked for: other bits for
// the LSE than without them (the sums in another order), the same bits run after run; with key
// dims not in whole chunks of 32 (48) it does not take them, and the bits do not change.
TEST(PrefillAmx, TakenWhenAskedForWithKeyDimsInChunksOf32) {
  if (!detail::amx_bf16_supported() || !detail::kernel_isa_has_bf16_dots())
    GTEST_SKIP() << "no AMX tiles for the kernels here (" << detail::kernel_isa() << ")";
  const TestCall call = build_call(prefill(8, 2, 64, 300), 21);
  const Outputs tiles = run_with_bf16_dots(call.args, false, true);
  EXPECT_NE(tiles.softmax_lse.bytes, run_with_bf16_dots(call.args, false, false).softmax_lse.bytes);
  EXPECT_EQ(tiles.softmax_lse.bytes, run_with_bf16_dots(call.args, false, true).softmax_lse.bytes);
  EXPECT_EQ(tiles.attention_out.bytes, run_with_bf16_dots(call.args, false, true).attention_out.bytes);
  CallSpec odd = prefill(8, 2, 64, 300);
  odd.qk_dim = 48;
  const TestCall odd_call = build_call(odd, 22);
  EXPECT_EQ(run_with_bf16_dots(odd_call.args, false, true).softmax_lse.bytes,
            run_with_bf16_dots(odd_call.args, false, false).softmax_lse.bytes);
}

// With AMX tiles asked for, P·V of bf16 prefill takes them too where P is exact in bf16 (BSND: E
// rounded to bf16, one piece) and where it is kept in f32 (TND: three pieces): with a query of one
// nonzero dim every score is one exact product, the same bits both ways, so the LSE agrees and the
// outputs differ by P·V's sums alone.
TEST(PrefillAmx, TakesPvOnTilesForBf16PAndF32P) {
  if (!detail::amx_bf16_supported() || !detail::kernel_isa_has_bf16_dots())
    GTEST_SKIP() << "no AMX tiles for the kernels here (" << detail::kernel_isa() << ")";
  CallSpec bsnd = prefill(8, 2, 64, 300), tnd = prefill(8, 2, 40, 131);
  tnd.layout = "TND";
  tnd.sparse_mode = 3;
  tnd.mask = MaskKind::kCompressed;
  tnd.act_q = std::vector<std::int64_t>{40, 33};
  tnd.act_kv = std::vector<std::int64_t>{131, 100};
  for (const CallSpec& spec : {bsnd, tnd}) {
    const TestCall call = build_call(spec, 31);
    detail::Problem p;
    ASSERT_TRUE(detail::build_problem(call.args, false, &p).ok());
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t n = 0; n < p.num_heads; ++n)
        for (std::int64_t i = 0; i < p.act_q[b]; ++i)
          for (std::int64_t d = 1; d < p.qk_dim; ++d)
            set_stored_value(p.query.base, p.dtype, p.query.offset(b, n, i) + d, 0.0f);
    const Outputs tiles = run_with_bf16_dots(call.args, false, true), fp32 = run_with_bf16_dots(call.args, false, false);
    EXPECT_EQ(tiles.softmax_lse.bytes, fp32.softmax_lse.bytes) << spec.layout;
    EXPECT_NE(tiles.attention_out.bytes, fp32.attention_out.bytes) << spec.layout;
    expect_cpu_matches_reference(call.args, spec.lse, describe(spec), 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Compiled, PrefillDotsPerIsa, ::testing::ValuesIn(isa_params()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace fia::test
