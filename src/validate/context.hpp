// Shared state of layer 2 (validation): what the checks have derived so far.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "args/layout.hpp"
#include "fia/args.hpp"
#include "fia/status.hpp"
#include "problem/problem.hpp"
#include "validate/printable.hpp"

namespace fia::detail {

enum class Storage { kContiguous, kTensorList, kPaged };
/// The layout of a paged cache (FIA-SPEC 3.2, 9.1), picked by the key's rank 3, 4 or 5.
enum class CacheLayout { kBnBsH, kBnNBsD, kNz };

/// Everything the checks derive from FiaArgs, in the order they derive it.
struct Ctx {
  Ctx(const FiaArgs& args, bool strict_mode) : a(args), strict(strict_mode) {}

  const FiaArgs& a;
  bool strict;

  LayoutPair layout;
  DType dtype = DType::F16;     // query (and key/value when kv_format is kFloat; I8: full quant)
  DType kv_dtype = DType::F16;  // stored key/value element: dtype, I8, or I32 (packed int4, 12.6)
  KvFormat kv_format = KvFormat::kFloat;
  Storage storage = Storage::kContiguous;

  std::int64_t batch = 0;     // B
  std::int64_t q_seq = 0;     // Q_S (query S axis; T for token layouts until lengths are read)
  std::int64_t q_tokens = 0;  // T_q (token layouts)
  std::int64_t num_heads = 0, num_kv_heads = 0;
  std::int64_t qk_dim = 0, v_dim = 0, rope_dim = 0;
  std::int64_t kv_seq = 0;  // KV_S of contiguous KV (T_kv for token layouts)
  std::vector<std::int64_t> list_seq;  // tensor list: S_b
  std::int64_t block_num = 0, max_blocks = 0;  // paged
  CacheLayout cache = CacheLayout::kBnBsH;  // paged
  bool rope = false, decode_mla = false, legacy_decode = false;
  DType rope_dtype = DType::F16;  // query_rope/key_rope element type (BF16 beside an INT8 query, 13.3)
  bool mla_full_quant = false;    // INT8 query with rope: MLA full quantization (13.3)
  bool empty_kv = false;  // every key/value tensor is empty (FIA-SPEC 19)

  std::vector<std::int64_t> act_q, act_kv, q_start, kv_start;
  std::vector<std::int64_t> q_token_start, kv_token_start;  // token layouts: cumulative starts
  std::int64_t prefix_seq = 0, prefix_len = 0;  // prefix_S and P
  bool has_prefix = false;
  bool q_padding = false, kv_padding = false;  // padding tensors present
  bool has_mask = false, has_pse = false, has_sink = false;

  /// The antiquant parameters in use (FIA-SPEC 12.2), index 0 key, 1 value. Combined parameters
  /// (antiquant_scale/antiquant_offset) point both sides at one tensor whose leading axis (size 2)
  /// selects the side; split parameters win when both kinds are given.
  struct Antiquant {
    bool split = false;
    std::int64_t mode[2] = {0, 0};
    const TensorView* scale[2] = {nullptr, nullptr};
    const TensorView* offset[2] = {nullptr, nullptr};  // null without an offset
    const char* scale_name[2] = {"", ""};
    const char* offset_name[2] = {"", ""};
    const char* mode_name[2] = {"", ""};
  } aq;

  /// Logical elements per stored element of the last key/value axis: 8 for packed int4 (12.6).
  std::int64_t kv_pack() const { return kv_format == KvFormat::kInt4 ? 8 : 1; }
  bool antiquant() const { return kv_format != KvFormat::kFloat; }

  /// KV_S as FIA uses it for mask/pse widths: contiguous KV_S, max S_b, or max_blocks*block_size.
  std::int64_t kv_width() const;
};

/// Formats a shape as "[2, 4, 64]".
std::string shape_str(const std::vector<std::int64_t>& shape);

/// Builds a Status; the message follows "<what was expected>, got <what was given>".
Status invalid(const std::string& parameter, const std::string& message);
Status unsupported(const std::string& parameter, const std::string& message);
Status null_argument(const std::string& parameter, const std::string& message);

/// Concatenates streamable values into a string.
template <class... T>
std::string cat(const T&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

#define FIA_RETURN_IF_ERROR(expr)        \
  do {                                   \
    ::fia::Status fia_status_ = (expr);  \
    if (!fia_status_.ok()) return fia_status_; \
  } while (0)

// The check groups, in the order build_problem runs them. Each returns the first broken rule.
Status check_tensors(Ctx& c);     // presence, sizes, dtypes, quant parameters (20.1)
Status check_shapes(Ctx& c);      // layout, ranks, heads, head dims, storage, rope (20.2, 20.6-7)
Status check_lengths(Ctx& c);     // actual lengths, TND, padding, prefix (20.3, 20.8-9)
Status check_visibility(Ctx& c);  // sparse mode, mask, band, pse (20.4-5)
Status check_misc(Ctx& c);        // sink, LSE, inner_precise (20.12)
Status check_hardware(Ctx& c);    // Ascend hardware limits, strict mode only (25.2)
Status check_post_quant(const Ctx& c);  // quant_scale2 / quant_offset2 on a float query (14, 20.11 #27)

// KV antiquantization (FIA-SPEC 12, 20.10), in check_antiquant.cpp and antiquant_hardware.cpp.
Status check_antiquant_params(Ctx& c);          // presence, pairing, modes, dtypes (from check_tensors)
Status check_antiquant_shapes(Ctx& c);          // per-mode shapes against sizes and lengths
Status check_antiquant_hardware(const Ctx& c);  // Ascend-only restrictions (12.4), strict mode only
void fill_antiquant(const Ctx& c, Problem* p);   // Problem::key_antiquant / value_antiquant
void fill_post_quant(const Ctx& c, Problem* p);  // Problem::post_quant, out_dtype I8 (14)

// Int8 full quantization (FIA-SPEC 13.1-13.2, 20.11 #25), in check_full_quant.cpp.
Status check_full_quant_params(Ctx& c);            // INT8 query: K/V dtype, scales (from check_tensors)
Status check_full_quant_hardware(const Ctx& c);    // Ascend-only restrictions, strict mode only
Status check_nz_hardware(const Ctx& c);            // where the NPU reads an NZ cache (9.2, 12.4, 15.4), strict only
void fill_full_quant(const Ctx& c, Problem* p);    // Problem::full_quant, out_dtype F16

// MLA full quantization (FIA-SPEC 13.3, 20.11 #26), in check_mla_full_quant.cpp.
Status check_mla_full_quant_params(Ctx& c);           // from check_full_quant_params; sets mla_full_quant
Status check_mla_full_quant_shapes(const Ctx& c);     // dequant_scale_query against the query (after check_shapes)
Status check_mla_full_quant_hardware(const Ctx& c);   // Ascend-only restrictions, strict mode only

/// Fills the Problem from a context that passed every check.
void fill_problem(const Ctx& c, Problem* p);

}  // namespace fia::detail
