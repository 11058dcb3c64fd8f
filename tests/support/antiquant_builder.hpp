// KV antiquantization (FIA-SPEC 12) in test calls: how a CallSpec asks for int8 / int4 K and V,
// the kinds of antiquant parameters tests draw, element access to quantized tensors, and the
// pieces build_call makes quantized K/V and their scales and offsets from. call_builder.hpp
// includes this header.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fia/fia.hpp"

namespace fia::test {

struct CallSpec;
struct TestCall;

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

/// The pieces build_call (call_builder.cpp) assembles a quantized call from; not for tests.
namespace builder_internal {

/// Whether `s` stores K/V quantized (int8 or int4) rather than in the query dtype.
bool quantized(const CallSpec& s);

/// A K/V tensor of logical shape `shape` (int4: the last axis holds 8 logical elements per int32).
OwnedTensor kv_tensor(const CallSpec& s, std::vector<std::int64_t> shape);

/// One random stored integer of a quantized K/V element.
float random_int(const CallSpec& s, std::mt19937_64& rng);

/// A random K/V tensor of logical shape `shape`: floats in [-range, range] (as random_tensor), or
/// random stored integers for a quantized spec.
OwnedTensor random_kv(const CallSpec& s, std::vector<std::int64_t> shape, std::mt19937_64& rng);

/// Where a paged cache put each batch's blocks (for the paged per-token scales of modes 4 and 5).
struct PagedLayout {
  std::vector<std::int32_t> table;  ///< (B, max_blocks), -1 past the used blocks
  std::int64_t max_blocks = 0, block_num = 0;
};

/// The sizes antiquant parameters are shaped and filled by.
struct AntiquantShape {
  std::int64_t B, KVN, P;
  std::int64_t seq;         ///< S' of the per-token modes 1 and 3
  std::int64_t block_size;  ///< modes 4 and 5
  std::vector<std::int64_t> act_kv;
  std::vector<std::int64_t> col_off;  ///< per batch: the first per-token column read
  PagedLayout paged;
};

/// Sets the antiquant parameters of a quantized spec: split (key_/value_antiquant_*) or combined
/// (antiquant_scale / antiquant_offset with a leading axis 2, the key first).
void add_antiquant(const CallSpec& s, const AntiquantShape& z, std::int64_t QD, std::int64_t VD, std::mt19937_64& rng,
                   TestCall* call);

}  // namespace builder_internal

}  // namespace fia::test
