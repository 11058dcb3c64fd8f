// AMX-INT8 tiles in the int8 full-quant prefill (cpu/full_quant_tiles-inl.h, FIA-SPEC 13.1): the
// tiles multiply signed bytes exactly into int32 sums, as the byte quads (VNNI) do, so a call
// gives the same bytes with the tiles as without. Checked around every tile edge: keys around 16
// (a K tile), 64 (a V tile) and 1024 (a chunk), packed rows around 16 and up to 32, head dims of
// one to three 64-byte tile rows, V dims of one or more 16-dim tiles, masks, pse, paged caches,
// tensor lists and a shared prefix, int8 and fp16 outputs, and the extreme byte -128 (NZ caches:
// NzCache.Int8FullQuantGivesTheNdBits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cpu/amx.hpp"
#include "cpu/full_quant.hpp"
#include "cpu/isa.hpp"
#include "validate/build_problem.hpp"
#include "support/call_builder.hpp"
#include "support/full_quant_builder.hpp"

namespace fia::test {
namespace {

TEST(FullQuantTiles, SameBytesAsTheByteQuads) {
  ASSERT_TRUE(detail::apply_isa_cap_from_env());  // as plan() does first: FIA_ISA may cap the kernels
  if (!detail::kernel_isa_takes_int8_tiles() || !detail::amx_int8_supported())
    GTEST_SKIP() << "no AMX-INT8 tiles: not on this CPU, or not in the kernels of this instruction set";
  int variant = 0;
  for (std::int64_t d : {64, 128, 192})
    for (std::int64_t kv : {1, 15, 16, 17, 63, 64, 65, 1023, 1024, 1025, 2049}) {
      FullQuantSpec fs;
      CallSpec& s = fs.spec;
      const char* layouts[] = {"BSND", "BNSD", "BSH"};
      s.layout = layouts[variant % 3];
      s.batch = 2;
      s.num_heads = 8;
      s.num_kv_heads = variant % 2 ? 1 : 4;  // 8 or 2 query heads per KV head: packed rows up to 32
      s.q_seq = 1 + variant % 7;
      s.kv_seq = kv;
      s.qk_dim = d;
      s.v_dim = variant % 4 == 2 ? 48 : d;
      s.act_kv = std::vector<std::int64_t>{kv, std::max<std::int64_t>(1, kv - variant % 5)};
      s.lse = true;
      if (variant % 3 == 1 && s.q_seq <= kv) s.sparse_mode = 3, s.mask = MaskKind::kCompressed;
      if (variant % 5 == 2) s.mask = MaskKind::kFull, s.mask_density = 0.3;
      s.pse = variant % 4 == 1;
      if (variant % 6 == 5) s.storage = KvStorage::kPaged, s.block_size = 16, s.paged_bnbsd = variant % 4 == 1;
      if (variant % 6 == 3 && std::string(s.layout) != "BNSD") s.storage = KvStorage::kTensorList;
      if (variant % 8 == 6 && kv > 8) s.prefix_seq = 8, s.prefix_len = 5;
      fs.int8_out = variant % 2 == 0 && s.v_dim == d;  // post-quant needs equal head dims
      FullQuantCall call = build_full_quant_call(fs, 500 + variant);
      put_int8_extremes(call.call.args.query);
      put_int8_extremes(call.call.args.key[0]);
      put_int8_extremes(call.call.args.value[0]);
      detail::set_amx(true);
      detail::Problem planned;  // as plan() makes it: the tiles must take this call
      ASSERT_TRUE(detail::build_problem(call.call.args, false, &planned).ok());
      detail::read_kernel_settings(&planned);
      ASSERT_TRUE(detail::full_quant_tiles(planned)) << variant;
      const Outputs tiles = run_full_quant(call.call.args, Backend::kCpu, 2);
      detail::set_amx(false);
      const Outputs quads = run_full_quant(call.call.args, Backend::kCpu, 2);
      const std::string what = std::string(s.layout) + " D " + std::to_string(d) + " kv " + std::to_string(kv) +
                               " variant " + std::to_string(variant);
      EXPECT_EQ(tiles.attention_out.bytes, quads.attention_out.bytes) << what;
      EXPECT_EQ(tiles.softmax_lse.bytes, quads.softmax_lse.bytes) << what;
      ++variant;
    }
  detail::reset_amx();
  EXPECT_EQ(variant, 33);
}

}  // namespace
}  // namespace fia::test
