// Ascend hardware limits (FIA-SPEC 25.2): enforced only in strict mode, to tell a user exactly what
// an NPU (Atlas A2/A3) would reject. Every input these rules reject still has a well-defined
// meaning, which the default mode computes.
#include <algorithm>

#include "validate/context.hpp"

namespace fia::detail {

namespace {

bool in(std::int64_t v, std::initializer_list<std::int64_t> set) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

/// 20.2 #11-12: maxima and head-dim alignment.
Status sizes(const Ctx& c) {
  if (c.batch > 65536) return invalid("query", cat("batch must be <= 65536, got ", c.batch));
  if (c.num_heads > 256) return invalid("num_heads", cat("num_heads must be <= 256, got ", c.num_heads));
  if (c.num_kv_heads > 256)
    return invalid("num_key_value_heads", cat("num_key_value_heads must be <= 256, got ", c.num_kv_heads));
  if (c.qk_dim > 512) return invalid("query", cat("query head dim must be <= 512, got ", c.qk_dim));
  if (c.v_dim > 512) return invalid("value", cat("value head dim must be <= 512, got ", c.v_dim));
  const bool prefill = !c.legacy_decode && c.q_seq > 1;
  if (prefill && c.qk_dim % 16 != 0)
    return invalid("query", cat("head dim ", c.qk_dim, " must be a multiple of 16 here (Q_S > 1)"));
  if (prefill && c.v_dim % 16 != 0)
    return invalid("value", cat("value head dim ", c.v_dim, " must be a multiple of 16 here (Q_S > 1)"));
  if ((c.qk_dim % 16 != 0 || c.v_dim % 16 != 0) && c.batch > 128)
    return invalid("query", cat("batch must be <= 128 when the head dim is not a multiple of 16, got ", c.batch));
  if (c.a.actual_seq_lengths && c.a.actual_seq_lengths->size() > 65536)
    return invalid("actual_seq_lengths", cat("must have <= 65536 entries, got ", c.a.actual_seq_lengths->size()));
  if (c.a.actual_seq_lengths_kv && c.a.actual_seq_lengths_kv->size() > 65536)
    return invalid("actual_seq_lengths_kv", cat("must have <= 65536 entries, got ", c.a.actual_seq_lengths_kv->size()));
  return Status::Ok();
}

/// 3.1 and 20.2 #11: head dims each layout accepts.
Status layout_dims(const Ctx& c) {
  const std::string& name = c.layout.name;
  const std::int64_t qk = c.qk_dim, v = c.v_dim;
  const bool mla_pair = qk == 192 && v == 128;
  const bool std_pair = qk == v && (qk == 64 || qk == 128);
  if (c.layout.out == Layout::kNBSD && !c.decode_mla)
    return invalid("input_layout", cat("layout ", name, " is only for decode MLA (head dim 512 with query_rope), got head dim ",
                                       qk));
  if (name == "NTD" || name == "BSH_BNSD" || name == "BSND_BNSD" || name == "NTD_TND") {
    if (!std_pair && !mla_pair)
      return invalid("query", cat("layout ", name, " needs head dim 64 or 128 (or 192/128), got ", qk, "/", v));
  }
  if (c.layout.in == Layout::kTND && !c.rope) {
    const bool gqa_any = c.num_heads != c.num_kv_heads && c.a.inner_precise == 0 && qk == v && qk <= 256;
    if (!std_pair && !mla_pair && !gqa_any)
      return invalid("query", cat("layout ", name, ": head dim must be 64/128 (or 192/128, or <= 256 for GQA with ",
                                  "inner_precise 0), got ", qk, "/", v));
  }
  if (name == "BNSD_BSND" && c.q_seq == 1 && qk != 64 && qk != 128)
    return invalid("query", cat("BNSD_BSND with Q_S = 1 needs head dim 64 or 128, got ", qk));
  if (qk != v && !mla_pair) {
    const bool small = qk <= 128 && v <= 128;
    const bool layout_ok = !(name == "NTD" || name == "NTD_TND" || name == "BSH_BNSD" || name == "BSND_BNSD" ||
                             name == "BNSD_BSND");
    if (!small || !layout_ok)
      return invalid("value", cat("query/key head dim ", qk, " != value head dim ", v, " is not supported here",
                                  layout_ok ? "" : cat(" (layout ", name, ")")));
  }
  return Status::Ok();
}

/// 15: MLA rope shapes and decode-MLA head rules.
Status rope(const Ctx& c) {
  if (!c.rope) return Status::Ok();
  if (c.rope_dim != 64) return invalid("query_rope", cat("rope head dim must be 64, got ", c.rope_dim));
  if (c.qk_dim != 128 && c.qk_dim != 512)
    return invalid("query", cat("query head dim with rope must be 128 or 512, got ", c.qk_dim));
  if (!c.decode_mla) return Status::Ok();
  if (!in(c.num_heads, {1, 2, 4, 8, 16, 32, 64, 128}))
    return invalid("num_heads", cat("decode MLA needs num_heads in {1, 2, 4, ..., 128}, got ", c.num_heads));
  if (c.num_kv_heads != 1)
    return invalid("num_key_value_heads", cat("decode MLA needs num_key_value_heads 1, got ", c.num_kv_heads));
  if (c.storage != Storage::kPaged) return invalid("block_table", "decode MLA needs a paged KV cache, got none");
  if (!in(c.a.sparse_mode, {0, 3, 4, 9}))
    return invalid("sparse_mode", cat("decode MLA supports sparse_mode 0, 3, 4, 9, got ", c.a.sparse_mode));
  if (c.a.softmax_lse_flag && is_token_layout(c.layout.in))
    return invalid("softmax_lse_flag", cat("decode MLA with layout ", c.layout.name, " has no softmax_lse"));
  return Status::Ok();
}

/// 6.8 rules 4-8 and the mask-shape restrictions.
Status band(const Ctx& c) {
  const FiaArgs& a = c.a;
  if (c.has_mask && a.atten_mask.rank() == 2 && a.sparse_mode <= 1) {
    const Layout l = c.layout.in;
    const bool layout_ok = (l == Layout::kBSH || l == Layout::kBSND || l == Layout::kBNSD) &&
                           (!c.layout.transposed() || c.layout.name == "BNSD_BSND");
    if (!layout_ok || c.rope || c.qk_dim != c.v_dim)
      return invalid("atten_mask", cat("a 2-D mask needs layout BSH/BSND/BNSD/BNSD_BSND without rope and with equal ",
                                       "head dims, got ", shape_str(a.atten_mask.shape)));
  }
  if (c.legacy_decode) return Status::Ok();
  if (c.qk_dim != c.v_dim && !c.decode_mla && !in(a.sparse_mode, {0, 2, 3}))
    return invalid("sparse_mode", cat("different query/value head dims support sparse_mode 0, 2, 3, got ", a.sparse_mode));
  std::int64_t pre = kIntMax, next = kIntMax;
  const bool padding = c.q_padding || c.kv_padding;
  if ((a.sparse_mode == 0 && c.has_mask && !padding) || a.sparse_mode == 4) {
    pre = std::clamp(a.pre_tokens, -kFar, kFar);  // never negate INT64_MIN
    next = std::clamp(a.next_tokens, -kFar, kFar);
  } else if (a.sparse_mode == 2) {
    next = 0;
  } else if (a.sparse_mode == 3) {
    return Status::Ok();
  }
  if (pre < 0 && next < 0)
    return invalid("pre_tokens", cat("pre_tokens and next_tokens cannot both be negative, got ", a.pre_tokens, " and ",
                                     a.next_tokens));
  if (pre < kIntMax && next < kIntMax && pre + next < 0)
    return invalid("next_tokens", cat("the next_tokens line must not be below the pre_tokens line (pre_tokens + ",
                                      "next_tokens >= 0), got ", pre, " and ", next));
  if (a.sparse_mode == 0 && c.has_mask) {
    if (next < 0 && -next >= c.q_seq)
      return invalid("next_tokens", cat("-next_tokens must be < Q_S (", c.q_seq, "), got next_tokens ", next));
    if (pre < 0 && -pre >= c.kv_width() + c.prefix_len)
      return invalid("pre_tokens", cat("-pre_tokens must be < KV_S (", c.kv_width() + c.prefix_len, "), got pre_tokens ", pre));
  }
  if (a.sparse_mode == 4 && is_token_layout(c.layout.in)) {
    for (std::int64_t b = 0; b < c.batch; ++b) {
      if (pre < -c.act_q[b])
        return invalid("pre_tokens", cat("pre_tokens must be >= -actual_seq_lengths[", b, "] (", -c.act_q[b], "), got ", pre));
      if (next < -c.act_kv[b])
        return invalid("next_tokens", cat("next_tokens must be >= -actual_seq_lengths_kv[", b, "] (", -c.act_kv[b],
                                          "), got ", next));
    }
  }
  return Status::Ok();
}

/// 6.5: the paths the tree mask (sparse_mode 9) exists on: non-quantized GQA and MLA, and MLA full
/// quant (13.3), without pse, a shared prefix or an int8 output.
Status tree_mask_limits(const Ctx& c) {
  if (c.legacy_decode || c.a.sparse_mode != 9) return Status::Ok();
  if (c.has_pse) return invalid("pse_shift", "the tree mask (sparse_mode 9) does not combine with pse_shift");
  if (c.has_prefix) return invalid("key_shared_prefix", "the tree mask (sparse_mode 9) does not combine with a shared prefix");
  if (c.a.quant_scale2.present())
    return invalid("quant_scale2", "the tree mask (sparse_mode 9) does not combine with an INT8 output");
  if (c.antiquant() || (c.dtype == DType::I8 && !c.mla_full_quant))
    return invalid(c.antiquant() ? "key" : "query", cat("the tree mask (sparse_mode 9) needs non-quantized inputs, got ",
                                                        dtype_name(c.antiquant() ? c.kv_dtype : c.dtype)));
  return Status::Ok();
}

/// 8.3, 16.2, 18: pse, sink and inner_precise restrictions.
Status features(const Ctx& c) {
  const FiaArgs& a = c.a;
  if (c.has_pse) {
    const DType want = c.dtype == DType::I8 ? DType::F16 : c.dtype;  // 8.2: FP16 with an INT8 query
    if (a.pse_shift.dtype != want)
      return invalid("pse_shift", cat("dtype must be ", dtype_name(want), " with a ", dtype_name(c.dtype),
                                      " query, got ", dtype_name(a.pse_shift.dtype)));
    if (c.rope) return invalid("pse_shift", "pse_shift does not combine with query_rope/key_rope");
    if (c.qk_dim != c.v_dim) return invalid("pse_shift", "pse_shift needs equal query and value head dims");
    if (c.q_seq == 1 && a.pse_shift.shape[2] != 1)
      return invalid("pse_shift", cat("decode (Q_S = 1) needs pse_shift dim 2 equal to 1, got shape ",
                                      shape_str(a.pse_shift.shape)));
  }
  if (c.has_sink) {
    const DType t = a.learnable_sink.dtype;
    if (!(t == DType::BF16 || (t == DType::F16 && c.dtype == DType::F16)))
      return invalid("learnable_sink", cat("dtype must be BFLOAT16 (or FLOAT16 with a FLOAT16 query), got ", dtype_name(t)));
    if (c.has_pse) return invalid("learnable_sink", "learnable_sink does not combine with pse_shift");
    if (c.q_padding || c.kv_padding) return invalid("learnable_sink", "learnable_sink does not combine with left padding");
    if (c.has_prefix) return invalid("learnable_sink", "learnable_sink does not combine with a shared prefix");
    if (a.inner_precise != 0) return invalid("inner_precise", cat("learnable_sink needs inner_precise 0, got ", a.inner_precise));
    if (!in(c.qk_dim, {64, 128, 192}) || !in(c.v_dim, {64, 128}))
      return invalid("learnable_sink", cat("learnable_sink needs head dims 64/128/192 (query) and 64/128 (value), got ",
                                           c.qk_dim, "/", c.v_dim));
  }
  if (c.layout.in == Layout::kTND && !c.rope && c.num_heads != c.num_kv_heads && a.inner_precise != 0)
    return invalid("inner_precise", cat("layout TND with GQA needs inner_precise 0, got ", a.inner_precise));
  if (c.layout.in == Layout::kTND && !c.rope && c.num_heads == c.num_kv_heads && c.dtype == DType::BF16 &&
      a.inner_precise == 1)
    return invalid("inner_precise", "layout TND with BFLOAT16 MHA does not support inner_precise 1");
  return Status::Ok();
}

/// 9.2, 9.3, 10, 11, 7.4: storage combinations and block sizes.
Status storage(const Ctx& c) {
  const FiaArgs& a = c.a;
  if (c.storage == Storage::kPaged) {
    const std::int64_t bs = a.block_size;
    const bool prefill = !c.legacy_decode && c.q_seq > 1;
    if (bs % 16 != 0) return invalid("block_size", cat("block_size must be a multiple of 16, got ", bs));
    if (c.rope || (c.qk_dim == c.v_dim && in(c.qk_dim, {64, 128}))) {
      const std::int64_t cap = c.legacy_decode ? 512 : 1024;
      if (bs > cap) return invalid("block_size", cat("block_size must be <= ", cap, ", got ", bs));
    } else if (prefill) {
      if (bs % 128 != 0 || bs > 1024)
        return invalid("block_size", cat("block_size must be a multiple of 128 and <= 1024 here (Q_S > 1), got ", bs));
    } else if (bs > 512) {
      return invalid("block_size", cat("block_size must be <= 512 for decode, got ", bs));
    }
    if (c.cache == CacheLayout::kBnBsH && c.num_kv_heads * c.qk_dim > 65535)
      return invalid("key", cat("a (block_num, block_size, H) cache needs H <= 65535, got ", c.num_kv_heads * c.qk_dim));
    if (c.qk_dim != c.v_dim && !c.decode_mla)
      return invalid("block_table", "paged attention needs equal query and value head dims");
    if (c.has_prefix) return invalid("key_shared_prefix", "a shared prefix does not combine with paged attention");
  }
  if (c.storage == Storage::kTensorList) {
    if (c.batch > 256) return invalid("key", cat("a tensor list supports batch <= 256, got ", c.batch));
    if (c.has_prefix && c.q_seq > 1)
      return invalid("key_shared_prefix", "a shared prefix does not combine with a tensor list when Q_S > 1");
  }
  if ((c.q_padding || c.kv_padding) && c.layout.transposed() && c.layout.name != "BNSD_BSND")
    return invalid(c.q_padding ? "query_padding_size" : "kv_padding_size",
                   cat("left padding needs layout BSH, BSND, BNSD or BNSD_BSND, got ", c.layout.name));
  return Status::Ok();
}

}  // namespace

Status check_hardware(Ctx& c) {
  if (!c.strict) return Status::Ok();
  FIA_RETURN_IF_ERROR(sizes(c));
  FIA_RETURN_IF_ERROR(layout_dims(c));
  FIA_RETURN_IF_ERROR(rope(c));
  FIA_RETURN_IF_ERROR(band(c));
  FIA_RETURN_IF_ERROR(features(c));
  FIA_RETURN_IF_ERROR(tree_mask_limits(c));
  FIA_RETURN_IF_ERROR(storage(c));
  FIA_RETURN_IF_ERROR(check_nz_hardware(c));
  FIA_RETURN_IF_ERROR(check_antiquant_hardware(c));
  FIA_RETURN_IF_ERROR(check_full_quant_hardware(c));
  return Status::Ok();
}

}  // namespace fia::detail
