#include "generate/paged_kv_cache.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include "fia/half.hpp"

namespace fia::model {

PagedKvCache::PagedKvCache(int n_layers, int kv_dim, int block_size, int num_blocks, DType dtype, std::uint64_t seed)
    : kv_dim_(kv_dim), block_size_(block_size), num_blocks_(num_blocks), dtype_(dtype), elem_bytes_(dtype_size(dtype)) {
  const std::size_t pool = static_cast<std::size_t>(num_blocks) * block_size * kv_dim * elem_bytes_;
  keys_.assign(n_layers, std::vector<std::byte>(pool));
  values_.assign(n_layers, std::vector<std::byte>(pool));
  free_.resize(num_blocks);
  for (int i = 0; i < num_blocks; ++i) free_[i] = i;
  std::mt19937_64 rng(seed);
  for (int i = num_blocks - 1; i > 0; --i) std::swap(free_[i], free_[rng() % static_cast<std::uint64_t>(i + 1)]);
}

int PagedKvCache::add_sequence() {
  blocks_.emplace_back();
  return static_cast<int>(blocks_.size()) - 1;
}

Status PagedKvCache::reserve(int seq, std::int64_t length) {
  auto& list = blocks_[seq];
  const std::int64_t needed = (length + block_size_ - 1) / block_size_;
  while (static_cast<std::int64_t>(list.size()) < needed) {
    if (free_.empty())
      return {StatusCode::kInvalidArgument, "block_table",
              "the KV cache pool of " + std::to_string(num_blocks_) + " blocks is exhausted"};
    list.push_back(free_.back());
    free_.pop_back();
  }
  return Status::Ok();
}

void PagedKvCache::release(int seq) {
  auto& list = blocks_[seq];
  free_.insert(free_.end(), list.rbegin(), list.rend());
  list.clear();
}

std::size_t PagedKvCache::offset(int seq, std::int64_t pos) const {
  const std::int64_t block = blocks_[seq][pos / block_size_];
  return (static_cast<std::size_t>(block) * block_size_ + static_cast<std::size_t>(pos % block_size_)) * kv_dim_;
}

void PagedKvCache::write(int layer, int seq, std::int64_t pos, const float* key, const float* value) {
  const std::size_t at = offset(seq, pos);
  for (int which = 0; which < 2; ++which) {
    const float* src = which == 0 ? key : value;
    std::byte* dst = (which == 0 ? keys_ : values_)[layer].data() + at * elem_bytes_;
    switch (dtype_) {
      case DType::F16:
        for (int i = 0; i < kv_dim_; ++i) {
          const std::uint16_t h = f32_to_f16(src[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
        break;
      case DType::BF16:
        for (int i = 0; i < kv_dim_; ++i) {
          const std::uint16_t h = f32_to_bf16(src[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
        break;
      default:
        std::memcpy(dst, src, kv_dim_ * sizeof(float));
        break;
    }
  }
}

float PagedKvCache::read(int layer, int seq, std::int64_t pos, int i, bool value) const {
  const std::byte* p = (value ? values_ : keys_)[layer].data() + (offset(seq, pos) + i) * elem_bytes_;
  if (dtype_ == DType::F32) {
    float f;
    std::memcpy(&f, p, sizeof f);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return dtype_ == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

BlockTable PagedKvCache::block_table(std::span<const int> seqs, std::span<const std::int64_t> lengths) const {
  BlockTable t;
  t.batch = static_cast<std::int64_t>(seqs.size());
  t.lengths.assign(lengths.begin(), lengths.end());
  for (std::int64_t len : lengths) t.max_blocks = std::max(t.max_blocks, (len + block_size_ - 1) / block_size_);
  t.max_blocks = std::max<std::int64_t>(t.max_blocks, 1);  // FIA wants no zero dims
  t.ids.assign(static_cast<std::size_t>(t.batch * t.max_blocks), -1);
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    const std::int64_t used = (lengths[b] + block_size_ - 1) / block_size_;
    for (std::int64_t k = 0; k < used; ++k) t.ids[b * t.max_blocks + k] = blocks_[seqs[b]][k];
  }
  return t;
}

TensorView PagedKvCache::key_pool(int layer) const {
  return {keys_[layer].data(), dtype_, {num_blocks_, block_size_, kv_dim_}};
}

TensorView PagedKvCache::value_pool(int layer) const {
  return {values_[layer].data(), dtype_, {num_blocks_, block_size_, kv_dim_}};
}

}  // namespace fia::model
