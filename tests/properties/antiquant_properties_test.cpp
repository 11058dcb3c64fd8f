// KV antiquantization (FIA-SPEC 12) properties: a quantized cache means its dequantized values, and
// every way of storing it or passing its parameters is only a different address of the same
// numbers. Storage and parameter forms must give the cpu backend's output bit for bit; the
// scale and offset indexing is checked here independently of the reference (which shares the
// Problem's indexing with the kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <random>
#include <sstream>

#include "support/call_builder.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

constexpr int kCases = 60;
constexpr float kUnreadScale = 4096.0f;  // per-token slots the converted calls must not read

/// Element (b, h, s, d) of a contiguous BNSD tensor of logical shape (B, H, S, D).
std::int64_t bnsd(const std::vector<std::int64_t>& x, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  return ((b * x[1] + h) * x[2] + s) * x[3] + d;
}

/// A tensor of `dtype` with logical shape `shape` (I32 = packed int4: the last axis / 8).
OwnedTensor kv_like(DType dtype, std::vector<std::int64_t> shape) {
  if (dtype == DType::I32) shape.back() /= 8;
  return OwnedTensor(dtype, std::move(shape));
}

std::vector<std::int64_t> logical_shape(const TensorView& t) {
  std::vector<std::int64_t> s = t.shape;
  if (t.dtype == DType::I32) s.back() *= 8;
  return s;
}

/// Copies logical element si of src to logical element di of dst (any K/V dtype, int4 included).
void copy_kv(OwnedTensor& dst, std::int64_t di, const TensorView& src, std::int64_t si) {
  set_kv_value(dst, di, static_cast<float>(kv_value(src, si)));
}

Outputs run_cpu(const FiaArgs& a, const std::string& what) {
  Outputs o;
  const Status st = run_call(a, Backend::kCpu, 2, &o);
  EXPECT_TRUE(st.ok()) << what << ": " << st.to_string();
  return o;
}

/// "" when x and y hold the same bits, else where they first differ (element of `dtype`) and
/// how many elements differ.
std::string first_difference(const OwnedTensor& x, const OwnedTensor& y) {
  if (x.bytes == y.bytes) return "";
  if (x.bytes.size() != y.bytes.size())
    return "sizes " + std::to_string(x.bytes.size()) + " and " + std::to_string(y.bytes.size());
  const std::size_t es = dtype_size(x.dtype);
  std::int64_t first = -1, count = 0;
  for (std::int64_t e = 0; e < x.numel(); ++e) {
    const auto xb = x.bytes.begin() + static_cast<std::ptrdiff_t>(e * es);
    if (!std::equal(xb, xb + static_cast<std::ptrdiff_t>(es), y.bytes.begin() + static_cast<std::ptrdiff_t>(e * es))) {
      if (first < 0) first = e;
      ++count;
    }
  }
  std::ostringstream os;
  os << std::setprecision(9) << "first differing element " << first << " (" << kv_value(x.view(), first) << " vs "
     << kv_value(y.view(), first) << "), " << count << " of " << x.numel() << " differ";
  return os.str();
}

/// Runs two calls that store the same quantized KV differently; same output and LSE bits.
void expect_same_bits(const FiaArgs& a, const std::string& a_what, const FiaArgs& b, const std::string& b_what,
                      const CallSpec& spec) {
  const Outputs x = run_cpu(a, a_what), y = run_cpu(b, b_what);
  EXPECT_EQ(first_difference(x.attention_out, y.attention_out), "")
      << "attention_out, " << a_what << " vs " << b_what << ": " << describe(spec);
  EXPECT_EQ(first_difference(x.softmax_lse, y.softmax_lse), "")
      << "softmax_lse, " << a_what << " vs " << b_what << ": " << describe(spec);
}

/// A random BNSD int8/int4 call in `storage` with a random kind of antiquant parameters among
/// `kinds` (those the storage admits), masks / pse / sink / sparse modes drawn at random.
CallSpec quant_spec(std::uint64_t seed, KvStorage storage, KvQuant format, std::vector<AntiquantKind> kinds = {}) {
  std::mt19937_64 rng(seed);
  CallSpec s;
  s.layout = "BNSD";
  // F32 too: its output shows every rounding difference that fp16/bf16 outputs would mostly hide.
  s.dtype = seed % 3 == 2 ? DType::F32 : seed % 2 ? DType::BF16 : DType::F16;
  s.batch = 2 + static_cast<std::int64_t>(rng() % 3);
  s.num_kv_heads = 1 + static_cast<std::int64_t>(rng() % 2);
  s.num_heads = s.num_kv_heads * (1 + static_cast<std::int64_t>(rng() % 3));
  s.qk_dim = 16 << (rng() % 3);
  s.q_seq = rng() % 3 == 0 ? 1 : 1 + static_cast<std::int64_t>(rng() % 20);
  s.kv_seq = 1 + static_cast<std::int64_t>(rng() % 90);
  std::vector<std::int64_t> kv(s.batch);
  for (auto& v : kv) v = static_cast<std::int64_t>(rng() % (s.kv_seq + 1));
  s.act_kv = kv;
  s.storage = storage;
  s.block_size = 1 + static_cast<std::int64_t>(rng() % 20);
  s.paged_bnbsd = rng() % 2;
  s.lse = true;
  s.sink = rng() % 3 == 0;
  s.pse = rng() % 3 == 0;
  switch (rng() % 4) {
    case 0: break;
    case 1: s.mask = MaskKind::kFull; s.mask_rank = 4; s.sparse_mode = 1; break;
    case 2: s.mask = MaskKind::kCompressed; s.sparse_mode = s.q_seq > 1 ? 3 : 0; break;
    default:
      s.mask = MaskKind::kCompressed;
      s.sparse_mode = s.q_seq > 1 ? 4 : 0;
      s.pre_tokens = static_cast<std::int64_t>(rng() % 30);
      s.next_tokens = static_cast<std::int64_t>(rng() % 10) - 3;
      break;
  }
  if (s.mask == MaskKind::kCompressed && s.sparse_mode == 0) s.mask = MaskKind::kNone;
  const std::vector<AntiquantKind> allowed = antiquant_kinds(s);
  if (kinds.empty()) kinds = allowed;
  std::vector<AntiquantKind> usable;
  for (AntiquantKind k : kinds)
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) usable.push_back(k);
  set_antiquant(s, format, usable[rng() % usable.size()], rng());
  return s;
}

KvQuant format_of(int i) { return i % 2 ? KvQuant::kInt4 : KvQuant::kInt8; }

/// The split parameters of a call, whichever way it passes them: {scale, offset} per side.
struct Side {
  TensorView scale, offset;
  std::int64_t mode = 0;
};

// ---------------------------------------------------------------------------------------------
// (a) A quantized cache gives the result of its dequantized values: F32 query, the same call with
// F32 K/V holding (x + offset) * scale. Every split mode without storage indirection; the scale
// and offset of (b, h, t, d) are located here from FIA-SPEC 12.3 alone.

/// The scale (or offset) element of side view `t` in `mode` for (b, h, t, d); D the side's head
/// dim, N the KV heads.
double param_at(const TensorView& t, std::int64_t mode, std::int64_t N, std::int64_t D, std::int64_t b, std::int64_t h,
                std::int64_t tok, std::int64_t d) {
  const std::int64_t S = t.shape.back();  // per-token: S'
  std::int64_t i = 0;
  switch (mode) {
    case 0: i = t.numel() == 1 ? 0 : h * D + d; break;  // every per-channel shape is h-major, d-minor
    case 2: i = h; break;
    case 1: i = b * S + tok; break;                     // (B, S') and (1, B, S')
    case 3: i = (b * N + h) * S + tok; break;
    default: ADD_FAILURE() << "mode " << mode; break;
  }
  return kv_value(t, i);
}

class DequantizedEqualsFloat : public ::testing::TestWithParam<int> {};

TEST_P(DequantizedEqualsFloat, WithinF32Rounding) {
  const int i = GetParam();
  std::mt19937_64 rng(static_cast<std::uint64_t>(i) + 500);
  CallSpec spec;
  spec.layout = i % 3 == 0 ? "BSH" : "BNSD";
  spec.dtype = DType::F32;
  spec.batch = 1 + i % 3;
  spec.num_kv_heads = 1 + i % 2;
  spec.num_heads = spec.num_kv_heads * (1 + i % 3);
  spec.qk_dim = i % 4 == 0 ? 64 : 32;
  spec.v_dim = i % 5 == 2 ? 16 : 0;
  spec.q_seq = i % 2 ? 1 : 7;
  spec.kv_seq = 5 + static_cast<std::int64_t>(rng() % 150);
  spec.lse = true;
  spec.sink = i % 4 == 1;
  if (spec.q_seq > 1) {
    spec.mask = MaskKind::kCompressed;
    spec.sparse_mode = 3;
  }
  const AntiquantKind kinds[] = {AntiquantKind::kChannel, AntiquantKind::kTensor, AntiquantKind::kToken,
                                 AntiquantKind::kHead, AntiquantKind::kTokenHead, AntiquantKind::kChannelThenToken};
  set_antiquant(spec, format_of(i / 6), kinds[i % 6], static_cast<std::uint64_t>(i));
  spec.quant.combined = false;
  TestCall q = build_call(spec, static_cast<std::uint64_t>(i));
  const FiaArgs& a = q.args;
  const std::int64_t B = spec.batch, N = spec.num_kv_heads, S = spec.kv_seq;
  const Side sides[2] = {{a.key_antiquant_scale, a.key_antiquant_offset, a.key_antiquant_mode},
                         {a.value_antiquant_scale, a.value_antiquant_offset, a.value_antiquant_mode}};
  TestCall f;
  f.args = a;
  f.args.key_antiquant_scale = f.args.value_antiquant_scale = {};
  f.args.key_antiquant_offset = f.args.value_antiquant_offset = {};
  f.args.key_antiquant_mode = f.args.value_antiquant_mode = 0;
  for (int side = 0; side < 2; ++side) {
    const TensorView& src = side ? a.value[0] : a.key[0];
    const Side& p = sides[side];
    const std::int64_t D = side ? (spec.v_dim ? spec.v_dim : spec.qk_dim) : spec.qk_dim;
    OwnedTensor t(DType::F32, logical_shape(src));
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < N; ++h)
        for (std::int64_t tok = 0; tok < S; ++tok)
          for (std::int64_t d = 0; d < D; ++d) {
            const std::int64_t e = spec.layout == "BSH" ? (b * S + tok) * N * D + h * D + d : ((b * N + h) * S + tok) * D + d;
            const double off = p.offset.present() ? param_at(p.offset, p.mode, N, D, b, h, tok, d) : 0.0;
            const double x = (kv_value(src, e) + off) * param_at(p.scale, p.mode, N, D, b, h, tok, d);
            t.as<float>()[e] = static_cast<float>(x);
          }
    const TensorView kept = f.keep(std::move(t));
    if (side) f.args.value = {kept};
    else f.args.key = {kept};
  }
  // cpu: the int path folds the scales around integer dot products, the float path does not.
  const Outputs x = run_cpu(a, "quantized"), y = run_cpu(f.args, "float");
  const float* xo = x.attention_out.as<float>();
  const float* yo = y.attention_out.as<float>();
  for (std::int64_t e = 0; e < x.attention_out.numel(); ++e)
    ASSERT_NEAR(xo[e], yo[e], 2e-5 + 2e-5 * std::fabs(yo[e])) << "element " << e << " " << describe(spec);
  for (std::int64_t e = 0; e < x.softmax_lse.numel(); ++e)
    ASSERT_NEAR(x.softmax_lse.as<float>()[e], y.softmax_lse.as<float>()[e], 2e-5) << "lse " << e << " " << describe(spec);
  // Reference: exact dequantization against f32-rounded dequantized values.
  detail::ReferenceResult rq, rf;
  ASSERT_TRUE(reference_exact(a, &rq).ok());
  ASSERT_TRUE(reference_exact(f.args, &rf).ok());
  for (std::size_t e = 0; e < rq.out.size(); ++e)
    ASSERT_NEAR(rq.out[e], rf.out[e], 1e-6 + 1e-6 * std::fabs(rf.out[e])) << "element " << e << " " << describe(spec);
}

INSTANTIATE_TEST_SUITE_P(Cases, DequantizedEqualsFloat, ::testing::Range(0, 24));

// ---------------------------------------------------------------------------------------------
// (b) A paged int8/int4 cache equals the contiguous cache of its logical tokens, bit for bit;
// paged scales (modes 4, 5) equal per-token scales (modes 1, 3) of the logical tokens.

/// The contiguous BNSD call (B, KV_N, max_blocks * block_size, D) of a paged call's logical
/// tokens; paged scales (modes 4, 5) become per-token scales (modes 1, 3) of the logical tokens.
TestCall contiguous_of_paged(const CallSpec& spec, const FiaArgs& a) {
  const std::int64_t B = spec.batch, KVN = spec.num_kv_heads ? spec.num_kv_heads : spec.num_heads;
  const std::int64_t D = spec.qk_dim, bs = spec.block_size;
  const std::int64_t MB = a.block_table.shape[1], S = MB * bs;  // the mask/pse width covers this
  const auto* table = static_cast<const std::int32_t*>(a.block_table.data);
  const std::vector<std::int64_t>& act = *a.actual_seq_lengths_kv;
  TestCall flat;
  flat.args = a;
  flat.args.block_table = {};
  flat.args.block_size = 0;
  for (int which = 0; which < 2; ++which) {
    const TensorView& pool = which ? a.value[0] : a.key[0];
    OwnedTensor t = kv_like(pool.dtype, {B, KVN, S, D});
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < KVN; ++h)
        for (std::int64_t tok = 0; tok < act[b]; ++tok)
          for (std::int64_t d = 0; d < D; ++d) {
            const std::int64_t blk = table[b * MB + tok / bs], off = tok % bs;
            const std::int64_t src = spec.paged_bnbsd ? ((blk * KVN + h) * bs + off) * D + d : (blk * bs + off) * KVN * D + h * D + d;
            copy_kv(t, bnsd(logical_shape(t.view()), b, h, tok, d), pool, src);
          }
    const TensorView kept = flat.keep(std::move(t));
    if (which) flat.args.value = {kept};
    else flat.args.key = {kept};
  }
  auto unpage = [&](const TensorView& p, std::int64_t mode) {
    const std::int64_t heads = mode == 5 ? KVN : 1;
    OwnedTensor t(DType::F32, mode == 5 ? std::vector<std::int64_t>{B, KVN, S} : std::vector<std::int64_t>{B, S});
    std::fill(t.as<float>(), t.as<float>() + t.numel(), kUnreadScale);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t tok = 0; tok < act[b]; ++tok) {
          const std::int64_t blk = table[b * MB + tok / bs];
          t.as<float>()[(b * heads + h) * S + tok] = static_cast<const float*>(p.data)[(blk * heads + h) * bs + tok % bs];
        }
    return t;
  };
  if (a.key_antiquant_mode >= 4) {
    const std::int64_t mode = a.key_antiquant_mode;
    flat.args.key_antiquant_mode = flat.args.value_antiquant_mode = mode == 4 ? 1 : 3;
    flat.args.key_antiquant_scale = flat.keep(unpage(a.key_antiquant_scale, mode));
    flat.args.value_antiquant_scale = flat.keep(unpage(a.value_antiquant_scale, mode));
    if (a.key_antiquant_offset.present()) {
      flat.args.key_antiquant_offset = flat.keep(unpage(a.key_antiquant_offset, mode));
      flat.args.value_antiquant_offset = flat.keep(unpage(a.value_antiquant_offset, mode));
    }
  }
  return flat;
}

class PagedEqualsContiguous : public ::testing::TestWithParam<int> {};

TEST_P(PagedEqualsContiguous, BitIdentical) {
  const int i = GetParam();
  std::vector<AntiquantKind> kinds;
  if (i % 3 == 0) kinds = {AntiquantKind::kPagedToken, AntiquantKind::kPagedTokenHead};  // a third paged scales
  const CallSpec spec = quant_spec(static_cast<std::uint64_t>(i), KvStorage::kPaged, format_of(i / 3), kinds);
  TestCall paged = build_call(spec, static_cast<std::uint64_t>(i));
  TestCall flat = contiguous_of_paged(spec, paged.args);
  expect_same_bits(paged.args, "paged", flat.args, "contiguous", spec);
}

// The smallest form of the above that shows value offsets summed per block: one decode row, F32
// (every rounding shows), KV of 40 tokens in blocks of 17, int8 with per-channel scales and
// offsets (mode 0), and the same with per-token offsets (mode 1).
TEST(PagedEqualsContiguousValueOffsets, DecodeAcrossBlockBoundaries) {
  for (const std::int64_t mode : {0, 1}) {
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
      CallSpec s;
      s.layout = "BNSD";
      s.dtype = DType::F32;
      s.kv_seq = 40;
      s.act_kv = std::vector<std::int64_t>{40};
      s.qk_dim = 16;
      s.storage = KvStorage::kPaged;
      s.block_size = 17;
      s.quant.format = KvQuant::kInt8;
      s.quant.key_mode = s.quant.value_mode = mode;
      s.quant.offsets = true;
      TestCall paged = build_call(s, seed);
      TestCall flat = contiguous_of_paged(s, paged.args);
      expect_same_bits(paged.args, "paged", flat.args, "contiguous", s);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PagedEqualsContiguous, ::testing::Range(0, kCases));

// ---------------------------------------------------------------------------------------------
// (c) An int4 cache equals the int8 cache of the same (unpacked) values: the same bits from the
// cpu backend, the same doubles from the reference. With unit scales (the integers themselves)
// and with the random scales.

/// The int8 copy of an int4 tensor (same logical shape).
OwnedTensor unpack(const TensorView& t) {
  OwnedTensor u(DType::I8, logical_shape(t));
  for (std::int64_t e = 0; e < u.numel(); ++e) set_kv_value(u, e, static_cast<float>(kv_value(t, e)));
  return u;
}

class Int4EqualsInt8 : public ::testing::TestWithParam<int> {};

TEST_P(Int4EqualsInt8, SameBitsAndSameReference) {
  const int i = GetParam();
  const KvStorage storage = i % 3 == 0 ? KvStorage::kPaged : i % 3 == 1 ? KvStorage::kTensorList : KvStorage::kContiguous;
  CallSpec spec = quant_spec(static_cast<std::uint64_t>(i) + 1000, storage, KvQuant::kInt4);
  if (i % 4 == 2) {
    spec.prefix_seq = 5;
    spec.prefix_len = 3;
    if (spec.quant.key_mode >= 4) set_antiquant(spec, KvQuant::kInt4, AntiquantKind::kToken, 7);
  }
  spec.quant.unit_scales = i % 2 == 0;
  TestCall c4 = build_call(spec, static_cast<std::uint64_t>(i));
  TestCall c8;
  c8.args = c4.args;
  c8.args.key.clear();
  c8.args.value.clear();
  for (const TensorView& k : c4.args.key) c8.args.key.push_back(c8.keep(unpack(k)));
  for (const TensorView& v : c4.args.value) c8.args.value.push_back(c8.keep(unpack(v)));
  if (c4.args.key_shared_prefix.present()) {
    c8.args.key_shared_prefix = c8.keep(unpack(c4.args.key_shared_prefix));
    c8.args.value_shared_prefix = c8.keep(unpack(c4.args.value_shared_prefix));
  }
  expect_same_bits(c4.args, "int4", c8.args, "int8", spec);
  detail::ReferenceResult r4, r8;
  ASSERT_TRUE(reference_exact(c4.args, &r4).ok()) << describe(spec);
  ASSERT_TRUE(reference_exact(c8.args, &r8).ok()) << describe(spec);
  EXPECT_EQ(r4.out, r8.out) << describe(spec);
  EXPECT_EQ(r4.lse, r8.lse) << describe(spec);
}

INSTANTIATE_TEST_SUITE_P(Seeds, Int4EqualsInt8, ::testing::Range(0, kCases));

// ---------------------------------------------------------------------------------------------
// (d) Combined parameters (antiquant_scale / antiquant_offset, leading axis 2: key, value) equal
// the split parameters of their two halves, bit for bit; and split parameters win over combined
// ones given beside them (FIA-SPEC 12.2).

/// Half `side` of a combined scale or offset as a split view: (2, X...) -> (X...), (2) -> (1).
TensorView half(const TensorView& t, int side) {
  TensorView v = t;
  v.shape.erase(v.shape.begin());
  if (v.shape.empty()) v.shape = {1};
  v.strides.clear();
  v.data = static_cast<const std::byte*>(t.data) + side * t.stride(0) * static_cast<std::int64_t>(dtype_size(t.dtype));
  return v;
}

/// A copy of a combined scale with every element doubled (a different, valid tensor).
OwnedTensor doubled(const TensorView& t) {
  OwnedTensor d(t.dtype, t.shape);
  for (std::int64_t e = 0; e < d.numel(); ++e) set_value(d, e, static_cast<float>(2.0 * kv_value(t, e)));
  return d;
}

class CombinedEqualsSplit : public ::testing::TestWithParam<int> {};

TEST_P(CombinedEqualsSplit, BitIdentical) {
  const int i = GetParam();
  const KvStorage storage = i % 3 == 0 ? KvStorage::kPaged : i % 3 == 1 ? KvStorage::kTensorList : KvStorage::kContiguous;
  const std::vector<AntiquantKind> kinds = {AntiquantKind::kChannel, AntiquantKind::kTensor, AntiquantKind::kToken};
  CallSpec spec = quant_spec(static_cast<std::uint64_t>(i) + 2000, storage, format_of(i), kinds);
  spec.quant.combined = true;
  if (spec.quant.key_mode == 0 && spec.quant.channel_shape != "1") {
    static const char* kForms[] = {"N1D", "1ND", "ND", "H"};
    spec.quant.channel_shape = kForms[i % 4];
  }
  TestCall comb = build_call(spec, static_cast<std::uint64_t>(i));
  const FiaArgs& a = comb.args;
  ASSERT_TRUE(a.antiquant_scale.present()) << describe(spec);
  TestCall split;
  split.args = a;
  split.args.antiquant_scale = split.keep(doubled(a.antiquant_scale));  // ignored: split wins
  split.args.antiquant_offset = {};
  split.args.key_antiquant_mode = split.args.value_antiquant_mode = a.antiquant_mode;
  split.args.key_antiquant_scale = half(a.antiquant_scale, 0);
  split.args.value_antiquant_scale = half(a.antiquant_scale, 1);
  if (a.antiquant_offset.present()) {
    split.args.key_antiquant_offset = half(a.antiquant_offset, 0);
    split.args.value_antiquant_offset = half(a.antiquant_offset, 1);
  }
  expect_same_bits(a, "combined", split.args, "split", spec);
}

INSTANTIATE_TEST_SUITE_P(Seeds, CombinedEqualsSplit, ::testing::Range(0, kCases));

// ---------------------------------------------------------------------------------------------
// (e) Per-token scales follow the physical column under KV left padding (FIA-SPEC 25.1 #8): a
// left-padded call equals the unpadded call whose K/V, per-token scales, masks and pse start at
// column 0.

const std::vector<AntiquantKind> kTokenKinds = {AntiquantKind::kToken, AntiquantKind::kTokenHead,
                                                AntiquantKind::kChannelThenToken};

class LeftPaddingEqualsUnpadded : public ::testing::TestWithParam<int> {};

TEST_P(LeftPaddingEqualsUnpadded, BitIdentical) {
  const int i = GetParam();
  std::mt19937_64 rng(static_cast<std::uint64_t>(i));
  CallSpec spec = quant_spec(static_cast<std::uint64_t>(i) + 3000, KvStorage::kContiguous, format_of(i), kTokenKinds);
  const std::int64_t max_kv = *std::max_element(spec.act_kv->begin(), spec.act_kv->end());
  spec.kv_padding = static_cast<std::int64_t>(rng() % (spec.kv_seq - max_kv + 1));
  if (spec.mask == MaskKind::kFull) spec.mask_batch_broadcast = false;
  spec.pse_batch_broadcast = false;
  if (spec.sparse_mode == 0) spec.pre_tokens = spec.next_tokens = kIntMax;  // padding ignores them
  TestCall pad = build_call(spec, static_cast<std::uint64_t>(i));
  const FiaArgs& a = pad.args;
  const std::int64_t B = spec.batch, KVN = spec.num_kv_heads, KS = spec.kv_seq;
  std::vector<std::int64_t> k0(B);
  for (std::int64_t b = 0; b < B; ++b) k0[b] = KS - *spec.kv_padding - (*spec.act_kv)[b];
  TestCall un;
  un.args = a;
  un.args.kv_padding_size = {};
  auto shift_kv = [&](const TensorView& src) {
    const std::vector<std::int64_t> x = logical_shape(src);
    OwnedTensor t = kv_like(src.dtype, x);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < KVN; ++h)
        for (std::int64_t s = 0; s + k0[b] < KS; ++s)
          for (std::int64_t d = 0; d < x[3]; ++d) copy_kv(t, bnsd(x, b, h, s, d), src, bnsd(x, b, h, s + k0[b], d));
    return t;
  };
  un.args.key = {un.keep(shift_kv(a.key[0]))};
  un.args.value = {un.keep(shift_kv(a.value[0]))};
  // Per-token parameters (F32, last axis S'): shift each batch's rows left by k0[b].
  auto shift_tokens = [&](const TensorView& src, std::int64_t mode) {
    OwnedTensor t(src.dtype, src.shape);
    std::fill(t.as<float>(), t.as<float>() + t.numel(), kUnreadScale);
    const std::int64_t Sp = src.shape.back(), heads = mode == 3 ? KVN : 1;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t s = 0; s + k0[b] < Sp; ++s)
          t.as<float>()[(b * heads + h) * Sp + s] = static_cast<const float*>(src.data)[(b * heads + h) * Sp + s + k0[b]];
    return t;
  };
  auto token_side = [&](TensorView* scale, TensorView* offset, std::int64_t mode) {
    if (mode != 1 && mode != 3) return;
    *scale = un.keep(shift_tokens(*scale, mode));
    if (offset->present()) *offset = un.keep(shift_tokens(*offset, mode));
  };
  if (a.antiquant_scale.present()) {
    ASSERT_EQ(a.antiquant_mode, 1) << describe(spec);  // combined (2, B, S'): shift both halves
    for (const bool offset : {false, true}) {
      const TensorView& src = offset ? a.antiquant_offset : a.antiquant_scale;
      if (!src.present()) continue;
      OwnedTensor both(DType::F32, src.shape);
      const std::int64_t half_n = src.numel() / 2;
      for (int side = 0; side < 2; ++side) {
        TensorView h = src;
        h.shape.erase(h.shape.begin());
        h.data = static_cast<const float*>(src.data) + side * half_n;
        OwnedTensor s = shift_tokens(h, 1);
        std::copy(s.as<float>(), s.as<float>() + half_n, both.as<float>() + side * half_n);
      }
      (offset ? un.args.antiquant_offset : un.args.antiquant_scale) = un.keep(std::move(both));
    }
  } else {
    token_side(&un.args.key_antiquant_scale, &un.args.key_antiquant_offset, a.key_antiquant_mode);
    token_side(&un.args.value_antiquant_scale, &un.args.value_antiquant_offset, a.value_antiquant_mode);
  }
  // Masks and pse are read at physical coordinates: shift their columns too (per batch).
  auto shift_bias = [&](const TensorView& src, std::int64_t heads) {
    OwnedTensor t(src.dtype, src.shape);
    const std::int64_t R = src.shape[src.rank() - 2], C = src.shape[src.rank() - 1];
    const std::size_t es = dtype_size(src.dtype);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t r = 0; r < R; ++r)
          for (std::int64_t c = 0; c + k0[b] < C; ++c)
            std::copy_n(static_cast<const std::byte*>(src.data) + (((b * heads + h) * R + r) * C + c + k0[b]) * es, es,
                        t.bytes.data() + (((b * heads + h) * R + r) * C + c) * es);
    return t;
  };
  if (spec.mask == MaskKind::kFull) un.args.atten_mask = un.keep(shift_bias(a.atten_mask, 1));
  if (spec.pse) un.args.pse_shift = un.keep(shift_bias(a.pse_shift, spec.num_heads));
  expect_same_bits(pad.args, "padded", un.args, "unpadded", spec);
}

INSTANTIATE_TEST_SUITE_P(Seeds, LeftPaddingEqualsUnpadded, ::testing::Range(0, kCases));

// ---------------------------------------------------------------------------------------------
// (f) A shared prefix equals its concatenation before each batch's KV: per-token scales are
// indexed on the prefix-inclusive column axis (FIA-SPEC 25.1 #8), so they stay as they are.
// (g) A tensor list equals the padded contiguous tensor of its batches, scales unchanged.

class PrefixEqualsConcatenation : public ::testing::TestWithParam<int> {};

TEST_P(PrefixEqualsConcatenation, BitIdentical) {
  const int i = GetParam();
  CallSpec spec = quant_spec(static_cast<std::uint64_t>(i) + 4000, KvStorage::kContiguous, format_of(i));
  spec.prefix_seq = 1 + i % 17;
  if (i % 2) spec.prefix_len = i % (spec.prefix_seq + 1);
  TestCall pre = build_call(spec, static_cast<std::uint64_t>(i));
  const FiaArgs& a = pre.args;
  const std::int64_t B = spec.batch, KVN = spec.num_kv_heads, D = spec.qk_dim;
  const std::int64_t P = spec.prefix_len.value_or(spec.prefix_seq), S = spec.kv_seq;
  TestCall cat;
  cat.args = a;
  cat.args.key_shared_prefix = {};
  cat.args.value_shared_prefix = {};
  cat.args.actual_shared_prefix_len.reset();
  std::vector<std::int64_t> kv = *a.actual_seq_lengths_kv;
  for (auto& v : kv) v += P;
  cat.args.actual_seq_lengths_kv = kv;
  for (int which = 0; which < 2; ++which) {
    const TensorView& prefix = which ? a.value_shared_prefix : a.key_shared_prefix;
    const TensorView& own = which ? a.value[0] : a.key[0];
    const std::vector<std::int64_t> x{B, KVN, P + S, D}, px = logical_shape(prefix), ox = logical_shape(own);
    OwnedTensor t = kv_like(own.dtype, x);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < KVN; ++h)
        for (std::int64_t tok = 0; tok < P + S; ++tok)
          for (std::int64_t d = 0; d < D; ++d) {
            if (tok < P) copy_kv(t, bnsd(x, b, h, tok, d), prefix, bnsd(px, 0, h, tok, d));
            else copy_kv(t, bnsd(x, b, h, tok, d), own, bnsd(ox, b, h, tok - P, d));
          }
    const TensorView kept = cat.keep(std::move(t));
    if (which) cat.args.value = {kept};
    else cat.args.key = {kept};
  }
  expect_same_bits(pre.args, "prefix", cat.args, "concatenated", spec);
}

INSTANTIATE_TEST_SUITE_P(Seeds, PrefixEqualsConcatenation, ::testing::Range(0, kCases));

class TensorListEqualsPadded : public ::testing::TestWithParam<int> {};

TEST_P(TensorListEqualsPadded, BitIdentical) {
  const int i = GetParam();
  const CallSpec spec = quant_spec(static_cast<std::uint64_t>(i) + 5000, KvStorage::kTensorList, format_of(i));
  TestCall list = build_call(spec, static_cast<std::uint64_t>(i));
  const FiaArgs& a = list.args;
  const std::int64_t B = spec.batch, KVN = spec.num_kv_heads, D = spec.qk_dim;
  std::int64_t S = 0;
  for (const auto& k : a.key) S = std::max(S, k.shape[2]);
  TestCall flat;
  flat.args = a;
  for (int which = 0; which < 2; ++which) {
    const std::vector<std::int64_t> x{B, KVN, S, D};
    OwnedTensor t = kv_like(a.key[0].dtype, x);
    for (std::int64_t b = 0; b < B; ++b) {
      const TensorView& src = which ? a.value[b] : a.key[b];
      const std::vector<std::int64_t> sx = logical_shape(src);
      for (std::int64_t h = 0; h < KVN; ++h)
        for (std::int64_t tok = 0; tok < sx[2]; ++tok)
          for (std::int64_t d = 0; d < D; ++d) copy_kv(t, bnsd(x, b, h, tok, d), src, bnsd(sx, 0, h, tok, d));
    }
    const TensorView kept = flat.keep(std::move(t));
    if (which) flat.args.value = {kept};
    else flat.args.key = {kept};
  }
  expect_same_bits(list.args, "list", flat.args, "padded", spec);
}

INSTANTIATE_TEST_SUITE_P(Seeds, TensorListEqualsPadded, ::testing::Range(0, kCases));

}  // namespace
}  // namespace fia::test

