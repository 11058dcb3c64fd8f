// FIA-SPEC 20.1: presence, sizes, dtypes and the quantization parameters.
#include <cmath>
#include <limits>
#include <utility>

#include "args/tensor_slots.hpp"
#include "validate/check_view.hpp"
#include "validate/context.hpp"

namespace fia::detail {

namespace {

bool is_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32; }

std::string dname(DType t) { return std::string(dtype_name(t)); }

}  // namespace

Status check_tensors(Ctx& c) {
  const FiaArgs& a = c.a;
  // 20.1 #1: required tensors.
  if (!a.query.present()) return null_argument("query", "query is required, got null");
  if (a.key.empty() || !a.key[0].present()) return null_argument("key", "key is required, got null");
  if (a.value.empty() || !a.value[0].present()) return null_argument("value", "value is required, got null");
  if (a.key.size() != a.value.size())
    return invalid("value", cat("value must hold as many tensors as key (", a.key.size(), "), got ", a.value.size()));

  FIA_RETURN_IF_ERROR(check_view("query", a.query));
  for (std::size_t i = 0; i < a.key.size(); ++i) {
    if (!a.key[i].present()) return null_argument("key", cat("key tensor ", i, " is null"));
    if (!a.value[i].present()) return null_argument("value", cat("value tensor ", i, " is null"));
    FIA_RETURN_IF_ERROR(check_view("key", a.key[i]));
    FIA_RETURN_IF_ERROR(check_view("value", a.value[i]));
  }
  for (const auto& [name, view] : tensor_slots(a)) {
    if (!view->present() || name == "query") continue;
    const bool rows = name == "query_rope" || name == "key_rope" || name == "key_shared_prefix" || name == "value_shared_prefix";
    FIA_RETURN_IF_ERROR(check_view(std::string(name), *view, rows));
  }

  // The attribute scale is applied as a float32 (25.1 #13).
  if (!std::isfinite(a.scale) || std::fabs(a.scale) > std::numeric_limits<float>::max())
    return invalid("scale", cat("must be a finite float32 value, got ", a.scale));

  // 20.1 #2, #4: dtypes of query, key and value.
  const DType q = a.query.dtype;
  const bool q_ok = q == DType::F16 || q == DType::BF16 || q == DType::I8 || (q == DType::F32 && !c.strict);
  if (!q_ok)
    return invalid("query", cat("query dtype must be FLOAT16, BFLOAT16 or INT8", c.strict ? "" : " (or F32)",
                                ", got ", dname(q)));
  auto kv_ok = [&](DType t) {
    return t == DType::F16 || t == DType::BF16 || t == DType::I8 || t == DType::I32 ||
           (t == DType::F32 && !c.strict);
  };
  const DType k = a.key[0].dtype;
  const DType v = a.value[0].dtype;
  const char* kv_list = c.strict ? "FLOAT16, BFLOAT16, INT8 or INT32 (packed INT4)"
                                 : "FLOAT16, BFLOAT16, F32, INT8 or INT32 (packed INT4)";
  if (!kv_ok(k)) return invalid("key", cat("key dtype must be ", kv_list, ", got ", dname(k)));
  if (!kv_ok(v)) return invalid("value", cat("value dtype must be ", kv_list, ", got ", dname(v)));
  if (k != v) return invalid("value", cat("key dtype ", dname(k), " and value dtype ", dname(v), " differ"));
  for (std::size_t i = 1; i < a.key.size(); ++i) {
    if (a.key[i].dtype != k)
      return invalid("key", cat("every key tensor must have dtype ", dname(k), ", got ", dname(a.key[i].dtype),
                                " for tensor ", i));
    if (a.value[i].dtype != k)
      return invalid("value", cat("every value tensor must have dtype ", dname(k), ", got ",
                                  dname(a.value[i].dtype), " for tensor ", i));
  }

  // Full quantization (FIA-SPEC 13.1): K/V are int8 like the query and used as stored.
  if (q == DType::I8) {
    FIA_RETURN_IF_ERROR(check_full_quant_params(c));
    c.dtype = c.kv_dtype = DType::I8;
    c.kv_format = KvFormat::kFloat;
    if (a.quant_offset2.present() && !a.quant_scale2.present())
      return invalid("quant_offset2", "requires quant_scale2, got quant_offset2 alone");
    return Status::Ok();
  }
  const bool quant_kv = k == DType::I8 || k == DType::I32;
  if (!quant_kv && k != q)
    return invalid("key", cat("key and value dtype must equal the query dtype ", dname(q), " (or be INT8/INT32 for ",
                              "KV antiquantization), got ", dname(k)));
  c.dtype = q;
  c.kv_dtype = k;
  c.kv_format = k == DType::I8 ? KvFormat::kInt8 : k == DType::I32 ? KvFormat::kInt4 : KvFormat::kFloat;

  // 20.1 #5: quantization parameters in a call that does not use them.
  if (!quant_kv) {
    const std::pair<const char*, const TensorView*> antiquant[] = {
        {"antiquant_scale", &a.antiquant_scale},
        {"antiquant_offset", &a.antiquant_offset},
        {"key_antiquant_scale", &a.key_antiquant_scale},
        {"key_antiquant_offset", &a.key_antiquant_offset},
        {"value_antiquant_scale", &a.value_antiquant_scale},
        {"value_antiquant_offset", &a.value_antiquant_offset},
    };
    for (const auto& [name, view] : antiquant)
      if (view->present())
        return invalid(name, cat("only used with INT8/INT4 key and value, got ", dname(k), " key and value"));
  }
  const std::pair<const char*, const TensorView*> fullquant[] = {
      {"dequant_scale1", &a.dequant_scale1},
      {"quant_scale1", &a.quant_scale1},
      {"dequant_scale2", &a.dequant_scale2},
      {"dequant_scale_query", &a.dequant_scale_query},
  };
  for (const auto& [name, view] : fullquant)
    if (view->present()) return invalid(name, cat("only used with an INT8 query, got ", dname(q), " query"));
  // FIA-SPEC 12: KV antiquantization parameters (pairing, modes, dtypes; shapes later).
  if (quant_kv) FIA_RETURN_IF_ERROR(check_antiquant_params(c));
  if (a.quant_offset2.present() && !a.quant_scale2.present())
    return invalid("quant_offset2", "requires quant_scale2, got quant_offset2 alone");
  if (!is_float(q)) return invalid("query", cat("unexpected query dtype ", dname(q)));
  return Status::Ok();
}

}  // namespace fia::detail
