// Builds FIA calls with owned random tensors for tests: every layout, storage mode and feature.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fia/fia.hpp"

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

enum class MaskKind { kNone, kFull, kCompressed };
enum class KvStorage { kContiguous, kPaged, kTensorList };
enum class KvQuant { kNone, kInt8, kInt4 };

/// KV antiquantization (FIA-SPEC 12): K/V stored as int8 ([-127, 127]) or packed int4 ([-8, 7],
/// eight per int32, lowest nibble first, 12.6), with positive random scales (~1/64 for int8, ~1/8
/// for int4, so that the dequantized values are O(1)) and optional offsets in [-3, 3].
struct AntiquantSpec {
  KvQuant format = KvQuant::kNone;  ///< kNone: K/V in the query dtype
  /// FIA-SPEC 12.3 modes 0..5; key 0 with value 1 is the mixed pair. Combined parameters use
  /// key_mode as antiquant_mode (value_mode must equal it).
  std::int64_t key_mode = 0, value_mode = 0;
  /// Mode 0 scale shape: "1N1D", "11ND", "1ND", "1H", "N1D", "ND", "H", or "1" (per-tensor).
  /// Combined parameters prepend the axis 2 to "N1D", "1ND", "ND", "H" or "1".
  std::string channel_shape = "ND";
  bool token_lead_one = false;  ///< mode 1 (split): (1, B, S') instead of (B, S')
  bool offsets = false;         ///< key and value offsets
  bool combined = false;        ///< antiquant_scale / antiquant_offset + antiquant_mode instead of split
  std::int64_t extra_columns = 3;  ///< per-token modes 1 / 3: S' beyond the widest KV axis (+ prefix)
  bool unit_scales = false;     ///< every scale exactly 1 (offsets unaffected)
};

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

/// Sets element i of a F16/BF16/F32 tensor.
void set_value(OwnedTensor& t, std::int64_t i, float v);

/// Sets logical element i of a F16/BF16/F32 tensor, an I8 tensor (v an integer in [-128, 127]) or
/// an I32 tensor of packed int4 (v in [-8, 7]: nibble i % 8 of word i / 8, FIA-SPEC 12.6).
void set_kv_value(OwnedTensor& t, std::int64_t i, float v);

/// Logical element i of a tensor as set_kv_value writes it (int4: the signed nibble).
double kv_value(const TensorView& t, std::int64_t i);

/// The kinds of antiquant parameters (FIA-SPEC 12.3) a test can ask set_antiquant for.
enum class AntiquantKind {
  kChannel,          ///< mode 0, a per-channel shape
  kTensor,           ///< mode 0, per-tensor (1)
  kToken,            ///< mode 1
  kHead,             ///< mode 2
  kTokenHead,        ///< mode 3
  kPagedToken,       ///< mode 4 (paged KV only)
  kPagedTokenHead,   ///< mode 5 (paged KV only)
  kChannelThenToken  ///< key mode 0 (per-channel or per-tensor), value mode 1
};
inline constexpr AntiquantKind kAntiquantKinds[] = {
    AntiquantKind::kChannel,   AntiquantKind::kTensor,     AntiquantKind::kToken,          AntiquantKind::kHead,
    AntiquantKind::kTokenHead, AntiquantKind::kPagedToken, AntiquantKind::kPagedTokenHead, AntiquantKind::kChannelThenToken};
const char* antiquant_kind_name(AntiquantKind kind);

/// Sets spec.quant to `kind` with K/V in `format`; `variant` seeds the rest (the per-channel
/// shape, offsets, combined or split parameters, (1, B, S') or (B, S'), S' slack). Combined
/// parameters only where FIA defines them: modes 0 and 1, per-channel with QK_D = V_D.
void set_antiquant(CallSpec& spec, KvQuant format, AntiquantKind kind, std::uint64_t variant);

/// The kinds `spec`'s storage admits (modes 4 and 5 need a paged cache without a shared prefix).
std::vector<AntiquantKind> antiquant_kinds(const CallSpec& spec);

/// Short description of a spec for failure messages.
std::string describe(const CallSpec& spec);

}  // namespace fia::test
