// FIA-SPEC 13.3, 13.2 (its MLA row), 15.2, 20.11 #26: MLA full quantization, an INT8 query and
// INT8 latent key with BF16 query_rope/key_rope, dequant_scale_query (query_quant_mode 3) and the
// per-tensor key/value_antiquant_scale; BF16 output. Semantic rules always, the Ascend kernel's
// limits in strict mode only (25.2).
#include <cmath>
#include <utility>

#include "validate/context.hpp"

namespace fia::detail {

namespace {

std::string dname(DType t) { return std::string(dtype_name(t)); }

constexpr const char* kWhat = "MLA full quantization (INT8 query with query_rope, FIA-SPEC 13.3)";

/// key_antiquant_scale / value_antiquant_scale: required, FLOAT32, shape [1], finite (13.3).
Status check_kv_scale(const char* name, const TensorView& t) {
  if (!t.present()) return invalid(name, cat(name, " is required by ", kWhat, ", got null"));
  if (t.dtype != DType::F32)
    return invalid(name, cat(name, " dtype must be FLOAT32 in ", kWhat, ", got ", dname(t.dtype)));
  if (t.rank() != 1 || t.shape[0] != 1)
    return invalid(name, cat(name, " must be per-tensor, shape [1], in ", kWhat, ", got shape ", shape_str(t.shape)));
  const float v = *static_cast<const float*>(t.data);
  if (!std::isfinite(v)) return invalid(name, cat(name, " must be finite, got ", v));
  return Status::Ok();
}

}  // namespace

/// FIA-SPEC 13.2-13.3, 20.11 #26: the parameters of MLA full quantization, called by
/// check_full_quant_params for an INT8 query with rope inputs or dequant_scale_query.
Status check_mla_full_quant_params(Ctx& c) {
  const FiaArgs& a = c.a;
  const DType k = a.key[0].dtype;
  if (k != DType::I8)
    return invalid("key", cat("an INT8 query needs an INT8 key (the latent cache) in ", kWhat, ", got ", dname(k)));
  if (!a.query_rope.present())
    return invalid("query_rope", cat("query_rope (BFLOAT16) is required by ", kWhat, ", got null"));
  if (!a.key_rope.present())
    return invalid("key_rope", cat("key_rope (BFLOAT16) is required by ", kWhat, ", got null"));
  if (a.query_quant_mode != 3)
    return invalid("query_quant_mode", cat("query_quant_mode must be 3 (per token and head) in ", kWhat, ", got ",
                                           a.query_quant_mode));
  const TensorView& dq = a.dequant_scale_query;
  if (!dq.present())
    return invalid("dequant_scale_query", cat("dequant_scale_query is required by ", kWhat, ", got null"));
  if (dq.dtype != DType::F32)
    return invalid("dequant_scale_query", cat("dequant_scale_query dtype must be FLOAT32, got ", dname(dq.dtype)));
  FIA_RETURN_IF_ERROR(check_kv_scale("key_antiquant_scale", a.key_antiquant_scale));
  FIA_RETURN_IF_ERROR(check_kv_scale("value_antiquant_scale", a.value_antiquant_scale));
  if (a.key_antiquant_mode != 0)
    return invalid("key_antiquant_mode", cat("key_antiquant_mode must be 0 (per tensor) in ", kWhat, ", got ",
                                             a.key_antiquant_mode));
  if (a.value_antiquant_mode != 0)
    return invalid("value_antiquant_mode", cat("value_antiquant_mode must be 0 (per tensor) in ", kWhat, ", got ",
                                               a.value_antiquant_mode));
  const std::pair<const char*, const TensorView*> forbidden[] = {
      {"antiquant_scale", &a.antiquant_scale},
      {"antiquant_offset", &a.antiquant_offset},
      {"key_antiquant_offset", &a.key_antiquant_offset},
      {"value_antiquant_offset", &a.value_antiquant_offset},
      {"key_rope_antiquant_scale", &a.key_rope_antiquant_scale},
      {"dequant_scale1", &a.dequant_scale1},
      {"quant_scale1", &a.quant_scale1},
      {"dequant_scale2", &a.dequant_scale2},
      {"quant_scale2", &a.quant_scale2},
      {"quant_offset2", &a.quant_offset2},
      {"learnable_sink", &a.learnable_sink},
  };
  for (const auto& [name, view] : forbidden)
    if (view->present())
      return invalid(name, cat(name, " is not used by ", kWhat, " (FIA-SPEC 13.2: BFLOAT16 output, scales from ",
                               "dequant_scale_query and key/value_antiquant_scale), got one"));
  c.mla_full_quant = true;
  return Status::Ok();
}

/// FIA-SPEC 13.3: dequant_scale_query has the query's shape without D: (B, Q_S, Q_N) for BSH and
/// BSND, (B, Q_N, Q_S) for BNSD, (T, Q_N) for TND, (Q_N, T) for NTD. Called after check_shapes.
Status check_mla_full_quant_shapes(const Ctx& c) {
  if (!c.mla_full_quant) return Status::Ok();
  const TensorView& q = c.a.query;
  std::vector<std::int64_t> want(q.shape.begin(), q.shape.end() - 1);
  if (c.layout.in == Layout::kBSH) want.push_back(c.num_heads);
  const TensorView& dq = c.a.dequant_scale_query;
  if (dq.shape != want)
    return invalid("dequant_scale_query", cat("dequant_scale_query must have the query shape without the head dim, ",
                                              shape_str(want), " for layout ", c.layout.name, ", got ",
                                              shape_str(dq.shape)));
  return Status::Ok();
}

/// FIA-SPEC 13.3: the Ascend kernel's limits of MLA full quantization, strict mode only (25.2);
/// Q_N, KV_N and the paged cache are checked with decode MLA (15.4) before.
Status check_mla_full_quant_hardware(const Ctx& c) {
  const FiaArgs& a = c.a;
  if (c.qk_dim != 512)
    return invalid("query", cat(kWhat, " needs the latent head dim 512, got ", c.qk_dim));
  const std::string& l = c.layout.name;
  if (l != "BSH" && l != "BSH_NBSD" && l != "BSND" && l != "BSND_NBSD" && l != "TND" && l != "TND_NTD")
    return invalid("input_layout",
                   cat(kWhat, " supports layouts BSH, BSH_NBSD, BSND, BSND_NBSD, TND, TND_NTD, got ", l));
  if (c.q_seq < 1 || c.q_seq > 16) return invalid("query", cat(kWhat, " needs Q_S in [1, 16], got ", c.q_seq));
  if (c.q_seq == 1 && a.sparse_mode != 0)
    return invalid("sparse_mode", cat(kWhat, " with Q_S = 1 needs sparse_mode 0, got ", a.sparse_mode));
  if (c.q_seq == 1 && c.has_mask)
    return invalid("atten_mask",
                   cat(kWhat, " with Q_S = 1 takes no atten_mask, got shape ", shape_str(a.atten_mask.shape)));
  if (c.q_seq > 1 && a.sparse_mode != 3 && a.sparse_mode != 9)
    return invalid("sparse_mode", cat(kWhat, " with Q_S > 1 needs sparse_mode 3 or 9, got ", a.sparse_mode));
  if (a.block_size != 128) return invalid("block_size", cat(kWhat, " needs block_size 128, got ", a.block_size));
  if (a.key[0].rank() != 5)
    return invalid("key", cat(kWhat, " needs the NZ paged cache (block_num, 1, 512/32, block_size, 32), got shape ",
                              shape_str(a.key[0].shape)));
  return Status::Ok();
}

}  // namespace fia::detail
