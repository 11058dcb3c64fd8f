#include "support/call_builder.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstring>
#include <sstream>

#include "args/layout.hpp"
#include "numeric/half.hpp"
#include "support/antiquant_builder.hpp"

namespace fia::test {

using detail::Layout;
using builder_internal::add_antiquant;
using builder_internal::AntiquantShape;
using builder_internal::kv_tensor;
using builder_internal::PagedLayout;
using builder_internal::quantized;
using builder_internal::random_int;
using builder_internal::random_kv;

namespace {

/// Garbage at logical element i: kGarbage for floats; the extreme integers, alternating, for
/// int8 (127 / -128) and int4 (7 / -8).
void set_garbage(OwnedTensor& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::I8: set_kv_value(t, i, i % 2 ? -128.0f : 127.0f); break;
    case DType::I32: set_kv_value(t, i, i % 2 ? -8.0f : 7.0f); break;
    default: set_value(t, i, kGarbage); break;
  }
}

/// Flat offset of (b, s, n, d) in a contiguous tensor of `layout` with sizes B, S (or T), N, D.
std::int64_t flat(Layout l, std::int64_t S, std::int64_t N, std::int64_t D, std::int64_t b, std::int64_t s,
                  std::int64_t n, std::int64_t d) {
  switch (l) {
    case Layout::kBSH:
    case Layout::kBSND: return ((b * S + s) * N + n) * D + d;
    case Layout::kBNSD: return ((b * N + n) * S + s) * D + d;
    case Layout::kTND: return (s * N + n) * D + d;
    case Layout::kNTD: return (n * S + s) * D + d;
    case Layout::kNBSD: return 0;
  }
  return 0;
}

/// Fills the tokens [s0, s1) of batch b (all heads) of a layout tensor with garbage.
void garbage_tokens(OwnedTensor& t, Layout l, std::int64_t S, std::int64_t N, std::int64_t D, std::int64_t b,
                    std::int64_t s0, std::int64_t s1) {
  for (std::int64_t s = s0; s < s1; ++s)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t d = 0; d < D; ++d) set_garbage(t, flat(l, S, N, D, b, s, n, d));
}

/// In a layout tensor of B batches of S tokens, fills with garbage every token of batch b outside
/// its window of act[b] tokens, which starts at 0, or after the left padding `padding` of a
/// sequence of `seq` tokens (FIA-SPEC 15).
void garbage_outside_windows(OwnedTensor& t, Layout l, std::int64_t B, std::int64_t S, std::int64_t N, std::int64_t D,
                             const std::vector<std::int64_t>& act, std::int64_t seq,
                             const std::optional<std::int64_t>& padding) {
  const std::int64_t pad = std::max<std::int64_t>(padding.value_or(0), 0);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t start = padding ? seq - pad - act[b] : 0;
    garbage_tokens(t, l, S, N, D, b, 0, std::max<std::int64_t>(start, 0));
    garbage_tokens(t, l, S, N, D, b, std::min(start + act[b], S), S);
  }
}

const OwnedTensor& compressed_mask() {
  static const OwnedTensor m = [] {
    OwnedTensor t(DType::Bool, {2048, 2048});
    auto* p = t.as<std::uint8_t>();
    for (std::int64_t i = 0; i < 2048; ++i)
      for (std::int64_t j = 0; j < 2048; ++j) p[i * 2048 + j] = j > i ? 1 : 0;
    return t;
  }();
  return m;
}

std::vector<std::int64_t> cumulative(const std::vector<std::int64_t>& v) {
  std::vector<std::int64_t> c(v.size());
  std::partial_sum(v.begin(), v.end(), c.begin());
  return c;
}

}  // namespace

TensorView TestCall::keep(OwnedTensor t) {
  storage.push_back(std::move(t));
  return storage.back().view();
}

void set_value(OwnedTensor& t, std::int64_t i, float v) {
  switch (t.dtype) {
    case DType::F16: t.as<std::uint16_t>()[i] = detail::f32_to_f16(v); break;
    case DType::BF16: t.as<std::uint16_t>()[i] = detail::f32_to_bf16(v); break;
    case DType::F32: t.as<float>()[i] = v; break;
    case DType::I8: t.as<std::int8_t>()[i] = static_cast<std::int8_t>(v); break;
    default: break;
  }
}

void set_stored_value(const void* base, DType t, std::int64_t offset, float v) {
  auto* b = static_cast<std::byte*>(const_cast<void*>(base));
  if (t == DType::F32) {
    std::memcpy(b + offset * 4, &v, 4);
    return;
  }
  const std::uint16_t h = t == DType::F16 ? detail::f32_to_f16(v) : detail::f32_to_bf16(v);
  std::memcpy(b + offset * 2, &h, 2);
}

OwnedTensor random_tensor(DType dtype, std::vector<std::int64_t> shape, std::mt19937_64& rng, float range) {
  OwnedTensor t(dtype, std::move(shape));
  std::uniform_real_distribution<float> u(-range, range);
  for (std::int64_t i = 0; i < t.numel(); ++i) set_value(t, i, u(rng));
  return t;
}

std::string describe(const CallSpec& s) {
  std::ostringstream os;
  os << s.layout << " " << dtype_name(s.dtype) << " B=" << s.batch << " N=" << s.num_heads << "/"
     << (s.num_kv_heads ? s.num_kv_heads : s.num_heads) << " Sq=" << s.q_seq << " Skv=" << s.kv_seq << " D=" << s.qk_dim
     << "/" << (s.v_dim ? s.v_dim : s.qk_dim) << (s.rope_dim ? "+rope" : "") << " sparse=" << s.sparse_mode
     << " pre=" << s.pre_tokens << " next=" << s.next_tokens
     << " mask=" << (s.mask == MaskKind::kNone ? "none" : s.mask == MaskKind::kFull ? "full" : "compressed")
     << (s.pse ? " pse" : "") << (s.sink ? " sink" : "") << (s.lse ? " lse" : "")
     << " storage=" << (s.storage == KvStorage::kPaged ? "paged" : s.storage == KvStorage::kTensorList ? "list" : "contiguous")
     << (s.inner_precise ? " ip=" + std::to_string(s.inner_precise) : std::string());
  auto list = [&](const char* name, const std::optional<std::vector<std::int64_t>>& v) {
    if (!v) return;
    os << " " << name << "=[";
    for (std::size_t i = 0; i < v->size(); ++i) os << (i ? "," : "") << (*v)[i];
    os << "]";
  };
  list("act_q", s.act_q);
  list("act_kv", s.act_kv);
  if (s.storage == KvStorage::kPaged) os << " bs=" << s.block_size << (s.paged_bnbsd ? " BnNBsD" : " BnBsH");
  if (s.prefix_seq) os << " P=" << s.prefix_len.value_or(s.prefix_seq) << "/" << s.prefix_seq;
  if (s.kv_padding) os << " kvpad=" << *s.kv_padding;
  if (s.query_padding) os << " qpad=" << *s.query_padding;
  const AntiquantSpec& q = s.quant;
  if (q.format != KvQuant::kNone) {
    os << " kv=" << (q.format == KvQuant::kInt8 ? "int8" : "int4") << " modes=" << q.key_mode << "/" << q.value_mode
       << (q.key_mode == 0 || q.value_mode == 0 ? " channel=" + q.channel_shape : std::string())
       << (q.offsets ? " offsets" : "") << (q.combined ? " combined" : " split") << (q.token_lead_one ? " (1,B,S')" : "")
       << (q.unit_scales ? " unit-scales" : "");
  }
  return os.str();
}

TestCall build_call(const CallSpec& s, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  TestCall call;
  FiaArgs& a = call.args;
  detail::LayoutPair lp;
  detail::parse_layout(s.layout, &lp);
  const Layout l = lp.in;
  const bool token = detail::is_token_layout(l);
  const std::int64_t B = s.batch, N = s.num_heads, KVN = s.num_kv_heads ? s.num_kv_heads : s.num_heads;
  const std::int64_t QD = s.qk_dim, VD = s.v_dim ? s.v_dim : s.qk_dim;
  const std::vector<std::int64_t> act_q = s.act_q ? *s.act_q : std::vector<std::int64_t>(B, s.q_seq);
  const std::vector<std::int64_t> act_kv = s.act_kv ? *s.act_kv : std::vector<std::int64_t>(B, s.kv_seq);
  const std::int64_t P = s.prefix_seq ? s.prefix_len.value_or(s.prefix_seq) : 0;

  a.input_layout = s.layout;
  a.num_heads = N;
  a.num_key_value_heads = s.num_kv_heads;
  a.scale = s.scale != 0.0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(QD + s.rope_dim));
  a.sparse_mode = s.sparse_mode;
  a.pre_tokens = s.pre_tokens;
  a.next_tokens = s.next_tokens;
  a.inner_precise = s.inner_precise;
  a.softmax_lse_flag = s.lse;
  if (token) {
    a.actual_seq_lengths = cumulative(act_q);
    if (s.storage == KvStorage::kPaged) a.actual_seq_lengths_kv = act_kv;
    else a.actual_seq_lengths_kv = cumulative(act_kv);
  } else {
    if (s.act_q) a.actual_seq_lengths = act_q;
    if (s.act_kv) a.actual_seq_lengths_kv = act_kv;
  }

  // Query (and query_rope): rows outside each batch's window are garbage.
  const std::int64_t QS = token ? std::accumulate(act_q.begin(), act_q.end(), std::int64_t{0}) : s.q_seq;
  auto make_query = [&](std::int64_t D) {
    OwnedTensor q = random_tensor(s.dtype, detail::shape_in_layout(l, B, QS, N, D), rng, s.value_range);
    if (!token) garbage_outside_windows(q, l, B, QS, N, D, act_q, s.q_seq, s.query_padding);
    return q;
  };
  a.query = call.keep(make_query(QD));
  if (s.rope_dim) a.query_rope = call.keep(make_query(s.rope_dim));

  // Key / value / key_rope in the chosen storage.
  std::int64_t kv_width = s.kv_seq;
  PagedLayout paged;
  if (s.storage == KvStorage::kContiguous) {
    const std::int64_t KS = token ? std::accumulate(act_kv.begin(), act_kv.end(), std::int64_t{0}) : s.kv_seq;
    auto make_kv = [&](std::int64_t D, bool rope) {
      const std::vector<std::int64_t> shape = detail::shape_in_layout(l, B, KS, KVN, D);
      OwnedTensor t = rope ? random_tensor(s.dtype, shape, rng, s.value_range) : random_kv(s, shape, rng);
      if (!token) garbage_outside_windows(t, l, B, KS, KVN, D, act_kv, s.kv_seq, s.kv_padding);
      return t;
    };
    a.key = {call.keep(make_kv(QD, false))};
    a.value = {call.keep(make_kv(VD, false))};
    if (s.rope_dim) a.key_rope = call.keep(make_kv(s.rope_dim, true));
    if (token) kv_width = *std::max_element(act_kv.begin(), act_kv.end());
  } else if (s.storage == KvStorage::kTensorList) {
    kv_width = 0;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t Sb = act_kv[b] + static_cast<std::int64_t>(rng() % 3);
      kv_width = std::max(kv_width, Sb);
      OwnedTensor k = random_kv(s, detail::shape_in_layout(l, 1, Sb, KVN, QD), rng);
      OwnedTensor v = random_kv(s, detail::shape_in_layout(l, 1, Sb, KVN, VD), rng);
      garbage_tokens(k, l, Sb, KVN, QD, 0, act_kv[b], Sb);
      garbage_tokens(v, l, Sb, KVN, VD, 0, act_kv[b], Sb);
      a.key.push_back(call.keep(std::move(k)));
      a.value.push_back(call.keep(std::move(v)));
    }
    if (!s.act_kv) a.actual_seq_lengths_kv = act_kv;  // S_b exceeds act_kv by design
  } else {
    const std::int64_t bs = s.block_size;
    std::int64_t max_blocks = 1, used = 0;
    for (auto len : act_kv) {
      max_blocks = std::max(max_blocks, (len + bs - 1) / bs);
      used += (len + bs - 1) / bs;
    }
    max_blocks += 1;  // an unused slot per row, holding -1
    const std::int64_t block_num = used + 2;  // two blocks nobody uses
    std::vector<std::int32_t> ids(block_num);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    OwnedTensor table(DType::I32, {B, max_blocks});
    std::fill(table.as<std::int32_t>(), table.as<std::int32_t>() + table.numel(), -1);
    std::int64_t next_id = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t k = 0; k < (act_kv[b] + bs - 1) / bs; ++k) table.as<std::int32_t>()[b * max_blocks + k] = ids[next_id++];
    auto pool = [&](std::int64_t D, bool rope) {
      const std::vector<std::int64_t> shape =
          s.paged_bnbsd ? std::vector<std::int64_t>{block_num, KVN, bs, D} : std::vector<std::int64_t>{block_num, bs, KVN * D};
      const bool quant = !rope && quantized(s);
      OwnedTensor t = rope ? OwnedTensor(s.dtype, shape) : kv_tensor(s, shape);
      const std::int64_t logical = block_num * bs * KVN * D;
      for (std::int64_t i = 0; i < logical; ++i) set_garbage(t, i);
      std::uniform_real_distribution<float> u(-s.value_range, s.value_range);
      for (std::int64_t b = 0; b < B; ++b) {
        for (std::int64_t tok = 0; tok < act_kv[b]; ++tok) {
          const std::int64_t blk = table.as<std::int32_t>()[b * max_blocks + tok / bs], off = tok % bs;
          for (std::int64_t h = 0; h < KVN; ++h)
            for (std::int64_t d = 0; d < D; ++d) {
              const std::int64_t i = s.paged_bnbsd ? ((blk * KVN + h) * bs + off) * D + d : (blk * bs + off) * KVN * D + h * D + d;
              if (quant) set_kv_value(t, i, random_int(s, rng));
              else set_value(t, i, u(rng));
            }
        }
      }
      return t;
    };
    a.key = {call.keep(pool(QD, false))};
    a.value = {call.keep(pool(VD, false))};
    if (s.rope_dim) a.key_rope = call.keep(pool(s.rope_dim, true));
    paged.table.assign(table.as<std::int32_t>(), table.as<std::int32_t>() + table.numel());
    paged.max_blocks = max_blocks;
    paged.block_num = block_num;
    a.block_table = call.keep(std::move(table));
    a.block_size = bs;
    a.actual_seq_lengths_kv = act_kv;
    kv_width = max_blocks * bs;
  }

  if (s.prefix_seq) {
    a.key_shared_prefix = call.keep(random_kv(s, detail::shape_in_layout(l, 1, s.prefix_seq, KVN, QD), rng));
    a.value_shared_prefix = call.keep(random_kv(s, detail::shape_in_layout(l, 1, s.prefix_seq, KVN, VD), rng));
    if (s.prefix_len) a.actual_shared_prefix_len = std::vector<std::int64_t>{*s.prefix_len};
  }
  if (s.query_padding) {
    OwnedTensor t(DType::I64, {1});
    t.as<std::int64_t>()[0] = *s.query_padding;
    a.query_padding_size = call.keep(std::move(t));
  }
  if (s.kv_padding) {
    OwnedTensor t(DType::I64, {1});
    t.as<std::int64_t>()[0] = *s.kv_padding;
    a.kv_padding_size = call.keep(std::move(t));
  }

  const std::int64_t rows = token ? *std::max_element(act_q.begin(), act_q.end()) : s.q_seq;
  const std::int64_t cols = kv_width + P;
  if (s.mask == MaskKind::kCompressed) {
    a.atten_mask = compressed_mask().view();
  } else if (s.mask == MaskKind::kFull) {
    const std::int64_t mb = s.mask_batch_broadcast ? 1 : B;
    std::vector<std::int64_t> shape;
    if (s.mask_rank == 2) shape = (!token && s.q_seq == 1) ? std::vector<std::int64_t>{mb, cols} : std::vector<std::int64_t>{rows, cols};
    else if (s.mask_rank == 3) shape = {mb, rows, cols};
    else shape = {mb, 1, rows, cols};
    OwnedTensor m(s.mask_dtype, shape);
    std::bernoulli_distribution masked(s.mask_density);
    for (std::int64_t i = 0; i < m.numel(); ++i) m.as<std::uint8_t>()[i] = masked(rng) ? 1 : 0;
    a.atten_mask = call.keep(std::move(m));
  }
  if (s.pse) {
    const std::int64_t pb = s.pse_batch_broadcast ? 1 : B;
    a.pse_shift = call.keep(random_tensor(s.dtype, {pb, N, rows, cols}, rng, 1.0f));
  }
  if (s.sink) a.learnable_sink = call.keep(random_tensor(DType::BF16, {N}, rng, 2.0f));

  if (quantized(s)) {
    // Per-token scale rows are indexed by the physical column under KV left padding (25.1 #8).
    std::vector<std::int64_t> col_off(B, 0);
    if (s.storage == KvStorage::kContiguous && !token && s.kv_padding)
      for (std::int64_t b = 0; b < B; ++b) col_off[b] = s.kv_seq - std::max<std::int64_t>(*s.kv_padding, 0) - act_kv[b];
    const AntiquantShape z{B, KVN, P, kv_width + P + s.quant.extra_columns, s.block_size, act_kv, col_off, paged};
    add_antiquant(s, z, QD, VD, rng, &call);
  }
  return call;
}

}  // namespace fia::test
