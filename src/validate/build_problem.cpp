// Layer 2 entry point: FiaArgs -> Problem, or the first broken rule.
#include "validate/build_problem.hpp"

#include <algorithm>
#include <cstring>

#include "numeric/half.hpp"
#include "validate/context.hpp"

namespace fia::detail {

namespace {

const void* advance(const void* base, std::int64_t elements, DType t) {
  return static_cast<const std::byte*>(base) + elements * static_cast<std::int64_t>(dtype_size(t));
}

std::int64_t clamp_far(std::int64_t v) { return std::clamp(v, -kFar, kFar); }

/// Rows of a Q-like tensor (query, query_rope) in the input layout.
RowIndex query_rows(const Ctx& c, const TensorView& t, std::int64_t head_dim) {
  const Layout l = c.layout.in;
  const AxisPos p = axis_positions(l);
  RowIndex r;
  r.base = t.data;
  r.row_stride = t.stride(p.s);
  r.head_stride = l == Layout::kBSH ? head_dim * t.stride(2) : t.stride(p.n);
  r.batch_offset.resize(c.batch);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t first = is_token_layout(l) ? c.q_token_start[b] * r.row_stride : b * t.stride(p.b);
    r.batch_offset[b] = first + c.q_start[b] * r.row_stride;
  }
  return r;
}

/// Token rows of one batch of a KV-like tensor read in `layout` (batch axis index `b_index`),
/// starting at token `first`.
KvTensorRows::Batch kv_batch(const TensorView& t, Layout layout, std::int64_t head_dim, std::int64_t b_index,
                             std::int64_t first, DType dtype) {
  const AxisPos p = axis_positions(layout);
  KvTensorRows::Batch r;
  r.token_stride = t.stride(p.s);
  r.head_stride = layout == Layout::kBSH ? head_dim * t.stride(2) : t.stride(p.n);
  const std::int64_t batch_off = p.b >= 0 ? b_index * t.stride(p.b) : 0;
  r.base = advance(t.data, batch_off + first * r.token_stride, dtype);
  return r;
}

/// A K/V head dim in stored elements of kv_dtype: int32 words for packed int4 (FIA-SPEC 12.6).
std::int64_t stored(const Ctx& c, std::int64_t head_dim) { return head_dim / c.kv_pack(); }

KvSegment prefix_segment(const Ctx& c) {
  const FiaArgs& a = c.a;
  KvSegment s;
  s.length.assign(c.batch, c.prefix_len);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    s.key.batch.push_back(kv_batch(a.key_shared_prefix, c.layout.in, stored(c, c.qk_dim), 0, 0, c.kv_dtype));
    s.value.batch.push_back(kv_batch(a.value_shared_prefix, c.layout.in, stored(c, c.v_dim), 0, 0, c.kv_dtype));
  }
  return s;
}

KvSegment own_segment(const Ctx& c) {
  const FiaArgs& a = c.a;
  KvSegment s;
  s.length = c.act_kv;
  const std::int64_t v_dim = c.decode_mla ? c.qk_dim : c.v_dim;
  const TensorView& value = c.decode_mla ? a.key[0] : a.value[0];
  if (c.storage == Storage::kPaged) {
    s.paged = true;
    s.block_table = static_cast<const std::int32_t*>(a.block_table.data);
    s.table_stride = a.block_table.stride(0);
    s.table_col_stride = a.block_table.stride(1);
    s.block_size = a.block_size;
    auto pool = [&](const TensorView& t, std::int64_t d, KvTensorRows* rows) {
      rows->pool = t.data;
      rows->block_stride = t.stride(0);
      if (c.cache == CacheLayout::kNz) {  // (block_num, N, D/D0, block_size, D0), 9.1
        rows->head_stride = t.stride(1);
        rows->token_stride = t.stride(3);
        rows->tiling = {t.stride(2), t.shape[4]};
      } else if (c.cache == CacheLayout::kBnNBsD) {
        rows->head_stride = t.stride(1);
        rows->token_stride = t.stride(2);
      } else {
        rows->head_stride = d * t.stride(2);
        rows->token_stride = t.stride(1);
      }
    };
    pool(a.key[0], stored(c, c.qk_dim), &s.key);
    pool(value, stored(c, v_dim), &s.value);
    if (c.rope) pool(a.key_rope, c.rope_dim, &s.key_rope);
    return s;
  }
  const Layout l = c.layout.in;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const bool list = c.storage == Storage::kTensorList;
    const std::size_t ti = list ? static_cast<std::size_t>(b) : 0;
    const std::int64_t bi = list ? 0 : b;
    const std::int64_t first = (is_token_layout(l) ? c.kv_token_start[b] : 0) + c.kv_start[b];
    s.key.batch.push_back(kv_batch(a.key[ti], l, stored(c, c.qk_dim), bi, first, c.kv_dtype));
    s.value.batch.push_back(
        kv_batch(c.decode_mla ? a.key[ti] : a.value[ti], l, stored(c, v_dim), bi, first, c.kv_dtype));
    if (c.rope) s.key_rope.batch.push_back(kv_batch(a.key_rope, l, c.rope_dim, bi, first, c.rope_dtype));
  }
  return s;
}

/// FIA-SPEC 6.4: the band per batch, in offsets from the diagonal j = i.
void fill_band(const Ctx& c, Problem* p) {
  const FiaArgs& a = c.a;
  p->band_lo.assign(c.batch, -kFar);
  p->band_hi.assign(c.batch, kFar);
  if (c.legacy_decode || c.empty_kv) return;
  const std::int64_t pre = clamp_far(a.pre_tokens), next = clamp_far(a.next_tokens);
  const bool padding = c.q_padding || c.kv_padding;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t d = c.prefix_len + c.act_kv[b] - c.act_q[b];
    switch (a.sparse_mode) {
      case 0:
        if (c.has_mask && !padding) {
          p->band_lo[b] = -pre;
          p->band_hi[b] = next;
        }
        break;
      case 2: p->band_hi[b] = 0; break;
      case 3: p->band_hi[b] = d; break;
      case 4:
        p->band_lo[b] = d - pre;
        p->band_hi[b] = d + next;
        break;
      default: break;
    }
  }
}

/// FIA-SPEC 6.2/6.3: a full mask as (batch, physical row, physical column) strides.
void fill_mask(const Ctx& c, Problem* p) {
  const FiaArgs& a = c.a;
  const bool tree = c.has_mask && !c.legacy_decode && a.sparse_mode == 9 && !c.empty_kv;
  const bool full = c.has_mask && (c.legacy_decode || a.sparse_mode <= 1) && !c.empty_kv;
  p->has_mask = full || tree;
  p->tree_mask = tree;
  if (tree) {  // 6.5: (B, Q_S, Q_S), or the concatenated act_q x act_q matrices of a token layout
    const TensorView& m = a.atten_mask;
    p->mask = BiasIndex{m.data, m.dtype, 0, 0, 0, m.stride(m.rank() - 1)};
    p->tree_start.assign(c.batch, 0);
    p->tree_offset.assign(c.batch, 0);
    p->tree_row.assign(c.batch, 0);
    std::int64_t flat = 0;
    for (std::int64_t b = 0; b < c.batch; ++b) {
      p->tree_start[b] = c.prefix_len + c.act_kv[b] - c.act_q[b];
      if (m.rank() == 1) {
        p->tree_offset[b] = flat * m.stride(0);
        p->tree_row[b] = c.act_q[b] * m.stride(0);
        flat += c.act_q[b] * c.act_q[b];
      } else {
        p->tree_offset[b] = b * m.stride(0);
        p->tree_row[b] = m.stride(1);
      }
    }
  }
  if (!full) return;
  const TensorView& m = a.atten_mask;
  const auto& s = m.shape;
  BiasIndex& x = p->mask;
  x.base = m.data;
  x.dtype = m.dtype;
  const std::size_t r = s.size();
  x.col_stride = m.stride(r - 1);
  if (r == 2 && !is_token_layout(c.layout.in) && c.q_seq == 1) {  // (B or 1, KV_S')
    x.batch_stride = s[0] == 1 ? 0 : m.stride(0);
    x.row_stride = 0;
  } else if (r == 2) {  // (Q_S', KV_S')
    x.batch_stride = 0;
    x.row_stride = m.stride(0);
  } else {  // (B or 1, [1,] Q_S', KV_S')
    x.batch_stride = s[0] == 1 ? 0 : m.stride(0);
    x.row_stride = m.stride(r - 2);
  }
}

void fill_pse(const Ctx& c, Problem* p) {
  p->has_pse = c.has_pse && !c.empty_kv;
  if (!p->has_pse) return;
  const TensorView& t = c.a.pse_shift;
  BiasIndex& x = p->pse;
  x.base = t.data;
  x.dtype = t.dtype;
  x.batch_stride = t.shape[0] == 1 ? 0 : t.stride(0);
  x.head_stride = t.stride(1);
  x.row_stride = t.stride(2);
  x.col_stride = t.stride(3);
}

float to_float(const void* data, DType t, std::int64_t i) {
  const auto* u16 = static_cast<const std::uint16_t*>(data);
  switch (t) {
    case DType::F16: return f16_to_f32(u16[i]);
    case DType::BF16: return bf16_to_f32(u16[i]);
    case DType::F32: return static_cast<const float*>(data)[i];
    default: return 0.0f;
  }
}

/// FIA-SPEC 25.3: how P is rounded on the path the call takes. inner_precise bit 0 = 1 (high
/// performance) selects the fp16 tiles of the split-fuse path (token layouts take no pse, which
/// would force high precision, 18).
PRule p_rule_for(const Ctx& c) {
  PRule r;
  const bool half = c.dtype == DType::F16 || c.dtype == DType::BF16;
  r.round_to = half ? c.dtype : DType::F32;
  switch (c.a.entry_point) {
    case EntryPoint::kIncreFlashAttention:
      r.kind = PRule::Kind::kNormalizeFirst;
      r.round_to = c.dtype == DType::F16 ? DType::F16 : DType::F32;
      break;
    case EntryPoint::kPromptFlashAttention: break;
    case EntryPoint::kFusedInferAttentionScore:
      if (!is_token_layout(c.layout.in)) break;
      if ((c.a.inner_precise & 1) != 0 && half) {
        r.kind = PRule::Kind::kRunningMax;
        r.round_to = DType::F16;
      } else {
        r.round_to = DType::F32;
      }
      break;
  }
  return r;
}

}  // namespace

void fill_problem(const Ctx& c, Problem* p) {
  const FiaArgs& a = c.a;
  p->batch = c.batch;
  p->num_heads = c.num_heads;
  p->num_kv_heads = c.num_kv_heads;
  p->group = c.num_heads / c.num_kv_heads;
  p->qk_dim = c.qk_dim;
  p->rope_dim = c.rope_dim;
  p->v_dim = c.v_dim;
  p->dtype = c.dtype;
  p->kv_dtype = c.kv_dtype;
  p->rope_dtype = c.rope ? c.rope_dtype : c.dtype;
  p->kv_format = c.kv_format;
  p->entry_point = c.a.entry_point;
  p->p_rule = p_rule_for(c);
  p->key_antiquant = Antiquant{};
  p->value_antiquant = Antiquant{};
  p->act_q = c.act_q;
  p->q_start = c.q_start;
  p->prefix_len = c.prefix_len;
  p->kv_col_offset = c.storage == Storage::kContiguous ? c.kv_start : std::vector<std::int64_t>(c.batch, 0);
  p->query = query_rows(c, a.query, c.qk_dim);
  if (c.rope) p->query_rope = query_rows(c, a.query_rope, c.rope_dim);
  p->segments.clear();
  if (c.has_prefix && c.prefix_len > 0) p->segments.push_back(prefix_segment(c));
  p->segments.push_back(own_segment(c));
  if (c.antiquant()) fill_antiquant(c, p);  // after kv_col_offset
  fill_band(c, p);
  fill_mask(c, p);
  fill_pse(c, p);
  p->scale = static_cast<float>(a.scale);  // 25.1 #13
  p->has_sink = c.has_sink;
  p->sink.clear();
  if (c.has_sink) {
    for (std::int64_t n = 0; n < c.num_heads; ++n)
      p->sink.push_back(to_float(a.learnable_sink.data, a.learnable_sink.dtype, n * a.learnable_sink.stride(0)));
  }
  p->out_dtype = c.dtype;
  fill_full_quant(c, p);  // INT8 query: FP16 output (MLA full quant: BF16)
  if (c.mla_full_quant) p->mla_full_quant.dequant_query = query_rows(c, a.dequant_scale_query, 1);
  fill_post_quant(c, p);  // int8 output with quant_scale2
  p->out_layout = c.layout.out;
  p->token_layout = is_token_layout(c.layout.in);
  p->q_token_start = c.q_token_start;
  const std::int64_t rows = p->token_layout ? c.q_tokens : c.q_seq;
  p->out_shape = shape_in_layout(c.layout.out, c.batch, rows, c.num_heads, c.v_dim);
  p->values_are_keys = c.decode_mla;
  p->lse = a.softmax_lse_flag;
  if (!p->lse) p->lse_shape = {1};
  else if (p->token_layout) p->lse_shape = {c.q_tokens, c.num_heads, 1};
  else p->lse_shape = {c.batch, c.num_heads, c.q_seq, 1};
}

/// FIA-SPEC 19: a query of size 0 returns at once, every other check skipped; attention_out is
/// empty too, in the output layout when the layout and the query's rank allow reading its axes.
void fill_empty_query(const FiaArgs& a, Problem* p) {
  *p = Problem{};
  p->empty_query = true;
  p->dtype = p->out_dtype = a.query.dtype;
  p->lse = a.softmax_lse_flag;
  p->out_shape = a.query.shape;
  p->lse_shape = {1};
  LayoutPair layout;
  if (!parse_layout(a.input_layout, &layout) || static_cast<int>(a.query.rank()) != layout_rank(layout.in)) return;
  const AxisPos pos = axis_positions(layout.in);
  const auto& q = a.query.shape;
  const std::int64_t n = layout.in == Layout::kBSH ? std::max<std::int64_t>(a.num_heads, 1) : q[pos.n];
  const std::int64_t d = layout.in == Layout::kBSH ? q[2] / n : q[pos.d];
  const std::int64_t b = pos.b >= 0 ? q[pos.b] : 0, s = q[pos.s];
  p->out_layout = layout.out;
  p->out_shape = shape_in_layout(layout.out, b, s, n, d);
  if (p->lse) p->lse_shape = is_token_layout(layout.in) ? std::vector<std::int64_t>{s, n, 1}
                                                        : std::vector<std::int64_t>{b, n, s, 1};
}

Status build_problem(const FiaArgs& args, bool strict, Problem* out) {
  Ctx c(args, strict);
  const bool required = args.query.present() && !args.key.empty() && args.key[0].present() && !args.value.empty() &&
                        args.value[0].present();
  if (required && args.query.numel() == 0) {
    fill_empty_query(args, out);
    return Status::Ok();
  }
  FIA_RETURN_IF_ERROR(check_tensors(c));
  FIA_RETURN_IF_ERROR(check_shapes(c));
  FIA_RETURN_IF_ERROR(check_mla_full_quant_shapes(c));
  if (c.empty_kv) {
    // FIA-SPEC 19: every key/value tensor is empty: attention_out is 0, softmax_lse +inf.
    c.act_q.assign(c.batch, 0);
    c.q_start.assign(c.batch, 0);
    c.act_kv.assign(c.batch, 0);
    c.kv_start.assign(c.batch, 0);
    c.q_token_start.assign(c.batch, 0);
    c.kv_token_start.assign(c.batch, 0);
    if (c.storage == Storage::kTensorList) c.list_seq.assign(c.batch, 0);
    FIA_RETURN_IF_ERROR(check_antiquant_shapes(c));
    FIA_RETURN_IF_ERROR(check_post_quant(c));
  } else {
    FIA_RETURN_IF_ERROR(check_lengths(c));
    FIA_RETURN_IF_ERROR(check_antiquant_shapes(c));
    FIA_RETURN_IF_ERROR(check_visibility(c));
    FIA_RETURN_IF_ERROR(check_misc(c));
    FIA_RETURN_IF_ERROR(check_hardware(c));
    FIA_RETURN_IF_ERROR(check_post_quant(c));
  }
  fill_problem(c, out);
  // The outputs must be allocatable: bound their sizes (the inputs are bounded by check_tensors).
  for (const auto* shape : {&out->out_shape, &out->lse_shape}) {
    std::int64_t n = 1;
    for (auto d : *shape) {
      if (d != 0 && n > (std::int64_t{1} << 48) / d)
        return invalid(shape == &out->out_shape ? "attention_out" : "softmax_lse",
                       cat("the output would have too many elements, shape ", shape_str(*shape)));
      n *= d;
    }
  }
  return Status::Ok();
}

}  // namespace fia::detail
