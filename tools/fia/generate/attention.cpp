#include "generate/attention.hpp"

#include <chrono>
#include <cmath>
#include <cstring>

#include "fia/half.hpp"

namespace fia::model {

PagedAttention::PagedAttention(const ModelConfig& config, const PagedKvCache& cache, Options options)
    : config_(config), cache_(cache), options_(options) {
  compressed_mask(DType::Bool, &causal_mask_);  // Bool is a valid dtype: cannot fail
}

Status PagedAttention::run(int layer, const BlockTable& table, std::int64_t q_len, const float* q, float* out,
                           bool prefill) {
  const auto start = std::chrono::steady_clock::now();
  const DType dtype = cache_.dtype();
  const std::int64_t dim = config_.dim, rows = table.batch * q_len;
  const std::size_t n = static_cast<std::size_t>(rows * dim);

  // FIA wants query, key and value of one dtype: the query takes the cache's.
  const void* q_data = q;
  if (dtype != DType::F32) {
    q_half_.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      q_half_[i] = dtype == DType::F16 ? f32_to_f16(q[i]) : f32_to_bf16(q[i]);
    q_data = q_half_.data();
  }

  FiaArgs args;
  args.query = {q_data, dtype, {table.batch, q_len, dim}};
  args.key = {cache_.key_pool(layer)};
  args.value = {cache_.value_pool(layer)};
  args.input_layout = "BSH";
  args.num_heads = config_.n_heads;
  args.num_key_value_heads = config_.n_kv_heads;
  args.scale = 1.0 / std::sqrt(static_cast<double>(config_.head_size()));  // FIA's default is 1.0
  args.block_table = {table.ids.data(), DType::I32, {table.batch, table.max_blocks}};
  args.block_size = cache_.block_size();
  args.actual_seq_lengths_kv = table.lengths;
  if (q_len > 1) {
    args.sparse_mode = 3;  // causal, anchored at the bottom right: row i sees L - q_len + i
    args.atten_mask = causal_mask_.view();
  }

  Plan plan;
  Status st = fia::plan(args, options_, &plan);
  if (!st.ok()) return st;
  out_.resize(n * dtype_size(dtype));
  workspace_.resize(plan.workspace_bytes());
  st = fia::run(plan, {out_.data(), plan.attention_out_dtype(), plan.attention_out_shape()}, {},
                workspace_.empty() ? nullptr : workspace_.data(), workspace_.size());
  if (!st.ok()) return st;

  if (dtype == DType::F32) {
    std::memcpy(out, out_.data(), n * sizeof(float));
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, out_.data() + 2 * i, 2);
      out[i] = dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  (prefill ? stats_.prefill_calls : stats_.decode_calls) += 1;
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

}  // namespace fia::model
