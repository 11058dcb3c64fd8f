// FIA-SPEC 12.4, 9.2, 9.3, 20.10 and Appendix C: the Ascend (Atlas A2/A3) restrictions of KV
// antiquantization, enforced only in strict mode (25.2). Every call these rules reject has a
// well-defined meaning that the default mode computes.
#include "validate/antiquant_layout.hpp"
#include "validate/context.hpp"

namespace fia::detail {

namespace {

std::string dname(DType t) { return std::string(dtype_name(t)); }

bool int4(const Ctx& c) { return c.kv_format == KvFormat::kInt4; }

/// 12.3: scale dtypes follow the query; per-tensor and per-head modes, and the paged-scale modes,
/// exist for int8 only.
Status scale_rules(const Ctx& c) {
  const Ctx::Antiquant& q = c.aq;
  for (int s = 0; s < 2; ++s) {
    const TensorView& t = *q.scale[s];
    const std::int64_t mode = q.mode[s];
    if (!per_token_mode(mode) && t.dtype != c.dtype)
      return invalid(q.scale_name[s], cat("dtype must equal the query dtype ", dname(c.dtype), ", got ", dname(t.dtype)));
    ScaleLayout l;
    scale_layout(t, !q.split, s, mode, scale_sizes(c, s), &l);
    if (int4(c) && l.kind == ScaleLayout::Kind::kTensor)
      return invalid(q.scale_name[s], cat("a per-tensor scale needs INT8 key/value, got INT32 (packed INT4) with shape ",
                                          shape_str(t.shape)));
    if (int4(c) && (mode == 2 || mode == 4 || mode == 5))
      return invalid(q.mode_name[s], cat(q.mode_name[s], " ", mode, " needs INT8 key/value, got INT32 (packed INT4)"));
    if (l.kind == ScaleLayout::Kind::kToken || l.kind == ScaleLayout::Kind::kTokenHead) {
      const std::int64_t need = c.kv_width() + c.prefix_len;
      if (l.seq < need)
        return invalid(q.scale_name[s], cat("per-token scales need S' >= KV_S", c.has_prefix ? " + P" : "",
                                            c.storage == Storage::kPaged ? " (max_blocks * block_size)" : "", " = ",
                                            need, ", got shape ", shape_str(t.shape)));
    }
  }
  // 12.3 last row: key per-channel + value per-token with INT8 K/V needs an FP16 query.
  if (q.split && q.mode[0] == 0 && q.mode[1] == 1 && !int4(c) && c.dtype != DType::F16)
    return invalid("value_antiquant_mode", cat("key per-channel + value per-token with INT8 key/value needs a FLOAT16 ",
                                               "query, got ", dname(c.dtype)));
  return Status::Ok();
}

/// 12.4, 20.2 #11: INT4 head dims, storage and Q_S.
Status int4_rules(const Ctx& c) {
  if (!int4(c)) return Status::Ok();
  if (c.qk_dim % 64 != 0)
    return invalid("key", cat("INT4 key needs a head dim that is a multiple of 64, got ", c.qk_dim));
  if (c.v_dim % 64 != 0)
    return invalid("value", cat("INT4 value needs a head dim that is a multiple of 64, got ", c.v_dim));
  if (c.storage == Storage::kPaged)
    return invalid("block_table", "INT4 key/value with a FLOAT16/BFLOAT16 query is not supported with paged attention, "
                                  "got a block_table");
  if (c.kv_padding) return invalid("kv_padding_size", "INT4 key/value does not combine with KV left padding, got kv_padding_size");
  if (c.q_seq > 1) return invalid("key", cat("INT4 key/value needs Q_S = 1, got Q_S ", c.q_seq));
  return Status::Ok();
}

/// 12.4, 3.3, 9.3: layouts, and block sizes of paged caches.
Status layout_rules(const Ctx& c) {
  const std::string& name = c.layout.name;
  const bool atb_tnd = c.layout.in == Layout::kTND && c.storage == Storage::kPaged && !c.aq.split && c.aq.offset[0] &&
                       c.aq.scale[0]->dtype == DType::F32;
  const bool layout_ok = name == "BSH" || name == "BSND" || name == "BNSD" || name == "BNSD_BSND" || atb_tnd;
  if (!layout_ok)
    return invalid("input_layout", cat("antiquant needs layout BSH, BSND, BNSD or BNSD_BSND (TND only with paged KV ",
                                       "and FLOAT32 combined antiquant_scale and antiquant_offset), got ", name));
  if (c.q_seq == 1 && name == "BNSD_BSND")
    return invalid("input_layout", "antiquant with Q_S = 1 needs layout BSH, BSND or BNSD, got BNSD_BSND");
  if (c.storage == Storage::kPaged) {
    if (c.cache == CacheLayout::kBnNBsD && c.layout.in != Layout::kBNSD && c.layout.in != Layout::kTND)
      return invalid("input_layout", cat("antiquant with a (block_num, N, block_size, D) cache needs layout BNSD, ",
                                         "BNSD_BSND or TND, got ", name));
    const std::int64_t bs = c.a.block_size;
    if (bs % 32 != 0 || bs > 512)
      return invalid("block_size", cat("antiquant with INT8 key/value needs block_size a multiple of 32 and <= 512, got ",
                                       bs));
  }
  return Status::Ok();
}

/// 12.4 "Prefill (Q_S > 1)", 10, 20.2 #11.
Status prefill_rules(const Ctx& c) {
  if (c.q_seq <= 1) return Status::Ok();
  const FiaArgs& a = c.a;
  const Ctx::Antiquant& q = c.aq;
  if (c.qk_dim % 32 != 0)
    return invalid("key", cat("INT8 key/value with Q_S > 1 needs a head dim that is a multiple of 32, got ", c.qk_dim));
  if (c.v_dim % 32 != 0)
    return invalid("value", cat("INT8 key/value with Q_S > 1 needs a head dim that is a multiple of 32, got ", c.v_dim));
  if (c.storage == Storage::kTensorList)
    return invalid("key", "antiquant with Q_S > 1 needs one key/value tensor, got a tensor list");
  if (!q.split) {
    if (c.dtype != DType::F16)
      return invalid("query", cat("combined antiquant (antiquant_scale) with Q_S > 1 needs a FLOAT16 query, got ",
                                  dname(c.dtype)));
    if (a.antiquant_mode != 0)
      return invalid("antiquant_mode", cat("combined antiquant with Q_S > 1 is per-channel/per-tensor only ",
                                           "(antiquant_mode 0), got ", a.antiquant_mode));
    return Status::Ok();
  }
  if (c.dtype != DType::BF16)
    return invalid("query", cat("split antiquant (key_antiquant_scale) with Q_S > 1 needs a BFLOAT16 query, got ",
                                dname(c.dtype)));
  if (c.q_seq > 16) return invalid("query", cat("split antiquant needs Q_S <= 16, got ", c.q_seq));
  if (q.mode[0] != q.mode[1] || q.mode[0] > 1)
    return invalid(q.mode[0] > 1 ? "key_antiquant_mode" : "value_antiquant_mode",
                   cat("split antiquant with Q_S > 1 needs key_antiquant_mode = value_antiquant_mode in {0, 1}, got ",
                       q.mode[0], " and ", q.mode[1]));
  if (c.q_padding || c.kv_padding)
    return invalid(c.q_padding ? "query_padding_size" : "kv_padding_size",
                   cat("split antiquant with Q_S > 1 needs no left padding, got ",
                       c.q_padding ? "query_padding_size" : "kv_padding_size"));
  if (c.storage == Storage::kPaged)
    return invalid("block_table", "split antiquant with Q_S > 1 needs contiguous key/value, got a block_table");
  for (int s = 0; s < 2; ++s) {
    ScaleLayout l;
    scale_layout(*q.scale[s], false, s, q.mode[s], scale_sizes(c, s), &l);
    const std::string form = l.form;
    const bool ok = q.mode[s] == 0 ? (form == "(N, D)" || form == "(N, 1, D)" || form == "(H)") : form == "(B, S')";
    if (!ok)
      return invalid(q.scale_name[s], cat("split antiquant with Q_S > 1 needs ",
                                          q.mode[s] == 0 ? "a per-channel scale of shape (N, D), (N, 1, D) or (H)"
                                                         : "a per-token scale of shape (B, S')",
                                          ", got ", shape_str(q.scale[s]->shape)));
  }
  return Status::Ok();
}

}  // namespace

/// FIA-SPEC 12.4 / 25.2: what an Atlas A2/A3 NPU rejects in an antiquant call that has a meaning.
Status check_antiquant_hardware(const Ctx& c) {
  if (!c.strict || !c.antiquant()) return Status::Ok();
  FIA_RETURN_IF_ERROR(scale_rules(c));
  FIA_RETURN_IF_ERROR(int4_rules(c));
  if (c.has_sink)
    return invalid("learnable_sink", "no learnable_sink with KV antiquantization (Appendix C), got learnable_sink");
  if (c.storage == Storage::kPaged && c.cache == CacheLayout::kNz) return Status::Ok();  // check_nz_hardware
  FIA_RETURN_IF_ERROR(layout_rules(c));
  return prefill_rules(c);
}

}  // namespace fia::detail
