#include "support/antiquant_builder.hpp"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>

#include "numeric/half.hpp"
#include "support/call_builder.hpp"

namespace fia::test {
namespace builder_internal {

namespace {

// Per-token antiquant scale and offset slots FIA must never read: finite, but far off the O(1/64)
// scales, so that reading one shows.
constexpr float kGarbageTokenScale = 4096.0f;
constexpr float kGarbageTokenOffset = 1000.0f;

/// The stored K/V element type: the query dtype, I8, or I32 (packed int4).
DType kv_dtype(const CallSpec& s) {
  switch (s.quant.format) {
    case KvQuant::kInt8: return DType::I8;
    case KvQuant::kInt4: return DType::I32;
    default: return s.dtype;
  }
}

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

}  // namespace

bool quantized(const CallSpec& s) { return s.quant.format != KvQuant::kNone; }

OwnedTensor kv_tensor(const CallSpec& s, std::vector<std::int64_t> shape) {
  if (s.quant.format == KvQuant::kInt4) {
    if (shape.back() % 8 != 0) throw std::invalid_argument("int4 K/V needs a last axis that is a multiple of 8");
    shape.back() /= 8;
  }
  return OwnedTensor(kv_dtype(s), std::move(shape));
}

float random_int(const CallSpec& s, std::mt19937_64& rng) {
  const int hi = s.quant.format == KvQuant::kInt4 ? 7 : 127, lo = s.quant.format == KvQuant::kInt4 ? -8 : -127;
  return static_cast<float>(std::uniform_int_distribution<int>(lo, hi)(rng));
}

OwnedTensor random_kv(const CallSpec& s, std::vector<std::int64_t> shape, std::mt19937_64& rng) {
  if (!quantized(s)) return random_tensor(s.dtype, std::move(shape), rng, s.value_range);
  OwnedTensor t = kv_tensor(s, std::move(shape));
  std::int64_t n = 1;
  for (auto d : t.shape) n *= d;
  if (t.dtype == DType::I32) n *= 8;
  for (std::int64_t i = 0; i < n; ++i) set_kv_value(t, i, random_int(s, rng));
  return t;
}

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

}  // namespace builder_internal

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

}  // namespace fia::test
