// KV antiquantization (FIA-SPEC 12) storage properties: a paged cache, KV left padding, a shared
// prefix and a tensor list are only different addresses of the same quantized numbers (scales and
// offsets included) and give the cpu backend's output bit for bit. Helpers and the common
// premise: antiquant_properties.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "properties/antiquant_properties.hpp"
#include "support/call_builder.hpp"

namespace fia::test {
namespace {

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

/// Copies logical element si of src to logical element di of dst (any K/V dtype, int4 included).
void copy_kv(OwnedTensor& dst, std::int64_t di, const TensorView& src, std::int64_t si) {
  set_kv_value(dst, di, static_cast<float>(kv_value(src, si)));
}

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
