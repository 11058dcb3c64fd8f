// A paged KV cache as FIA reads it (FIA-SPEC 9): for every layer one key pool and one value pool
// of shape (block_num, block_size, kv_dim) in the cache dtype, and per sequence a list of block
// ids that grows as the sequence does. All layers share the block lists, as in vLLM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fia/status.hpp"
#include "fia/tensor.hpp"

namespace fia::model {

/// The per-sequence arrays one FIA call over the cache needs.
struct BlockTable {
  std::int64_t batch = 0;
  std::int64_t max_blocks = 0;        ///< columns: the most blocks any sequence of the batch uses
  std::vector<std::int32_t> ids;      ///< [batch, max_blocks], unused slots -1
  std::vector<std::int64_t> lengths;  ///< actual_seq_lengths_kv: tokens per sequence
};

/// Block pools and block lists. Blocks are handed out from a free list shuffled with `seed`, so a
/// sequence's blocks are neither consecutive nor in order; released blocks are reused.
class PagedKvCache {
 public:
  /// Pools of `num_blocks` blocks of `block_size` tokens for `n_layers` layers of width `kv_dim`.
  /// `dtype` is F32, F16 or BF16.
  PagedKvCache(int n_layers, int kv_dim, int block_size, int num_blocks, DType dtype, std::uint64_t seed);

  /// Registers a new, empty sequence and returns its id.
  int add_sequence();
  /// Makes sure sequence `seq` has blocks for `length` tokens, taking them from the pool.
  /// Error (kInvalidArgument, "block_table") when the pool has run out.
  Status reserve(int seq, std::int64_t length);
  /// Returns the blocks of `seq` to the pool; the sequence becomes empty.
  void release(int seq);

  /// Stores the key and value (kv_dim floats each) of token `pos` of `seq` in `layer`, converted
  /// to the cache dtype. The block for `pos` must have been reserved.
  void write(int layer, int seq, std::int64_t pos, const float* key, const float* value);
  /// Reads back element `i` of the key (or value) of token `pos` of `seq` in `layer`, as float.
  float read(int layer, int seq, std::int64_t pos, int i, bool value) const;

  /// The block table of a batch of sequences with `lengths` tokens each (blocks must be reserved).
  BlockTable block_table(std::span<const int> seqs, std::span<const std::int64_t> lengths) const;

  /// The key pool (or value pool) of `layer`: (block_num, block_size, kv_dim) in the cache dtype.
  TensorView key_pool(int layer) const;
  TensorView value_pool(int layer) const;

  const std::vector<std::int32_t>& blocks(int seq) const { return blocks_[seq]; }
  int free_blocks() const { return static_cast<int>(free_.size()); }
  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  DType dtype() const { return dtype_; }

 private:
  std::size_t offset(int seq, std::int64_t pos) const;  ///< element offset of a token in a pool

  int kv_dim_, block_size_, num_blocks_;
  DType dtype_;
  std::size_t elem_bytes_;
  std::vector<std::vector<std::byte>> keys_, values_;  ///< per layer
  std::vector<std::vector<std::int32_t>> blocks_;      ///< per sequence
  std::vector<std::int32_t> free_;                     ///< taken from the back
};

}  // namespace fia::model
