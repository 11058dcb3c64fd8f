#include "support/paged_cache.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace fia::test {

namespace {

/// One paged cache gathered into (B, N, S, D) over the tokens the lengths cover.
OwnedTensor gather(const FiaArgs& a, const TensorView& pool, std::int64_t kv_heads) {
  const std::int64_t B = a.block_table.shape[0], blocks = a.block_table.shape[1], bs = a.block_size;
  const bool bnbsd = pool.shape.size() == 4;  // (block_num, N, block_size, D), else (block_num, block_size, H)
  const std::int64_t D = bnbsd ? pool.shape[3] : pool.shape[2] / kv_heads, S = blocks * bs;
  const std::size_t es = dtype_size(pool.dtype);
  const auto* table = static_cast<const std::int32_t*>(a.block_table.data);
  const auto* src = static_cast<const std::byte*>(pool.data);
  OwnedTensor t(pool.dtype, {B, kv_heads, S, D});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < kv_heads; ++h)
      for (std::int64_t tok = 0; tok < (*a.actual_seq_lengths_kv)[static_cast<std::size_t>(b)]; ++tok) {
        const std::int64_t blk = table[b * blocks + tok / bs], off = tok % bs;
        const std::int64_t from = bnbsd ? ((blk * kv_heads + h) * bs + off) * D : (blk * bs + off) * kv_heads * D + h * D;
        std::memcpy(t.bytes.data() + static_cast<std::size_t>(((b * kv_heads + h) * S + tok) * D) * es,
                    src + static_cast<std::size_t>(from) * es, static_cast<std::size_t>(D) * es);
      }
  return t;
}

}  // namespace

TestCall as_contiguous(const FiaArgs& paged) {
  EXPECT_EQ(paged.input_layout, "BNSD") << "as_contiguous gathers into BNSD caches";
  const std::int64_t kv_heads = paged.num_key_value_heads ? paged.num_key_value_heads : paged.num_heads;
  TestCall flat;
  flat.args = paged;
  flat.args.block_table = {};
  flat.args.block_size = 0;
  flat.args.key = {flat.keep(gather(paged, paged.key[0], kv_heads))};
  flat.args.value = {flat.keep(gather(paged, paged.value[0], kv_heads))};
  if (paged.key_rope.present()) flat.args.key_rope = flat.keep(gather(paged, paged.key_rope, kv_heads));
  return flat;
}

}  // namespace fia::test
