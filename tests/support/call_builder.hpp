// Builds FIA calls with owned random tensors for tests: every layout, storage mode and feature.
// KV antiquantization (int8 / int4 K and V, scales and offsets): support/antiquant_builder.hpp.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fia/fia.hpp"
#include "support/antiquant_builder.hpp"

namespace fia::test {

/// A call and the tensors its views point into (stable addresses).
struct TestCall {
  FiaArgs args;
  std::deque<OwnedTensor> storage;

  TestCall() = default;
  TestCall(const TestCall&) = delete;
  TestCall& operator=(const TestCall&) = delete;
  TestCall(TestCall&&) = default;

  /// Keeps `t` alive and returns a view of it.
  TensorView keep(OwnedTensor t);
};

/// The float value build_call stores where FIA must never read (beyond lengths, padding, unused
/// blocks): it dominates any softmax it enters.
inline constexpr float kGarbage = 900.0f;

enum class MaskKind { kNone, kFull, kCompressed };
enum class KvStorage { kContiguous, kPaged, kTensorList };

/// What to build. Lengths are per batch (not cumulative); token layouts get cumulative arrays.
struct CallSpec {
  std::string layout = "BNSD";
  DType dtype = DType::F16;
  std::int64_t batch = 1, num_heads = 1, num_kv_heads = 0;  // num_kv_heads 0 = num_heads
  std::int64_t q_seq = 1, kv_seq = 1;   // S axes (token layouts: max lengths)
  std::int64_t qk_dim = 16, v_dim = 0;  // v_dim 0 = qk_dim
  std::int64_t rope_dim = 0;
  std::optional<std::vector<std::int64_t>> act_q, act_kv;  // given to FIA when set
  std::int64_t sparse_mode = 0;
  std::int64_t pre_tokens = kIntMax, next_tokens = kIntMax;
  MaskKind mask = MaskKind::kNone;
  int mask_rank = 4;                 // full masks: 2, 3 or 4
  bool mask_batch_broadcast = false; // full masks: batch axis 1
  double mask_density = 0.2;         // full masks: probability of a masked element
  DType mask_dtype = DType::Bool;
  bool pse = false;
  bool pse_batch_broadcast = false;
  bool sink = false;
  bool lse = false;
  std::int64_t inner_precise = 0;
  double scale = 0.0;  // 0 = 1/sqrt(qk_dim + rope_dim)
  // storage (FIA-SPEC 9-11, 7.4)
  KvStorage storage = KvStorage::kContiguous;
  std::int64_t block_size = 16;
  bool paged_bnbsd = false;  // paged cache (block_num, KV_N, block_size, D) instead of (.., H)
  std::int64_t prefix_seq = 0;  // shared prefix tokens stored (0 = none)
  std::optional<std::int64_t> prefix_len;  // actual_shared_prefix_len
  std::optional<std::int64_t> query_padding, kv_padding;
  float value_range = 1.0f;  // q/k/v uniform in [-range, range]
  AntiquantSpec quant;       // int8 / int4 K and V (FIA-SPEC 12); rope_dim must be 0
};

/// Builds the call of `spec` with random values from `seed`. Data FIA must not read (beyond the
/// lengths, padding, unused blocks) is filled with large garbage so that reading it shows.
TestCall build_call(const CallSpec& spec, std::uint64_t seed);

/// A uniformly random tensor in [-range, range], rounded to dtype.
OwnedTensor random_tensor(DType dtype, std::vector<std::int64_t> shape, std::mt19937_64& rng, float range = 1.0f);

/// Sets element i of a F16/BF16/F32 tensor (I8: v as an integer).
void set_value(OwnedTensor& t, std::int64_t i, float v);

/// Writes v, rounded to the F16, BF16 or F32 dtype t, at element `offset` of the tensor data at
/// `base` (a view's data: tests write into the tensors a call's views point to).
void set_stored_value(const void* base, DType t, std::int64_t offset, float v);

/// Short description of a spec for failure messages.
std::string describe(const CallSpec& spec);

}  // namespace fia::test
