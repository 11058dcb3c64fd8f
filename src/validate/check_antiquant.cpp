// FIA-SPEC 12.2, 12.3, 20.10: the semantic rules of KV antiquantization (int8 / packed-int4 key and
// value with a float query), enforced in default and strict mode alike.
#include <algorithm>

#include "validate/antiquant_layout.hpp"
#include "validate/context.hpp"

namespace fia::detail {

namespace {

std::string kv_name(const Ctx& c) {
  return c.kv_format == KvFormat::kInt4 ? "INT32 (packed INT4)" : "INT8";
}

std::string dname(DType t) { return std::string(dtype_name(t)); }

/// 12.2: which parameters are in use, their pairing and mode values.
Status resolve_params(Ctx& c) {
  const FiaArgs& a = c.a;
  Ctx::Antiquant& q = c.aq;
  const bool ks = a.key_antiquant_scale.present(), vs = a.value_antiquant_scale.present();
  const bool ko = a.key_antiquant_offset.present(), vo = a.value_antiquant_offset.present();
  q.split = ks || vs || ko || vo;  // split parameters win over combined ones (12.2)
  if (q.split) {
    if (ks != vs)
      return invalid(ks ? "value_antiquant_scale" : "key_antiquant_scale",
                     cat("key_antiquant_scale and value_antiquant_scale must be given together, got only ",
                         ks ? "key_antiquant_scale" : "value_antiquant_scale"));
    if (ko != vo)
      return invalid(ko ? "value_antiquant_offset" : "key_antiquant_offset",
                     cat("key_antiquant_offset and value_antiquant_offset must be given together, got only ",
                         ko ? "key_antiquant_offset" : "value_antiquant_offset"));
    if (ko && !ks)
      return invalid("key_antiquant_offset",
                     "an offset needs its scale (key_antiquant_scale and value_antiquant_scale), got "
                     "key_antiquant_offset and value_antiquant_offset without scales");
    q.mode[0] = a.key_antiquant_mode;
    q.mode[1] = a.value_antiquant_mode;
    q.scale[0] = &a.key_antiquant_scale;
    q.scale[1] = &a.value_antiquant_scale;
    q.offset[0] = ko ? &a.key_antiquant_offset : nullptr;
    q.offset[1] = vo ? &a.value_antiquant_offset : nullptr;
    q.scale_name[0] = "key_antiquant_scale";
    q.scale_name[1] = "value_antiquant_scale";
    q.offset_name[0] = "key_antiquant_offset";
    q.offset_name[1] = "value_antiquant_offset";
    q.mode_name[0] = "key_antiquant_mode";
    q.mode_name[1] = "value_antiquant_mode";
    for (int s = 0; s < 2; ++s) {
      if (q.mode[s] == 6)
        return invalid(q.mode_name[s], cat(q.mode_name[s], " must be in 0..5 (mode 6, per-token-group scales for ",
                                           "FLOAT4_E2M1 key/value, exists only on Ascend 950), got 6"));
      if (q.mode[s] < 0 || q.mode[s] > 5)
        return invalid(q.mode_name[s], cat(q.mode_name[s], " must be in 0..5, got ", q.mode[s]));
    }
    if (q.mode[0] != q.mode[1] && !(q.mode[0] == 0 && q.mode[1] == 1))
      return invalid("value_antiquant_mode",
                     cat("value_antiquant_mode must equal key_antiquant_mode (", q.mode[0],
                         ") or be 1 with key_antiquant_mode 0 (key per-channel, value per-token), got ", q.mode[1]));
    return Status::Ok();
  }
  if (a.antiquant_offset.present() && !a.antiquant_scale.present())
    return invalid("antiquant_offset", "an offset needs its scale, got antiquant_offset without antiquant_scale");
  if (!a.antiquant_scale.present())
    return invalid("key_antiquant_scale",
                   cat(kv_name(c), " key and value need antiquant scales (key_antiquant_scale and ",
                       "value_antiquant_scale, or antiquant_scale), got none"));
  if (a.antiquant_mode == 2)
    return invalid("antiquant_mode",
                   "antiquant_mode must be 0 (per-channel/per-tensor) or 1 (per-token) with the combined antiquant_scale; "
                   "FIA-SPEC 12.2/12.3 define no layout for combined mode 2, got 2");
  if (a.antiquant_mode != 0 && a.antiquant_mode != 1)
    return invalid("antiquant_mode", cat("antiquant_mode must be 0 or 1, got ", a.antiquant_mode));
  for (int s = 0; s < 2; ++s) {
    q.mode[s] = a.antiquant_mode;
    q.scale[s] = &a.antiquant_scale;
    q.offset[s] = a.antiquant_offset.present() ? &a.antiquant_offset : nullptr;
    q.scale_name[s] = "antiquant_scale";
    q.offset_name[s] = "antiquant_offset";
    q.mode_name[s] = "antiquant_mode";
  }
  return Status::Ok();
}

/// 12.1/12.3: dtypes of scales and offsets; an offset has its scale's shape and dtype.
Status check_dtypes(const Ctx& c) {
  const Ctx::Antiquant& q = c.aq;
  for (int s = 0; s < (q.split ? 2 : 1); ++s) {
    const TensorView& t = *q.scale[s];
    const bool token = per_token_mode(q.mode[s]);
    if (token && t.dtype != DType::F32)
      return invalid(q.scale_name[s], cat("per-token scales (", q.mode_name[s], " ", q.mode[s],
                                          ") must be FLOAT32, got ", dname(t.dtype)));
    if (!token && t.dtype != DType::F16 && t.dtype != DType::BF16 && t.dtype != DType::F32)
      return invalid(q.scale_name[s], cat("dtype must be FLOAT16 or BFLOAT16 (the query dtype; FLOAT32 accepted ",
                                          "outside strict mode), got ", dname(t.dtype)));
    if (!q.offset[s]) continue;
    const TensorView& o = *q.offset[s];
    if (o.dtype != t.dtype || o.shape != t.shape)
      return invalid(q.offset_name[s], cat(q.offset_name[s], " must have the shape and dtype of ", q.scale_name[s], " (",
                                           shape_str(t.shape), " ", dname(t.dtype), "), got ", shape_str(o.shape), " ",
                                           dname(o.dtype)));
  }
  return Status::Ok();
}

/// The number of columns a per-token scale row must hold: the last prefix-inclusive column any
/// batch reads, plus its KV left padding (25.1 #8).
std::int64_t columns_needed(const Ctx& c, std::int64_t* batch) {
  std::int64_t need = 0;
  *batch = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t off = c.storage == Storage::kContiguous ? c.kv_start[b] : 0;
    const std::int64_t n = off + c.prefix_len + c.act_kv[b];
    if (n > need) {
      need = n;
      *batch = b;
    }
  }
  return need;
}

}  // namespace

/// FIA-SPEC 12.2, 20.1 #5, Appendix C: called by check_tensors for int8 / int4 key and value.
/// Resolves the parameters in use (split over combined) and checks their presence, pairing, mode
/// values and dtypes; shapes wait for check_antiquant_shapes.
Status check_antiquant_params(Ctx& c) {
  const FiaArgs& a = c.a;
  if (a.query_rope.present() || a.key_rope.present())
    return invalid("key_rope", cat("no query_rope/key_rope with ", kv_name(c), " key and value (MLA rope does not ",
                                   "combine with KV antiquantization, FIA-SPEC Appendix C), got ",
                                   a.key_rope.present() ? "key_rope" : "query_rope"));
  FIA_RETURN_IF_ERROR(resolve_params(c));
  return check_dtypes(c);
}

/// FIA-SPEC 12.2-12.3, 20.10, 25.1 #8: per-mode shapes against the sizes, storage and lengths
/// (after check_lengths). Modes 4/5 need paged KV and no shared prefix; per-token scales must
/// reach every column read.
Status check_antiquant_shapes(Ctx& c) {
  if (!c.antiquant()) return Status::Ok();
  const Ctx::Antiquant& q = c.aq;
  for (int s = 0; s < 2; ++s) {
    const std::int64_t mode = q.mode[s];
    if (mode == 4 || mode == 5) {
      if (c.storage != Storage::kPaged)
        return invalid(q.mode_name[s], cat(q.mode_name[s], " ", mode, " (per-token scales beside a paged cache) needs ",
                                           "paged key/value (a block_table), got ",
                                           c.storage == Storage::kTensorList ? "a tensor list" : "contiguous key/value"));
      if (c.has_prefix)
        return invalid("key_shared_prefix", cat("no shared prefix with ", q.mode_name[s], " ", mode,
                                                " (paged per-token scales have no entries for prefix tokens), got one"));
    }
    const ScaleSizes z = scale_sizes(c, s);
    ScaleLayout l;
    if (!scale_layout(*q.scale[s], !q.split, s, mode, z, &l))
      return invalid(q.scale_name[s], cat(q.scale_name[s], " with ", q.mode_name[s], " ", mode, " must have shape ",
                                          allowed_scale_shapes(!q.split, mode, z), ", got ",
                                          shape_str(q.scale[s]->shape)));
    if (l.kind == ScaleLayout::Kind::kToken || l.kind == ScaleLayout::Kind::kTokenHead) {
      std::int64_t b = 0;
      const std::int64_t need = columns_needed(c, &b);
      if (l.seq < need)
        return invalid(q.scale_name[s], cat("per-token scales need S' >= ", need, " (the last KV column read, batch ", b,
                                            ", prefix included), got shape ", shape_str(q.scale[s]->shape)));
    }
    if (q.offset[s] && l.per_token()) {
      ScaleLayout o;
      scale_layout(*q.offset[s], !q.split, s, mode, z, &o);  // same shape as the scale (check_dtypes)
      if (!o.same_strides(l))
        return unsupported(q.offset_name[s], cat("a per-token ", q.offset_name[s], " must have the strides of ",
                                                 q.scale_name[s], ", got different strides"));
    }
  }
  return Status::Ok();
}

}  // namespace fia::detail
