#include "support/call_builder.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "args/layout.hpp"
#include "numeric/half.hpp"

namespace fia::test {

using detail::Layout;

namespace {

constexpr float kGarbage = 900.0f;  // what FIA must never read: dominates any softmax it enters
// Per-token antiquant scale and offset slots FIA must never read: finite, but far off the O(1/64)
// scales, so that reading one shows.
constexpr float kGarbageTokenScale = 4096.0f;
constexpr float kGarbageTokenOffset = 1000.0f;

bool quantized(const CallSpec& s) { return s.quant.format != KvQuant::kNone; }

/// The stored K/V element type: the query dtype, I8, or I32 (packed int4).
DType kv_dtype(const CallSpec& s) {
  switch (s.quant.format) {
    case KvQuant::kInt8: return DType::I8;
    case KvQuant::kInt4: return DType::I32;
    default: return s.dtype;
  }
}

/// A K/V tensor of logical shape `shape` (int4: the last axis holds 8 logical elements per int32).
OwnedTensor kv_tensor(const CallSpec& s, std::vector<std::int64_t> shape) {
  if (s.quant.format == KvQuant::kInt4) {
    if (shape.back() % 8 != 0) throw std::invalid_argument("int4 K/V needs a last axis that is a multiple of 8");
    shape.back() /= 8;
  }
  return OwnedTensor(kv_dtype(s), std::move(shape));
}

/// One random stored integer of a quantized K/V element.
float random_int(const CallSpec& s, std::mt19937_64& rng) {
  const int hi = s.quant.format == KvQuant::kInt4 ? 7 : 127, lo = s.quant.format == KvQuant::kInt4 ? -8 : -127;
  return static_cast<float>(std::uniform_int_distribution<int>(lo, hi)(rng));
}

/// Garbage at logical element i: kGarbage for floats; the extreme integers, alternating, for
/// int8 (127 / -128) and int4 (7 / -8).
void set_garbage(OwnedTensor& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::I8: set_kv_value(t, i, i % 2 ? -128.0f : 127.0f); break;
    case DType::I32: set_kv_value(t, i, i % 2 ? -8.0f : 7.0f); break;
    default: set_value(t, i, kGarbage); break;
  }
}

/// A random K/V tensor of logical shape `shape`: floats in [-range, range] (as random_tensor), or
/// random stored integers for a quantized spec.
OwnedTensor random_kv(const CallSpec& s, std::vector<std::int64_t> shape, std::mt19937_64& rng) {
  if (!quantized(s)) return random_tensor(s.dtype, std::move(shape), rng, s.value_range);
  OwnedTensor t = kv_tensor(s, std::move(shape));
  std::int64_t n = 1;
  for (auto d : t.shape) n *= d;
  if (t.dtype == DType::I32) n *= 8;
  for (std::int64_t i = 0; i < n; ++i) set_kv_value(t, i, random_int(s, rng));
  return t;
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

/// Where a paged cache put each batch's blocks (for the paged per-token scales of modes 4 and 5).
struct PagedLayout {
  std::vector<std::int32_t> table;  ///< (B, max_blocks), -1 past the used blocks
  std::int64_t max_blocks = 0, block_num = 0;
};

/// The sizes antiquant parameters are shaped and filled by.
struct AntiquantShape {
  std::int64_t B, KVN, P;
  std::int64_t seq;         ///< S' of the per-token modes 1 and 3
  std::int64_t block_size;  ///< modes 4 and 5
  std::vector<std::int64_t> act_kv;
  std::vector<std::int64_t> col_off;  ///< per batch: the first per-token column read
  PagedLayout paged;
};

/// Shape of a mode 0 scale named `form` (AntiquantSpec::channel_shape).
std::vector<std::int64_t> channel_shape(const std::string& form, std::int64_t N, std::int64_t D) {
  if (form == "1N1D") return {1, N, 1, D};
  if (form == "11ND") return {1, 1, N, D};
  if (form == "1ND") return {1, N, D};
  if (form == "1H") return {1, N * D};
  if (form == "N1D") return {N, 1, D};
  if (form == "ND") return {N, D};
  if (form == "H") return {N * D};
  if (form == "1") return {1};
  throw std::invalid_argument("unknown per-channel scale shape " + form);
}

/// The scale and offset of one side (the offset filled only when the spec asks for offsets).
struct SideParams {
  OwnedTensor scale, offset;
};

/// The scale and offset of side `side` (0 key, 1 value; head dim D) in its split shape, filled as
/// AntiquantSpec describes; per-token slots FIA does not read hold large finite garbage.
SideParams side_params(const CallSpec& s, const AntiquantShape& z, int side, std::int64_t D, std::mt19937_64& rng) {
  const AntiquantSpec& q = s.quant;
  const std::int64_t mode = side ? q.value_mode : q.key_mode;
  const float mag = q.format == KvQuant::kInt4 ? 1.0f / 8 : 1.0f / 64;
  std::uniform_real_distribution<float> unit(0.5f, 1.5f), off(-3.0f, 3.0f);
  auto scale_value = [&] { return q.unit_scales ? 1.0f : mag * unit(rng); };
  SideParams r;
  const std::int64_t N = z.KVN, B = z.B;
  if (mode == 0 || mode == 2) {  // query dtype, every element read
    const std::vector<std::int64_t> shape = mode == 2 ? std::vector<std::int64_t>{N} : channel_shape(q.channel_shape, N, D);
    r.scale = OwnedTensor(s.dtype, shape);
    r.offset = OwnedTensor(s.dtype, shape);
    for (std::int64_t i = 0; i < r.scale.numel(); ++i) {
      set_value(r.scale, i, scale_value());
      if (q.offsets) set_value(r.offset, i, off(rng));
    }
    return r;
  }
  // Per-token modes: FLOAT32, garbage first, then the slots read.
  std::vector<std::int64_t> shape;
  switch (mode) {
    case 1: shape = q.token_lead_one && !q.combined ? std::vector<std::int64_t>{1, B, z.seq} : std::vector<std::int64_t>{B, z.seq}; break;
    case 3: shape = {B, N, z.seq}; break;
    case 4: shape = {std::max<std::int64_t>(z.paged.block_num, 1), z.block_size}; break;
    default: shape = {std::max<std::int64_t>(z.paged.block_num, 1), N, z.block_size}; break;
  }
  r.scale = OwnedTensor(DType::F32, shape);
  r.offset = OwnedTensor(DType::F32, shape);
  for (std::int64_t i = 0; i < r.scale.numel(); ++i) {
    set_value(r.scale, i, kGarbageTokenScale);
    set_value(r.offset, i, kGarbageTokenOffset);
  }
  auto put = [&](std::int64_t i) {
    set_value(r.scale, i, scale_value());
    if (q.offsets) set_value(r.offset, i, off(rng));
  };
  const std::int64_t heads = mode == 3 || mode == 5 ? N : 1;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      if (mode == 1 || mode == 3) {
        for (std::int64_t j = 0; j < z.P + z.act_kv[b]; ++j) {
          const std::int64_t col = z.col_off[b] + j;
          if (col < z.seq) put((b * heads + h) * z.seq + col);
        }
        continue;
      }
      if (z.paged.table.empty()) continue;  // modes 4 / 5 without a paged cache: validation says why
      const std::int64_t bs = z.block_size;
      for (std::int64_t t = 0; t < z.act_kv[b]; ++t) {
        const std::int64_t blk = z.paged.table[b * z.paged.max_blocks + t / bs];
        put((blk * heads + h) * bs + t % bs);
      }
    }
  }
  return r;
}

/// Sets the antiquant parameters of a quantized spec: split (key_/value_antiquant_*) or combined
/// (antiquant_scale / antiquant_offset with a leading axis 2, the key first).
void add_antiquant(const CallSpec& s, const AntiquantShape& z, std::int64_t QD, std::int64_t VD, std::mt19937_64& rng,
                   TestCall* call) {
  FiaArgs& a = call->args;
  SideParams k = side_params(s, z, 0, QD, rng), v = side_params(s, z, 1, VD, rng);
  if (!s.quant.combined) {
    a.key_antiquant_mode = s.quant.key_mode;
    a.value_antiquant_mode = s.quant.value_mode;
    a.key_antiquant_scale = call->keep(std::move(k.scale));
    a.value_antiquant_scale = call->keep(std::move(v.scale));
    if (s.quant.offsets) {
      a.key_antiquant_offset = call->keep(std::move(k.offset));
      a.value_antiquant_offset = call->keep(std::move(v.offset));
    }
    return;
  }
  // Combined: (2, key's split shape); the value half is copied as far as it fits.
  auto stack = [&](const OwnedTensor& key, const OwnedTensor& value) {
    std::vector<std::int64_t> shape = key.shape;
    if (shape == std::vector<std::int64_t>{1}) shape.clear();  // per-tensor: (2), not (2, 1)
    shape.insert(shape.begin(), 2);
    OwnedTensor t(key.dtype, shape);
    const std::size_t half = key.bytes.size();
    std::copy(key.bytes.begin(), key.bytes.end(), t.bytes.begin());
    std::copy_n(value.bytes.begin(), std::min(half, value.bytes.size()), t.bytes.begin() + static_cast<std::ptrdiff_t>(half));
    return t;
  };
  a.antiquant_mode = s.quant.key_mode;
  a.antiquant_scale = call->keep(stack(k.scale, v.scale));
  if (s.quant.offsets) a.antiquant_offset = call->keep(stack(k.offset, v.offset));
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
    default: break;
  }
}

void set_kv_value(OwnedTensor& t, std::int64_t i, float v) {
  switch (t.dtype) {
    case DType::I8: t.as<std::int8_t>()[i] = static_cast<std::int8_t>(v); break;
    case DType::I32: {
      auto* w = reinterpret_cast<std::uint32_t*>(t.as<std::int32_t>()) + i / 8;
      const int shift = static_cast<int>(4 * (i % 8));
      const auto nibble = static_cast<std::uint32_t>(static_cast<int>(v)) & 0xFu;
      *w = (*w & ~(0xFu << shift)) | (nibble << shift);
      break;
    }
    default: set_value(t, i, v); break;
  }
}

double kv_value(const TensorView& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::F16: return detail::f16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
    case DType::BF16: return detail::bf16_to_f32(static_cast<const std::uint16_t*>(t.data)[i]);
    case DType::F32: return static_cast<const float*>(t.data)[i];
    case DType::I8: return static_cast<const std::int8_t*>(t.data)[i];
    case DType::I32: {
      const auto w = static_cast<std::uint32_t>(static_cast<const std::int32_t*>(t.data)[i / 8]);
      const int n = static_cast<int>((w >> (4 * (i % 8))) & 0xFu);
      return n >= 8 ? n - 16 : n;
    }
    default: return 0.0;
  }
}

OwnedTensor random_tensor(DType dtype, std::vector<std::int64_t> shape, std::mt19937_64& rng, float range) {
  OwnedTensor t(dtype, std::move(shape));
  std::uniform_real_distribution<float> u(-range, range);
  for (std::int64_t i = 0; i < t.numel(); ++i) set_value(t, i, u(rng));
  return t;
}

const char* antiquant_kind_name(AntiquantKind k) {
  switch (k) {
    case AntiquantKind::kChannel: return "channel";
    case AntiquantKind::kTensor: return "tensor";
    case AntiquantKind::kToken: return "token";
    case AntiquantKind::kHead: return "head";
    case AntiquantKind::kTokenHead: return "token_head";
    case AntiquantKind::kPagedToken: return "paged_token";
    case AntiquantKind::kPagedTokenHead: return "paged_token_head";
    case AntiquantKind::kChannelThenToken: return "channel_token";
  }
  return "?";
}

void set_antiquant(CallSpec& s, KvQuant format, AntiquantKind kind, std::uint64_t variant) {
  std::mt19937_64 rng(variant);
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  auto pick = [&](std::initializer_list<const char*> options) {
    return std::string(*(options.begin() + rng() % options.size()));
  };
  AntiquantSpec& q = s.quant;
  q = AntiquantSpec{};
  q.format = format;
  q.offsets = chance(0.5);
  q.extra_columns = static_cast<std::int64_t>(rng() % 4);
  const bool same_dims = s.v_dim == 0 || s.v_dim == s.qk_dim;
  switch (kind) {
    case AntiquantKind::kChannel:
      q.combined = same_dims && chance(0.3);
      q.channel_shape = q.combined ? pick({"N1D", "1ND", "ND", "H"}) : pick({"1N1D", "11ND", "1ND", "1H", "N1D", "ND", "H"});
      break;
    case AntiquantKind::kTensor:
      q.channel_shape = std::string("1");  // not = "1": GCC 12 -Wrestrict false positive (PR 105329)
      q.combined = chance(0.3);
      break;
    case AntiquantKind::kToken:
      q.key_mode = q.value_mode = 1;
      q.combined = chance(0.3);
      q.token_lead_one = chance(0.4);
      break;
    case AntiquantKind::kHead: q.key_mode = q.value_mode = 2; break;
    case AntiquantKind::kTokenHead: q.key_mode = q.value_mode = 3; break;
    case AntiquantKind::kPagedToken: q.key_mode = q.value_mode = 4; break;
    case AntiquantKind::kPagedTokenHead: q.key_mode = q.value_mode = 5; break;
    case AntiquantKind::kChannelThenToken:
      q.key_mode = 0;
      q.value_mode = 1;
      q.channel_shape = pick({"1N1D", "11ND", "1ND", "1H", "N1D", "ND", "H", "1"});
      q.token_lead_one = chance(0.4);
      break;
  }
}

std::vector<AntiquantKind> antiquant_kinds(const CallSpec& s) {
  std::vector<AntiquantKind> v;
  for (AntiquantKind k : kAntiquantKinds) {
    const bool paged_scale = k == AntiquantKind::kPagedToken || k == AntiquantKind::kPagedTokenHead;
    if (!paged_scale || (s.storage == KvStorage::kPaged && s.prefix_seq == 0)) v.push_back(k);
  }
  return v;
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
