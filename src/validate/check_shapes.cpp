// FIA-SPEC 3, 4, 9, 10, 15, 20.2, 20.6, 20.7: layout, ranks, heads, head dims, KV storage, rope.
#include "validate/context.hpp"

namespace fia::detail {

namespace {

constexpr std::int64_t kMaxBatch = std::int64_t{1} << 24;  // fia's own limits, far above FIA's
constexpr std::int64_t kMaxHeadDim = 65536;

/// Logical sizes of one tensor in a layout.
struct Axes {
  std::int64_t b = 1, s = 0, n = 0, d = 0;
};

/// Reads the axes of `t` in `layout`. For BSH the head count is `heads` and D = H / heads; the
/// caller has checked the rank. The last axis holds `pack` logical elements per stored one (8 for
/// INT32-packed int4 key/value, FIA-SPEC 2.3 / 12.6). Returns false when H is not a multiple of
/// `heads`.
bool read_axes(const TensorView& t, Layout layout, std::int64_t heads, Axes* out, std::int64_t pack = 1) {
  const AxisPos p = axis_positions(layout);
  Axes x;
  if (p.b >= 0) x.b = t.shape[p.b];
  x.s = t.shape[p.s];
  if (layout == Layout::kBSH) {
    x.n = heads;
    if (heads <= 0 || (t.shape[2] * pack) % heads != 0) return false;
    x.d = t.shape[2] * pack / heads;
  } else {
    x.n = t.shape[p.n];
    x.d = t.shape[p.d] * pack;
  }
  *out = x;
  return true;
}

/// "value" must have the shape of "key" except the last axis.
bool same_but_last(const TensorView& x, const TensorView& y) {
  if (x.rank() != y.rank()) return false;
  for (std::size_t i = 0; i + 1 < x.rank(); ++i)
    if (x.shape[i] != y.shape[i]) return false;
  return true;
}

Status check_rank(const char* name, const TensorView& t, Layout layout) {
  const int r = layout_rank(layout);
  if (static_cast<int>(t.rank()) != r)
    return invalid(name, cat("layout ", layout_name(layout), " needs a rank-", r, " ", name, ", got shape ",
                             shape_str(t.shape)));
  return Status::Ok();
}

Status check_query(Ctx& c) {
  const FiaArgs& a = c.a;
  if (a.num_heads <= 0) return invalid("num_heads", cat("num_heads must be > 0, got ", a.num_heads));
  if (!parse_layout(a.input_layout, &c.layout)) {
    std::string list;
    for (const auto& s : accepted_layouts()) list += (list.empty() ? "" : ", ") + s;
    return invalid("input_layout",
                   cat("unsupported layout '", printable(a.input_layout, 32), "' (expected one of ", list, ")"));
  }
  FIA_RETURN_IF_ERROR(check_rank("query", a.query, c.layout.in));
  Axes q;
  if (!read_axes(a.query, c.layout.in, a.num_heads, &q))
    return invalid("num_heads", cat("query hidden size ", a.query.shape[2], " is not a multiple of num_heads ",
                                    a.num_heads));
  if (q.n != a.num_heads)
    return invalid("num_heads", cat("query head axis is ", q.n, " but num_heads is ", a.num_heads));
  c.num_heads = q.n;
  c.qk_dim = q.d;
  if (c.qk_dim < 1 || c.qk_dim > kMaxHeadDim)
    return invalid("query", cat("head dim must be in [1, ", kMaxHeadDim, "], got shape ", shape_str(a.query.shape)));
  if (is_token_layout(c.layout.in)) {
    c.q_tokens = q.s;
    if (!a.actual_seq_lengths)
      return invalid("actual_seq_lengths", cat("required for layout ", a.input_layout, ", got none"));
    c.batch = static_cast<std::int64_t>(a.actual_seq_lengths->size());
  } else {
    c.batch = q.b;
    c.q_seq = q.s;
  }
  if (c.batch > kMaxBatch) return invalid("query", cat("batch must be <= ", kMaxBatch, " (fia's limit), got ", c.batch));

  if (a.num_key_value_heads < 0)
    return invalid("num_key_value_heads", cat("num_key_value_heads must be >= 0, got ", a.num_key_value_heads));
  c.num_kv_heads = a.num_key_value_heads == 0 ? c.num_heads : a.num_key_value_heads;
  if (c.num_heads % c.num_kv_heads != 0)
    return invalid("num_key_value_heads", cat("num_heads (", c.num_heads, ") must be a multiple of num_key_value_heads (",
                                              c.num_kv_heads, ")"));
  return Status::Ok();
}

/// Decode MLA (rope and query head dim 512): `value` is ignored and V := K (15.4, 25.1 #11).
bool value_ignored(const Ctx& c) { return c.a.query_rope.present() && c.qk_dim == 512; }

/// FIA-SPEC 12.6: with packed int4 in a fused H axis ((.., H/8) words) every head must start on an
/// int32 word, i.e. D must be a multiple of 8.
Status check_int4_heads(const Ctx& c, const TensorView& k, const TensorView& v, Layout layout) {
  if (c.kv_format != KvFormat::kInt4 || layout != Layout::kBSH) return Status::Ok();
  for (const auto* t : {&k, &v}) {
    const char* name = t == &k ? "key" : "value";
    if (t->shape[2] % c.num_kv_heads != 0)
      return invalid(name, cat("INT32-packed INT4 ", name, " with a fused H axis needs a head dim that is a multiple of 8 ",
                               "(H/8 = ", t->shape[2], " int32 words divisible by num_key_value_heads ", c.num_kv_heads,
                               "), got shape ", shape_str(t->shape)));
  }
  return Status::Ok();
}

/// A hint for a key that disagrees with num_key_value_heads (FIA-SPEC 4): the KV head count its
/// shape implies with the query's head dim (H / D for a fused H axis, the head axis otherwise),
/// when that count is plausible (it divides num_heads); empty otherwise.
std::string kv_heads_hint(const Ctx& c, const TensorView& k, Layout layout) {
  std::int64_t heads = 0;
  if (layout != Layout::kBSH) heads = k.shape[axis_positions(layout).n];
  else if (k.shape[2] * c.kv_pack() % c.qk_dim == 0) heads = k.shape[2] * c.kv_pack() / c.qk_dim;
  if (heads <= 0 || heads == c.num_kv_heads || c.num_heads % heads != 0) return "";
  return cat(" (if the cache has ", heads, " KV heads, set num_key_value_heads=", heads, ")");
}

/// The key's head count or head dim does not match: says which, with kv_heads_hint.
Status key_heads_mismatch(const Ctx& c, const TensorView& k, Layout layout, const Axes* kx) {
  const std::string hint = kv_heads_hint(c, k, layout);
  if (kx == nullptr)
    return invalid("key", cat("key hidden size ", k.shape[2] * c.kv_pack(),
                              " is not a multiple of num_key_value_heads ", c.num_kv_heads, hint));
  if (kx->n != c.num_kv_heads)
    return invalid("key", cat("key head count ", kx->n, " != num_key_value_heads ", c.num_kv_heads, hint));
  return invalid("key", cat("key head dim ", kx->d, " != query head dim ", c.qk_dim, hint));
}

/// Checks one key/value pair (or one tensor of a list, or a paged pool) whose layout is `layout`;
/// returns its axes (key) and the value head dim.
Status check_kv_pair(Ctx& c, const TensorView& k, const TensorView& v, Layout layout, Axes* kx,
                     std::int64_t* v_dim) {
  FIA_RETURN_IF_ERROR(check_rank("key", k, layout));
  if (!read_axes(k, layout, c.num_kv_heads, kx, c.kv_pack())) return key_heads_mismatch(c, k, layout, nullptr);
  if (kx->n != c.num_kv_heads) return key_heads_mismatch(c, k, layout, kx);
  if (value_ignored(c)) {
    if (kx->d != c.qk_dim) return key_heads_mismatch(c, k, layout, kx);
    *v_dim = kx->d;
    return Status::Ok();
  }
  FIA_RETURN_IF_ERROR(check_rank("value", v, layout));
  if (!same_but_last(k, v))
    return invalid("value", cat("value shape must match key shape (except the head dim), got key ",
                                shape_str(k.shape), " and value ", shape_str(v.shape)));
  Axes vx;
  if (!read_axes(v, layout, c.num_kv_heads, &vx, c.kv_pack()))
    return invalid("value", cat("value hidden size ", v.shape[2] * c.kv_pack(), " is not a multiple of num_key_value_heads ",
                                c.num_kv_heads));
  if (kx->d != c.qk_dim) return key_heads_mismatch(c, k, layout, kx);
  if (vx.d < 1 || vx.d > kMaxHeadDim)
    return invalid("value", cat("head dim must be in [1, ", kMaxHeadDim, "], got shape ", shape_str(v.shape)));
  *v_dim = vx.d;
  return check_int4_heads(c, k, v, layout);
}

Status check_contiguous_kv(Ctx& c) {
  Axes k;
  FIA_RETURN_IF_ERROR(check_kv_pair(c, c.a.key[0], c.a.value[0], c.layout.in, &k, &c.v_dim));
  if (!is_token_layout(c.layout.in) && k.b != c.batch)
    return invalid("key", cat("key batch ", k.b, " != query batch ", c.batch));
  c.kv_seq = k.s;
  return Status::Ok();
}

Status check_tensor_list(Ctx& c) {
  const FiaArgs& a = c.a;
  const Layout l = c.layout.in;
  if (l != Layout::kBSH && l != Layout::kBSND && l != Layout::kBNSD)
    return invalid("key", cat("a tensor list needs layout BSH, BSND, BNSD or BNSD_BSND, got ", a.input_layout));
  if (static_cast<std::int64_t>(a.key.size()) != c.batch)
    return invalid("key", cat("a tensor list must hold one tensor per batch (B = ", c.batch, "), got ",
                              a.key.size(), " tensors"));
  c.list_seq.resize(a.key.size());
  for (std::size_t i = 0; i < a.key.size(); ++i) {
    Axes k;
    std::int64_t vd = 0;
    FIA_RETURN_IF_ERROR(check_kv_pair(c, a.key[i], a.value[i], l, &k, &vd));
    if (k.b != 1) return invalid("key", cat("tensor-list key ", i, " must have batch 1, got shape ", shape_str(a.key[i].shape)));
    if (i == 0) c.v_dim = vd;
    if (vd != c.v_dim)
      return invalid("value", cat("every value tensor must have head dim ", c.v_dim, ", got ", vd, " for tensor ", i));
    c.list_seq[i] = k.s;
  }
  return Status::Ok();
}

/// The piece width D0 of an NZ cache of `dtype` elements: 32 bytes (FIA-SPEC 3.2).
std::int64_t nz_piece(DType dtype) { return 32 / static_cast<std::int64_t>(dtype_size(dtype)); }

/// Checks an NZ pool `t` (block_num, heads, D/D0, block_size, D0) of `dtype` elements against the
/// key's (block_num, heads, block_size); returns its head dim D.
Status check_nz_pool(const Ctx& c, const char* name, const TensorView& t, DType dtype, const TensorView& key,
                     std::int64_t* dim) {
  const std::int64_t d0 = nz_piece(dtype);
  if (t.rank() != 5 || t.shape[4] != d0)
    return invalid(name, cat("an NZ paged cache of ", dtype_name(dtype), " must be (block_num, N, D/", d0,
                             ", block_size, ", d0, "), got shape ", shape_str(t.shape)));
  if (t.shape[0] != key.shape[0] || t.shape[1] != key.shape[1] || t.shape[3] != key.shape[3])
    return invalid(name, cat(name, " shape ", shape_str(t.shape), " must match the key cache ", shape_str(key.shape),
                             " in block_num, N and block_size"));
  if (t.shape[1] != c.num_kv_heads)
    return invalid(name, cat(name, " head count ", t.shape[1], " != num_key_value_heads ", c.num_kv_heads));
  *dim = t.shape[2] * d0;
  return Status::Ok();
}

/// FIA-SPEC 3.2, 9.1: the NZ cache (block_num, KV_N, D/D0, block_size, D0), D0 = 32 bytes of
/// FLOAT16, BFLOAT16 or INT8 elements.
Status check_nz_kv(Ctx& c) {
  const FiaArgs& a = c.a;
  const TensorView& k = a.key[0];
  if (c.kv_dtype != DType::F16 && c.kv_dtype != DType::BF16 && c.kv_dtype != DType::I8)
    return invalid("key", cat("an NZ paged cache holds FLOAT16, BFLOAT16 or INT8 elements, got ", dtype_name(k.dtype)));
  std::int64_t kd = 0;
  FIA_RETURN_IF_ERROR(check_nz_pool(c, "key", k, c.kv_dtype, k, &kd));
  if (kd != c.qk_dim)
    return invalid("key", cat("key head dim ", kd, " != query head dim ", c.qk_dim, " (NZ shape ", shape_str(k.shape), ")"));
  if (value_ignored(c)) {
    c.v_dim = c.qk_dim;
  } else {
    FIA_RETURN_IF_ERROR(check_nz_pool(c, "value", a.value[0], c.kv_dtype, k, &c.v_dim));
    if (c.v_dim < 1 || c.v_dim > kMaxHeadDim)
      return invalid("value", cat("head dim must be in [1, ", kMaxHeadDim, "], got shape ", shape_str(a.value[0].shape)));
  }
  if (k.shape[3] != a.block_size)
    return invalid("key", cat("the block axis of the paged key cache must equal block_size ", a.block_size,
                              ", got shape ", shape_str(k.shape)));
  c.block_num = k.shape[0];
  return Status::Ok();
}

Status check_paged_kv(Ctx& c) {
  const FiaArgs& a = c.a;
  const TensorView& k = a.key[0];
  const TensorView& v = a.value[0];
  if (a.key.size() != 1) return invalid("block_table", "paged attention does not combine with a tensor list");
  if (k.rank() < 3 || k.rank() > 5)
    return invalid("key", cat("a paged key cache must be (block_num, block_size, H), (block_num, N, block_size, D) or ",
                              "NZ (block_num, N, D/D0, block_size, D0), got shape ", shape_str(k.shape)));
  if (a.block_size <= 0 || a.block_size > kMaxBatch)
    return invalid("block_size", cat("block_size must be in [1, ", kMaxBatch, "] with a block_table, got ", a.block_size));
  c.cache = k.rank() == 5 ? CacheLayout::kNz : k.rank() == 4 ? CacheLayout::kBnNBsD : CacheLayout::kBnBsH;
  if (c.cache == CacheLayout::kNz) {
    FIA_RETURN_IF_ERROR(check_nz_kv(c));
  } else {
    // Read the pool as a BSH (block_num, block_size, H) or BNSD (block_num, N, block_size, D) tensor.
    Axes kx;
    FIA_RETURN_IF_ERROR(
        check_kv_pair(c, k, v, c.cache == CacheLayout::kBnNBsD ? Layout::kBNSD : Layout::kBSH, &kx, &c.v_dim));
    if (kx.s != a.block_size)
      return invalid("key", cat("the block axis of the paged key cache must equal block_size ", a.block_size,
                                ", got shape ", shape_str(k.shape)));
    c.block_num = kx.b;
  }
  const TensorView& t = a.block_table;
  if (t.dtype != DType::I32) return invalid("block_table", cat("block_table dtype must be INT32, got ", dtype_name(t.dtype)));
  if (t.rank() != 2 || (c.batch > 0 && t.shape[1] == 0))
    return invalid("block_table", cat("block_table must be 2-D (B, max_blocks) with max_blocks >= 1, got shape ",
                                      shape_str(t.shape)));
  if (t.shape[0] != c.batch)
    return invalid("block_table", cat("block_table batch ", t.shape[0], " != query batch ", c.batch));
  c.max_blocks = t.shape[1];
  return Status::Ok();
}

Status check_rope(Ctx& c) {
  const FiaArgs& a = c.a;
  const bool qr = a.query_rope.present(), kr = a.key_rope.present();
  if (qr != kr)
    return invalid(qr ? "key_rope" : "query_rope",
                   cat("query_rope and key_rope must be given together, got only ", qr ? "query_rope" : "key_rope"));
  if (!qr) return Status::Ok();
  c.rope = true;
  if (c.storage == Storage::kTensorList) return invalid("key_rope", "rope inputs do not combine with a tensor list");
  if (a.key_shared_prefix.present()) return invalid("key_rope", "rope inputs do not combine with a shared prefix");
  const TensorView& q = a.query_rope;
  // 15.2: the rope dtype is the query's, except beside an INT8 query (MLA full quant, 13.3): BF16.
  const DType rope_dtype = c.dtype == DType::I8 ? DType::BF16 : c.dtype;
  const char* rope_rule = c.dtype == DType::I8 ? " with an INT8 query (MLA full quantization, FIA-SPEC 13.3)" : "";
  if (q.dtype != rope_dtype)
    return invalid("query_rope", cat("query_rope dtype must be ", dtype_name(rope_dtype), rope_rule, ", got ",
                                     dtype_name(q.dtype)));
  c.rope_dtype = rope_dtype;
  if (!same_but_last(q, a.query))
    return invalid("query_rope", cat("query_rope shape must match query shape ", shape_str(a.query.shape),
                                     " except the last axis, got ", shape_str(q.shape)));
  const bool fused = c.layout.in == Layout::kBSH;
  if (fused && q.shape.back() % c.num_heads != 0)
    return invalid("query_rope", cat("query_rope hidden size ", q.shape.back(), " is not a multiple of num_heads ",
                                     c.num_heads));
  c.rope_dim = fused ? q.shape.back() / c.num_heads : q.shape.back();
  if (c.rope_dim < 1 || c.rope_dim > kMaxHeadDim)
    return invalid("query_rope", cat("rope head dim must be in [1, ", kMaxHeadDim, "], got shape ", shape_str(q.shape)));
  const TensorView& k = a.key_rope;
  if (k.dtype != rope_dtype)
    return invalid("key_rope", cat("key_rope dtype must be ", dtype_name(rope_dtype), rope_rule, ", got ",
                                   dtype_name(k.dtype)));
  if (c.storage == Storage::kPaged && c.cache == CacheLayout::kNz) {
    std::int64_t kd = 0;
    FIA_RETURN_IF_ERROR(check_nz_pool(c, "key_rope", k, k.dtype, a.key[0], &kd));
    if (kd != c.rope_dim)
      return invalid("key_rope", cat("key_rope head dim must equal the query_rope head dim ", c.rope_dim,
                                     ", got shape ", shape_str(k.shape)));
    return Status::Ok();
  }
  if (!same_but_last(k, a.key[0]))
    return invalid("key_rope", cat("key_rope shape must match key shape ", shape_str(a.key[0].shape),
                                   " except the last axis, got ", shape_str(k.shape)));
  const bool k_fused = (c.storage == Storage::kPaged) ? c.cache == CacheLayout::kBnBsH : fused;
  const std::int64_t kd = k_fused ? (k.shape.back() % c.num_kv_heads == 0 ? k.shape.back() / c.num_kv_heads : -1)
                                  : k.shape.back();
  if (kd != c.rope_dim)
    return invalid("key_rope", cat("key_rope head dim must equal the query_rope head dim ", c.rope_dim,
                                   ", got shape ", shape_str(k.shape)));
  return Status::Ok();
}

}  // namespace

Status check_shapes(Ctx& c) {
  const FiaArgs& a = c.a;
  FIA_RETURN_IF_ERROR(check_query(c));
  if (a.block_table.present()) {
    c.storage = Storage::kPaged;
    FIA_RETURN_IF_ERROR(check_paged_kv(c));
  } else if (a.key.size() > 1) {
    c.storage = Storage::kTensorList;
    FIA_RETURN_IF_ERROR(check_tensor_list(c));
  } else {
    FIA_RETURN_IF_ERROR(check_contiguous_kv(c));
  }
  FIA_RETURN_IF_ERROR(check_rope(c));

  // FIA-SPEC 15.4 / 25.1 #11: decode MLA reads V from the latent key cache.
  c.decode_mla = c.rope && c.qk_dim == 512;
  if (c.decode_mla) c.v_dim = c.qk_dim;
  // FIA-SPEC 3.3 / 25.1 #17: the legacy decode configuration.
  const Layout l = c.layout.in;
  c.legacy_decode = !c.layout.transposed() && (l == Layout::kBSH || l == Layout::kBSND || l == Layout::kBNSD) &&
                    c.q_seq == 1 && c.qk_dim == c.v_dim && !c.rope;

  bool all_empty = true;
  for (std::size_t i = 0; i < a.key.size(); ++i)
    all_empty = all_empty && a.key[i].numel() == 0 && a.value[i].numel() == 0;
  c.empty_kv = all_empty && a.query.numel() > 0 && !a.key_shared_prefix.present();
  return Status::Ok();
}

}  // namespace fia::detail
