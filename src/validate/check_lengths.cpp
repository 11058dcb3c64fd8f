// FIA-SPEC 7, 9, 11, 20.3, 20.6, 20.8, 20.9: actual lengths, TND cumulative form, paged block ids,
// left padding, shared prefix.
#include <algorithm>
#include <cstring>

#include "validate/context.hpp"

namespace fia::detail {

namespace {

/// FIA-SPEC 7.1/7.2: one length per batch from an array of length 1 (broadcast) or >= B (the first
/// B entries; the rest are ignored, 25.1 #21). Values must lie in [0, limit(b)].
template <class Limit>
Status per_batch(const char* name, const std::vector<std::int64_t>& arr, std::int64_t batch, Limit limit,
                 std::vector<std::int64_t>* out) {
  const auto n = static_cast<std::int64_t>(arr.size());
  if (n != 1 && n < batch)
    return invalid(name, cat("shape size is ", n, ", it should be bigger or equal to batch size (", batch,
                             ") or equal to 1"));
  out->resize(batch);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t v = arr[n == 1 ? 0 : b];
    const std::int64_t hi = limit(b);
    if (v < 0 || v > hi) return invalid(name, cat("value ", v, " out of range [0, ", hi, "]"));
    (*out)[b] = v;
  }
  return Status::Ok();
}

/// FIA-SPEC 7.3: cumulative lengths ending at `total`; yields per-batch lengths and starts.
Status cumulative(const char* name, const std::vector<std::int64_t>& arr, std::int64_t total, const char* tensor,
                  std::vector<std::int64_t>* len, std::vector<std::int64_t>* start) {
  len->resize(arr.size());
  start->resize(arr.size());
  std::int64_t prev = 0;
  for (std::size_t b = 0; b < arr.size(); ++b) {
    if (arr[b] < prev)
      return invalid(name, cat("entries must be non-decreasing cumulative ends (>= 0), got ", arr[b], " after ", prev));
    (*start)[b] = prev;
    (*len)[b] = arr[b] - prev;
    prev = arr[b];
  }
  if (prev != total)
    return invalid(name, cat("the last entry must equal T of ", tensor, " (", total, "), got ",
                             arr.empty() ? 0 : arr.back()));
  return Status::Ok();
}

/// Reads the single value of a padding tensor (shape [1], INT64); negative counts as 0 (7.4).
Status read_padding(const char* name, const TensorView& t, bool strict, std::int64_t* out) {
  if (t.numel() != 1) return invalid(name, cat("must hold exactly one value (shape [1]), got shape ", shape_str(t.shape)));
  if (t.dtype == DType::I64) {
    std::memcpy(out, t.data, sizeof(std::int64_t));
  } else if (t.dtype == DType::I32 && !strict) {
    std::int32_t v;
    std::memcpy(&v, t.data, sizeof v);
    *out = v;
  } else {
    return invalid(name, cat("dtype must be INT64, got ", dtype_name(t.dtype)));
  }
  *out = std::max<std::int64_t>(*out, 0);
  return Status::Ok();
}

Status query_lengths(Ctx& c) {
  const FiaArgs& a = c.a;
  const std::int64_t B = c.batch;
  if (is_token_layout(c.layout.in)) {
    FIA_RETURN_IF_ERROR(cumulative("actual_seq_lengths", *a.actual_seq_lengths, c.q_tokens, "query", &c.act_q,
                                   &c.q_token_start));
    c.q_seq = c.act_q.empty() ? 0 : *std::max_element(c.act_q.begin(), c.act_q.end());
  } else if (c.legacy_decode || !a.actual_seq_lengths) {
    c.act_q.assign(B, c.q_seq);  // legacy decode ignores actual_seq_lengths (3.3)
  } else {
    FIA_RETURN_IF_ERROR(per_batch("actual_seq_lengths", *a.actual_seq_lengths, B,
                                  [&](std::int64_t) { return c.q_seq; }, &c.act_q));
  }
  c.q_start.assign(B, 0);
  return Status::Ok();
}

Status kv_lengths(Ctx& c) {
  const FiaArgs& a = c.a;
  const std::int64_t B = c.batch;
  const char* name = "actual_seq_lengths_kv";
  switch (c.storage) {
    case Storage::kPaged: {
      if (!a.actual_seq_lengths_kv)
        return invalid(name, "required with a block_table (paged attention), got none");
      const std::int64_t cap = c.kv_width();
      FIA_RETURN_IF_ERROR(per_batch(name, *a.actual_seq_lengths_kv, B, [&](std::int64_t) { return cap; }, &c.act_kv));
      // FIA-SPEC 25.1 #9: every block id that is read must exist.
      const auto* table = static_cast<const std::int32_t*>(a.block_table.data);
      const std::int64_t s0 = a.block_table.stride(0), s1 = a.block_table.stride(1);
      for (std::int64_t b = 0; b < B; ++b) {
        const std::int64_t used = (c.act_kv[b] + a.block_size - 1) / a.block_size;
        for (std::int64_t k = 0; k < used; ++k) {
          const std::int64_t id = table[b * s0 + k * s1];
          if (id < 0 || id >= c.block_num)
            return invalid("block_table", cat("block ids must lie in [0, ", c.block_num, "), got ", id, " at [", b,
                                              "][", k, "]"));
        }
      }
      break;
    }
    case Storage::kTensorList:
      if (!a.actual_seq_lengths_kv) {
        c.act_kv = c.list_seq;
      } else {
        FIA_RETURN_IF_ERROR(per_batch(name, *a.actual_seq_lengths_kv, B,
                                      [&](std::int64_t b) { return c.list_seq[b]; }, &c.act_kv));
      }
      break;
    case Storage::kContiguous:
      if (is_token_layout(c.layout.in)) {
        if (!a.actual_seq_lengths_kv)
          return invalid(name, cat("required for layout ", a.input_layout, ", got none"));
        if (a.actual_seq_lengths_kv->size() != a.actual_seq_lengths->size())
          return invalid(name, cat("must have as many entries as actual_seq_lengths (", a.actual_seq_lengths->size(),
                                   "), got ", a.actual_seq_lengths_kv->size()));
        FIA_RETURN_IF_ERROR(
            cumulative(name, *a.actual_seq_lengths_kv, c.kv_seq, "key", &c.act_kv, &c.kv_token_start));
      } else if (!a.actual_seq_lengths_kv) {
        c.act_kv.assign(B, c.kv_seq);
      } else {
        FIA_RETURN_IF_ERROR(per_batch(name, *a.actual_seq_lengths_kv, B, [&](std::int64_t) { return c.kv_seq; },
                                      &c.act_kv));
      }
      break;
  }
  c.kv_start.assign(B, 0);
  return Status::Ok();
}

/// FIA-SPEC 7.4 and 25.1 #6.
Status left_padding(Ctx& c) {
  const FiaArgs& a = c.a;
  c.q_padding = a.query_padding_size.present();
  c.kv_padding = a.kv_padding_size.present();
  if (!c.q_padding && !c.kv_padding) return Status::Ok();
  const char* first = c.q_padding ? "query_padding_size" : "kv_padding_size";
  if (is_token_layout(c.layout.in) || is_token_layout(c.layout.out))
    return invalid(first, cat("left padding needs layout BSH, BSND or BNSD, got ", a.input_layout));
  if (c.storage == Storage::kPaged) return invalid(first, "left padding does not combine with a block_table (paged attention)");
  if (c.storage == Storage::kTensorList) return invalid(first, "left padding does not combine with a tensor list");
  if (a.key_shared_prefix.present()) return invalid(first, "left padding does not combine with a shared prefix");
  if (c.rope) return invalid(first, "left padding does not combine with query_rope/key_rope");

  if (c.q_padding && !c.legacy_decode) {  // legacy decode ignores query_padding_size (3.3)
    std::int64_t pad = 0;
    FIA_RETURN_IF_ERROR(read_padding("query_padding_size", a.query_padding_size, c.strict, &pad));
    if (!a.actual_seq_lengths)
      return invalid("query_padding_size", "requires actual_seq_lengths, got none");
    for (std::int64_t b = 0; b < c.batch; ++b) {
      c.q_start[b] = c.q_seq - pad - c.act_q[b];
      if (c.q_start[b] < 0)
        return invalid("query_padding_size", cat("Q_S - query_padding_size - actual_seq_lengths[", b,
                                                 "] must be >= 0, got ", c.q_seq, " - ", pad, " - ", c.act_q[b]));
    }
  }
  if (c.kv_padding) {
    std::int64_t pad = 0;
    FIA_RETURN_IF_ERROR(read_padding("kv_padding_size", a.kv_padding_size, c.strict, &pad));
    if (!a.actual_seq_lengths_kv)
      return invalid("kv_padding_size", "requires actual_seq_lengths_kv, got none");
    for (std::int64_t b = 0; b < c.batch; ++b) {
      c.kv_start[b] = c.kv_seq - pad - c.act_kv[b];
      if (c.kv_start[b] < 0)
        return invalid("kv_padding_size", cat("KV_S - kv_padding_size - actual_seq_lengths_kv[", b,
                                              "] must be >= 0, got ", c.kv_seq, " - ", pad, " - ", c.act_kv[b]));
    }
  }
  return Status::Ok();
}

/// FIA-SPEC 11 and 20.9.
Status shared_prefix(Ctx& c) {
  const FiaArgs& a = c.a;
  const bool kp = a.key_shared_prefix.present(), vp = a.value_shared_prefix.present();
  if (kp != vp)
    return invalid(kp ? "value_shared_prefix" : "key_shared_prefix",
                   cat("key_shared_prefix and value_shared_prefix must be given together, got only ",
                       kp ? "key_shared_prefix" : "value_shared_prefix"));
  if (!kp) {
    if (a.actual_shared_prefix_len)
      return invalid("actual_shared_prefix_len", "requires key_shared_prefix and value_shared_prefix, got neither");
    return Status::Ok();
  }
  c.has_prefix = true;
  const Layout l = c.layout.in;
  if (is_token_layout(l))
    return invalid("key_shared_prefix", cat("a shared prefix needs layout BSH, BSND or BNSD, got ", a.input_layout));
  const TensorView& k = a.key_shared_prefix;
  const TensorView& v = a.value_shared_prefix;
  for (const auto* t : {&k, &v}) {
    const char* name = t == &k ? "key_shared_prefix" : "value_shared_prefix";
    if (t->dtype != c.kv_dtype)
      return invalid(name, cat("dtype must equal the key/value dtype ", dtype_name(c.kv_dtype), ", got ",
                               dtype_name(t->dtype)));
    if (static_cast<int>(t->rank()) != layout_rank(l))
      return invalid(name, cat("layout ", layout_name(l), " needs a rank-", layout_rank(l), " prefix, got shape ",
                               shape_str(t->shape)));
  }
  const AxisPos p = axis_positions(l);
  // The last axis in logical elements (8 per int32 word for packed int4, FIA-SPEC 2.3).
  auto dim = [&](const TensorView& t) { return (l == Layout::kBSH ? t.shape[2] : t.shape[p.d]) * c.kv_pack(); };
  const std::int64_t kd = l == Layout::kBSH ? c.num_kv_heads * c.qk_dim : c.qk_dim;
  const std::int64_t vd = l == Layout::kBSH ? c.num_kv_heads * c.v_dim : c.v_dim;
  if (k.shape[p.b] != 1) return invalid("key_shared_prefix", cat("batch must be 1, got shape ", shape_str(k.shape)));
  if (v.shape[p.b] != 1) return invalid("value_shared_prefix", cat("batch must be 1, got shape ", shape_str(v.shape)));
  if (l != Layout::kBSH && k.shape[p.n] != c.num_kv_heads)
    return invalid("key_shared_prefix", cat("head count must be num_key_value_heads ", c.num_kv_heads, ", got shape ",
                                            shape_str(k.shape)));
  if (l != Layout::kBSH && v.shape[p.n] != c.num_kv_heads)
    return invalid("value_shared_prefix", cat("head count must be num_key_value_heads ", c.num_kv_heads,
                                              ", got shape ", shape_str(v.shape)));
  if (dim(k) != kd)
    return invalid("key_shared_prefix", cat("last axis must be ", kd, " as in key, got shape ", shape_str(k.shape)));
  if (dim(v) != vd)
    return invalid("value_shared_prefix", cat("last axis must be ", vd, " as in value, got shape ", shape_str(v.shape)));
  if (v.shape[p.s] != k.shape[p.s])
    return invalid("value_shared_prefix", cat("sequence length must equal key_shared_prefix's (", k.shape[p.s],
                                              "), got shape ", shape_str(v.shape)));
  if (c.q_padding || c.kv_padding)
    return invalid("key_shared_prefix", "a shared prefix does not combine with left padding");
  c.prefix_seq = k.shape[p.s];
  c.prefix_len = c.prefix_seq;
  if (a.actual_shared_prefix_len) {
    const auto& arr = *a.actual_shared_prefix_len;
    if (arr.size() != 1)
      return invalid("actual_shared_prefix_len", cat("must hold exactly one value, got ", arr.size()));
    if (arr[0] < 0 || arr[0] > c.prefix_seq)
      return invalid("actual_shared_prefix_len", cat("value ", arr[0], " out of range [0, ", c.prefix_seq, "]"));
    c.prefix_len = arr[0];
  }
  return Status::Ok();
}

}  // namespace

std::int64_t Ctx::kv_width() const {
  switch (storage) {
    case Storage::kPaged:  // saturating: an absurd table cannot overflow
      return max_blocks > (std::int64_t{1} << 40) / a.block_size ? std::int64_t{1} << 40 : max_blocks * a.block_size;
    case Storage::kTensorList: return list_seq.empty() ? 0 : *std::max_element(list_seq.begin(), list_seq.end());
    case Storage::kContiguous:
      if (is_token_layout(layout.in)) return act_kv.empty() ? 0 : *std::max_element(act_kv.begin(), act_kv.end());
      return kv_seq;
  }
  return kv_seq;
}

Status check_lengths(Ctx& c) {
  FIA_RETURN_IF_ERROR(query_lengths(c));
  FIA_RETURN_IF_ERROR(kv_lengths(c));
  FIA_RETURN_IF_ERROR(left_padding(c));
  FIA_RETURN_IF_ERROR(shared_prefix(c));
  return Status::Ok();
}

}  // namespace fia::detail
