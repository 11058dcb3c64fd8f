// FIA-SPEC 13.1, 13.2 (its INT8 rows), 20.11 #25: int8 query, key and value ("full quantization")
// with dequant_scale1, quant_scale1 and dequant_scale2.
#include <cstring>
#include <utility>

#include "numeric/full_quant.hpp"
#include "numeric/half.hpp"
#include "validate/context.hpp"

namespace fia::detail {

namespace {

std::string dname(DType t) { return std::string(dtype_name(t)); }

/// The scales of the full-quant pipeline, in the order 13.1 uses them.
std::pair<const char*, const TensorView*> scales(const FiaArgs& a, int i) {
  switch (i) {
    case 0: return {"dequant_scale1", &a.dequant_scale1};
    case 1: return {"quant_scale1", &a.quant_scale1};
    default: return {"dequant_scale2", &a.dequant_scale2};
  }
}

/// The fp32 value of a per-tensor scale: F32, or the low 32 bits of a UINT64 (13.1).
float scale_value(const TensorView& t) {
  float f;
  if (t.dtype == DType::U64) {
    const auto bits = static_cast<std::uint32_t>(*static_cast<const std::uint64_t*>(t.data));
    std::memcpy(&f, &bits, 4);
  } else {
    std::memcpy(&f, t.data, 4);
  }
  return f;
}

}  // namespace

/// FIA-SPEC 13.1-13.2, 20.1 #5, 20.11 #25: called by check_tensors for an INT8 query (key and
/// value dtypes already equal). Rope inputs or dequant_scale_query select MLA full quantization
/// (13.3, check_mla_full_quant.cpp).
Status check_full_quant_params(Ctx& c) {
  const FiaArgs& a = c.a;
  if (a.query_rope.present() || a.key_rope.present() || a.dequant_scale_query.present())
    return check_mla_full_quant_params(c);
  const DType k = a.key[0].dtype;
  if (k != DType::I8)
    return invalid("key", cat("an INT8 query needs INT8 key and value (full quantization, FIA-SPEC 13.2), got ",
                              dname(k)));
  const std::pair<const char*, const TensorView*> antiquant[] = {
      {"antiquant_scale", &a.antiquant_scale},           {"antiquant_offset", &a.antiquant_offset},
      {"key_antiquant_scale", &a.key_antiquant_scale},   {"key_antiquant_offset", &a.key_antiquant_offset},
      {"value_antiquant_scale", &a.value_antiquant_scale}, {"value_antiquant_offset", &a.value_antiquant_offset},
      {"key_rope_antiquant_scale", &a.key_rope_antiquant_scale},
  };
  for (const auto& [name, view] : antiquant)
    if (view->present())
      return invalid(name, "KV antiquantization parameters are not used with an INT8 query (full quantization "
                           "dequantizes with dequant_scale1/dequant_scale2), got " + std::string(name));
  if (a.learnable_sink.present())
    return invalid("learnable_sink", "learnable_sink is not supported with an INT8 query (full quantization), got one");
  for (int i = 0; i < 3; ++i) {
    const auto [name, t] = scales(a, i);
    if (!t->present())
      return invalid(name, cat(name, " is required with an INT8 query (full quantization: dequant_scale1, ",
                               "quant_scale1 and dequant_scale2, FIA-SPEC 13.1), got null"));
    const bool dequant = i != 1;
    if (t->dtype != DType::F32 && !(dequant && t->dtype == DType::U64))
      return invalid(name, cat(name, " dtype must be FLOAT32", dequant ? " or UINT64" : "", ", got ", dname(t->dtype)));
    if (t->numel() != 1)
      return invalid(name, cat(name, " must hold one value (per-tensor, shape [1]), got shape ", shape_str(t->shape)));
    if (t->dtype == DType::U64 && (*static_cast<const std::uint64_t*>(t->data) >> 32) != 0)
      return invalid(name, cat(name, " as UINT64 must carry the float32 bits in its low 32 bits (high 32 bits 0), got ",
                               *static_cast<const std::uint64_t*>(t->data)));
    if (!std::isfinite(scale_value(*t)))
      return invalid(name, cat(name, " must be finite, got ", scale_value(*t)));
  }
  return Status::Ok();
}

/// Ascend limits of full quantization (25.2), strict mode only: no decode (Q_S = 1, 13.1), no
/// paged KV (9.3), no shared prefix (11), head dims a multiple of 32 (20.2 #11).
Status check_full_quant_hardware(const Ctx& c) {
  if (!c.strict || c.dtype != DType::I8) return Status::Ok();
  if (c.mla_full_quant) return check_mla_full_quant_hardware(c);
  if (c.storage == Storage::kPaged)
    return invalid("block_table", "paged attention does not support an INT8 query (full quantization), got a block_table");
  if (c.has_prefix)
    return invalid("key_shared_prefix", "a shared prefix does not combine with an INT8 query (full quantization)");
  if (c.q_seq == 1)
    return invalid("query", "an INT8 query (full quantization) needs Q_S > 1; decode (Q_S = 1) is not supported");
  if (c.qk_dim % 32 != 0 || c.v_dim % 32 != 0)
    return invalid(c.qk_dim % 32 != 0 ? "query" : "value",
                   cat("head dims must be multiples of 32 with INT8 inputs, got ", c.qk_dim, " and ", c.v_dim));
  return Status::Ok();
}

void fill_full_quant(const Ctx& c, Problem* p) {
  p->full_quant = Problem::FullQuant{};
  p->mla_full_quant = Problem::MlaFullQuant{};
  if (c.dtype != DType::I8) return;
  const FiaArgs& a = c.a;
  if (c.mla_full_quant) {  // 13.3: scales per query row and per tensor, BF16 output
    auto& m = p->mla_full_quant;
    m.on = true;
    m.key_scale = *static_cast<const float*>(a.key_antiquant_scale.data);
    m.value_scale = *static_cast<const float*>(a.value_antiquant_scale.data);
    p->out_dtype = DType::BF16;
    return;
  }
  auto& fq = p->full_quant;
  fq.on = true;
  fq.dequant1 = truncate_to_19_bits(scale_value(a.dequant_scale1));
  fq.quant1 = clamp_to_f16(scale_value(a.quant_scale1));
  fq.dequant2 = truncate_to_19_bits(scale_value(a.dequant_scale2));
  fq.scale16 = clamp_to_f16(static_cast<float>(a.scale));
  p->out_dtype = DType::F16;  // 13.2: INT8 -> FP16, or INT8 with quant_scale2 (fill_post_quant)
}

}  // namespace fia::detail
