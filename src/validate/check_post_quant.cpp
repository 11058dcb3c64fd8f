// FIA-SPEC 14 (with 13.2's float rows and 20.11 #27): quantizing the attention output of an
// fp16/bf16 query to int8 with quant_scale2 / quant_offset2.
#include "cpu/convert.hpp"
#include "validate/context.hpp"

namespace fia::detail {

namespace {

std::string dname(DType t) { return std::string(dtype_name(t)); }

/// Element `lin` (row-major over the view's shape) of an F32/BF16 view, as float.
float element(const TensorView& t, std::int64_t lin) {
  std::int64_t off = 0;
  for (std::size_t k = t.rank(); k-- > 0;) {
    off += (lin % t.shape[k]) * t.stride(k);
    lin /= t.shape[k];
  }
  return load_one(t.data, t.dtype, off);
}

/// 14.4: with quant_offset2, a sparse configuration that leaves a query row with no computed block
/// is rejected (the device would leave such a row 0 instead of quantize(0)).
Status check_no_skipped_rows(const Ctx& c) {
  const FiaArgs& a = c.a;
  if (!a.quant_offset2.present() || c.legacy_decode) return Status::Ok();
  const std::int64_t mode = a.sparse_mode, pre = a.pre_tokens, next = a.next_tokens, P = c.prefix_len;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t q = c.act_q[b], kv = c.act_kv[b];
    if (q == 0) continue;
    bool skips = false;
    if (mode == 0 && c.has_mask) skips = q - kv - P - pre > 0 || next < 0;
    if (mode == 3) skips = kv + P - q < 0;
    if (mode == 4) skips = pre < 0 || next + kv + P - q < 0;
    if (skips)
      return invalid("quant_offset2", cat("with quant_offset2 the sparse configuration must not skip query rows, got ",
                                          "sparse_mode ", mode, " skipping rows of batch ", b));
  }
  return Status::Ok();
}

}  // namespace

Status check_post_quant(const Ctx& c) {
  const FiaArgs& a = c.a;
  const TensorView& s = a.quant_scale2;
  const TensorView& o = a.quant_offset2;
  if (!s.present()) return Status::Ok();
  // 14.2: dtype and shape.
  if (s.dtype != DType::F32 && !(s.dtype == DType::BF16 && c.dtype == DType::BF16))
    return invalid("quant_scale2", cat("quant_scale2 dtype must be FLOAT32", c.dtype == DType::BF16 ? " or BFLOAT16" : "",
                                       " with a ", dname(c.dtype), " query, got ", dname(s.dtype)));
  if (o.present() && o.dtype != s.dtype)
    return invalid("quant_offset2", cat("quant_offset2 dtype must equal quant_scale2 dtype ", dname(s.dtype), ", got ",
                                        dname(o.dtype)));
  if (o.present() && o.shape != s.shape)
    return invalid("quant_offset2", cat("quant_offset2 shape must equal quant_scale2's ", shape_str(s.shape), ", got ",
                                        shape_str(o.shape)));
  const std::int64_t channels = c.num_heads * c.v_dim;
  const bool per_channel = s.numel() != 1;
  if (per_channel) {
    const std::string& l = c.layout.name;
    const bool any_shape = l == "BSH" || l == "BSND" || l == "BNSD" || l == "BNSD_BSND";
    if (any_shape ? s.numel() != channels : s.shape != std::vector<std::int64_t>{c.num_heads, c.v_dim})
      return invalid("quant_scale2",
                     cat("quant_scale2 must have 1 element (per-tensor) or ",
                         any_shape ? cat("Q_N * V_D = ", channels, " elements") : cat("shape [", c.num_heads, ", ",
                                                                                      c.v_dim, "]"),
                         " (per-channel, input_layout ", l, "), got shape ", shape_str(s.shape)));
  }
  // 14.3: the configurations FIA's post-quant does not combine with.
  if (c.rope)
    return invalid("quant_scale2", "post-quant (int8 output) is not supported with MLA rope, got query_rope/key_rope");
  if (c.qk_dim != c.v_dim)
    return invalid("quant_scale2", cat("post-quant needs the query/key head dim to equal value's, got ", c.qk_dim,
                                       " and ", c.v_dim));
  if (c.has_sink)
    return invalid("learnable_sink", "learnable_sink is not supported with post-quant (int8 output), got both");
  if (c.kv_format == KvFormat::kInt4)
    return invalid("quant_scale2", "post-quant is not supported with INT4 key/value, got INT32 (packed INT4)");
  // Hardware limits (25.2), strict mode only: per-channel post-quant without left padding or the
  // LSE output, head dims a multiple of 32 for Q_S > 1.
  if (c.strict && per_channel && (c.q_padding || c.kv_padding))
    return invalid("quant_scale2", cat("per-channel post-quant is not supported with left padding, got ",
                                       c.q_padding ? "query_padding_size" : "kv_padding_size"));
  if (c.strict && per_channel && a.softmax_lse_flag)
    return invalid("quant_scale2", "per-channel post-quant is not supported with the LSE output (ring attention), "
                                   "got softmax_lse_flag true");
  if (!c.legacy_decode && a.sparse_mode == 4 && (a.pre_tokens < 0 || a.next_tokens < 0))
    return invalid(a.pre_tokens < 0 ? "pre_tokens" : "next_tokens",
                   cat("band mode (sparse_mode 4) with int8 output needs pre_tokens and next_tokens >= 0, got ",
                       a.pre_tokens, " and ", a.next_tokens));
  if (c.strict && c.q_seq > 1 && c.v_dim % 32 != 0)
    return invalid("quant_scale2", cat("post-quant with Q_S > 1 needs a head dim that is a multiple of 32, got ",
                                       c.v_dim));
  return check_no_skipped_rows(c);
}

void fill_post_quant(const Ctx& c, Problem* p) {
  const FiaArgs& a = c.a;
  p->post_quant = Problem::PostQuant{};
  if (!a.quant_scale2.present()) return;
  auto& pq = p->post_quant;
  pq.on = true;  // the formula (Options::post_quant_rounding) is set by plan()
  for (std::int64_t i = 0; i < a.quant_scale2.numel(); ++i) pq.scale.push_back(element(a.quant_scale2, i));
  if (a.quant_offset2.present())
    for (std::int64_t i = 0; i < a.quant_offset2.numel(); ++i) pq.offset.push_back(element(a.quant_offset2, i));
  pq.zero_kv_rows = !is_token_layout(c.layout.in) && c.q_seq == 1;
  p->out_dtype = DType::I8;
}

}  // namespace fia::detail
