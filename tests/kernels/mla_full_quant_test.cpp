// MLA full quantization (FIA-SPEC 13.3): a hand-computed row over one and two 512-key chunks on
// both backends; with unit scales and integer inputs it equals non-quantized MLA within criterion
// A; the cpu backend against the reference on a sweep over heads, query rows, block sizes,
// lengths around the chunk and block boundaries, layouts, LSE and sparse modes, the same bytes on
// every instruction set and thread count. Validation: mla_full_quant_rules_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "cpu/full_quant.hpp"
#include "cpu/isa.hpp"
#include "fia/io/case_dir.hpp"
#include "fia/io/safetensors.hpp"
#include "numeric/full_quant.hpp"
#include "numeric/half.hpp"
#include "support/criterion.hpp"
#include "support/full_quant_builder.hpp"
#include "support/mla_full_quant_builder.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

TEST(MlaFullQuantSteps, PIsRoundedToTheNearestInteger) {
  EXPECT_EQ(detail::quantize_mla_p(1.0), 127);
  EXPECT_EQ(detail::quantize_mla_p(0.0), 0);
  EXPECT_EQ(detail::quantize_mla_p(0.5), 64);  // 63.5: a tie, to even
  EXPECT_EQ(detail::quantize_mla_p(0.0039), 0);   // 0.4953
  EXPECT_EQ(detail::quantize_mla_p(0.0040), 1);   // 0.508
  EXPECT_EQ(detail::quantize_mla_p(0.9961), 127);  // 126.5047
}

/// One query row over L keys, D 512 + rope 64, BNSD contiguous: Q(d) = d % 3 - 1,
/// K(j, d) = (j + d) % 7 - 3, Qrope(d) = 1 - 2 (d % 2), Krope(j, d) = (j + 2d) % 5 - 2;
/// dequant_scale_query 0.25, key scale 0.5, value scale 0.125, scale 0.0625.
MlaFullQuantCall hand_call(std::int64_t L) {
  MlaFullQuantCall c;
  FiaArgs& a = c.call.args;
  a.input_layout = "BNSD";
  a.num_heads = 1;
  a.scale = 0.0625;
  a.softmax_lse_flag = true;
  a.query_quant_mode = 3;
  std::vector<float> q(512), k(L * 512), qr(64), kr(L * 64);
  for (std::int64_t d = 0; d < 512; ++d) q[d] = static_cast<float>(d % 3 - 1);
  for (std::int64_t j = 0; j < L; ++j)
    for (std::int64_t d = 0; d < 512; ++d) k[j * 512 + d] = static_cast<float>((j + d) % 7 - 3);
  for (std::int64_t d = 0; d < 64; ++d) qr[d] = static_cast<float>(1 - 2 * (d % 2));
  for (std::int64_t j = 0; j < L; ++j)
    for (std::int64_t d = 0; d < 64; ++d) kr[j * 64 + d] = static_cast<float>((j + 2 * d) % 5 - 2);
  a.query = c.call.keep(tensor_of(DType::I8, {1, 1, 1, 512}, q));
  a.key = {c.call.keep(tensor_of(DType::I8, {1, 1, L, 512}, k))};
  a.value = {a.key[0]};
  a.query_rope = c.call.keep(tensor_of(DType::BF16, {1, 1, 1, 64}, qr));
  a.key_rope = c.call.keep(tensor_of(DType::BF16, {1, 1, L, 64}, kr));
  a.dequant_scale_query = c.call.keep(tensor_of(DType::F32, {1, 1, 1}, {0.25f}));
  a.key_antiquant_scale = c.call.keep(tensor_of(DType::F32, {1}, {0.5f}));
  a.value_antiquant_scale = c.call.keep(tensor_of(DType::F32, {1}, {0.125f}));
  return c;
}

TEST(MlaFullQuantPipeline, HandComputedRowOverOneAndTwoChunks) {
  for (std::int64_t L : {5, 512, 513, 1100}) {
    // 13.3 written out: S(j) = (Q·K + Qrope·Krope) * 0.25 * 0.5 * 0.0625; per 512-key chunk
    // P = round(127 exp(S - chunk max)), O = sum exp(chunk max - m) P·K / 127 / l * 0.125.
    auto score = [](std::int64_t j) {
      double s = 0.0;
      for (std::int64_t d = 0; d < 512; ++d) s += (d % 3 - 1) * ((j + d) % 7 - 3);
      for (std::int64_t d = 0; d < 64; ++d) s += (1 - 2 * (d % 2)) * ((j + 2 * d) % 5 - 2);
      return s * 0.25 * 0.5 * 0.0625;
    };
    double m = -std::numeric_limits<double>::infinity(), l = 0.0;
    std::vector<double> o(512, 0.0);
    for (std::int64_t c0 = 0; c0 < L; c0 += 512) {
      const std::int64_t c1 = std::min(L, c0 + 512);
      double mc = -std::numeric_limits<double>::infinity();
      for (std::int64_t j = c0; j < c1; ++j) mc = std::max(mc, score(j));
      const double mn = std::max(m, mc);
      double sum = 0.0;
      std::vector<double> pv(512, 0.0);
      for (std::int64_t j = c0; j < c1; ++j) {
        sum += std::exp(score(j) - mc);
        const double p = std::nearbyint(127.0 * std::exp(score(j) - mc));
        for (std::int64_t d = 0; d < 512; ++d) pv[d] += p * ((j + d) % 7 - 3);
      }
      for (std::int64_t d = 0; d < 512; ++d) o[d] = o[d] * std::exp(m - mn) + pv[d] * std::exp(mc - mn) / 127.0;
      l = l * std::exp(m - mn) + sum * std::exp(mc - mn);
      m = mn;
    }
    MlaFullQuantCall c = hand_call(L);
    for (Backend backend : {Backend::kReference, Backend::kCpu}) {
      const Outputs out = run_full_quant(c.call.args, backend, 1);
      ASSERT_EQ(out.attention_out.dtype, DType::BF16);
      for (std::int64_t d = 0; d < 512; ++d) {
        const double want = o[d] / l * 0.125;
        const double got = value_at(out.attention_out, d);
        if (backend == Backend::kReference)
          EXPECT_EQ(got, detail::bf16_to_f32(detail::f64_to_bf16(want))) << "L " << L << " d " << d;
        else
          EXPECT_NEAR(got, want, 1e-4 + std::fabs(want) * 0x1p-8) << "L " << L << " d " << d << " cpu";
      }
      EXPECT_NEAR(out.softmax_lse.as<float>()[0], std::log(l) + m, 1e-5 * (1.0 + std::fabs(std::log(l) + m)));
    }
  }
}

/// The shape of a decode/prefill MLA call over a paged (block_num, 1, block_size, D) cache.
CallSpec mla_spec(const std::string& layout, std::int64_t heads, std::int64_t q_seq, std::int64_t block,
                  std::vector<std::int64_t> act_kv) {
  CallSpec s;
  s.layout = layout;
  s.batch = static_cast<std::int64_t>(act_kv.size());
  s.num_heads = heads;
  s.num_kv_heads = 1;
  s.q_seq = q_seq;
  s.kv_seq = *std::max_element(act_kv.begin(), act_kv.end());
  s.act_kv = act_kv;
  s.qk_dim = 512;
  s.rope_dim = 64;
  s.storage = KvStorage::kPaged;
  s.block_size = block;
  s.paged_bnbsd = true;
  if (layout.rfind("TND", 0) == 0) {
    std::vector<std::int64_t> act_q;
    for (std::size_t b = 0; b < act_kv.size(); ++b)
      act_q.push_back(std::max<std::int64_t>(1, q_seq - static_cast<std::int64_t>(b)));
    s.act_q = act_q;
  }
  return s;
}

TEST(MlaFullQuantProperty, UnitScalesAndIntegersEqualNonQuantizedMla) {
  // With every dequant scale 1 and integer inputs the scores are those of the BF16 MLA call with
  // the same values. The int8 P of 13.3 rounds 127 exp(S - chunk max) by up to 0.5, which alone
  // leaves outputs outside criterion A; with scale 16 distinct scores differ by 16 or more, so P is
  // 127 on the keys at the max and 0 (exp(-16) * 127 < 0.5) elsewhere, as exact as BF16's E.
  const CallSpec specs[] = {mla_spec("BSND", 8, 1, 128, {700, 300}), mla_spec("BSH", 4, 3, 64, {1030}),
                            mla_spec("TND", 16, 2, 128, {513, 96})};
  std::uint64_t seed = 10;
  for (CallSpec s : specs) {
    s.scale = 16.0;
    s.lse = s.layout != "TND";
    if (s.q_seq > 1) s.sparse_mode = 3, s.mask = MaskKind::kCompressed;
    MlaFullQuantCall c = build_mla_full_quant_call(s, ++seed, true);
    detail::ReferenceResult exact;
    ASSERT_TRUE(reference_exact(c.twin.args, &exact).ok()) << describe(s);
    for (Backend backend : {Backend::kReference, Backend::kCpu}) {
      const Outputs out = run_full_quant(c.call.args, backend, 2);
      const Verdict v = criterion_a(out.attention_out, exact.out);
      EXPECT_TRUE(v.pass) << describe(s) << ": " << v.detail;
      if (s.lse) {
        EXPECT_TRUE(lse_match(out.softmax_lse, exact.lse).pass) << describe(s);
      }
    }
  }
}

/// The cpu backend against the reference: criterion A, LSE within 1e-5, 1 and 2 threads
/// bit-identical. Returns the cpu output.
Outputs expect_cpu_matches_reference(const CallSpec& s, std::uint64_t seed) {
  MlaFullQuantCall c = build_mla_full_quant_call(s, seed);
  const Outputs ref = run_full_quant(c.call.args, Backend::kReference, 1);
  const Outputs cpu = run_full_quant(c.call.args, Backend::kCpu, 2);
  const Outputs one = run_full_quant(c.call.args, Backend::kCpu, 1);
  EXPECT_EQ(cpu.attention_out.bytes, one.attention_out.bytes) << describe(s) << ": 1 and 2 threads differ";
  EXPECT_EQ(cpu.softmax_lse.bytes, one.softmax_lse.bytes) << describe(s);
  const Verdict v = criterion_a(cpu.attention_out, to_doubles(ref.attention_out));
  EXPECT_TRUE(v.pass) << describe(s) << ": " << v.detail;
  if (s.lse) {
    const float* a = cpu.softmax_lse.as<float>();
    const float* e = ref.softmax_lse.as<float>();
    for (std::int64_t k = 0; k < cpu.softmax_lse.numel(); ++k) {
      if (std::isinf(e[k])) EXPECT_EQ(a[k], e[k]) << describe(s) << " lse " << k;
      else EXPECT_NEAR(a[k], e[k], 1e-5 * (1.0 + std::fabs(e[k]))) << describe(s) << " lse " << k;
    }
  }
  return cpu;
}

TEST(MlaFullQuantCpu, MatchesTheReferenceOnASweep) {
  struct Case {
    const char* layout;
    std::int64_t heads, q_seq, block;
    std::vector<std::int64_t> act_kv;
  };
  const Case cases[] = {
      {"BSND", 1, 1, 16, {1, 17}},        {"BSH", 2, 1, 128, {127, 128}},    {"BSND", 4, 2, 64, {511, 512}},
      {"TND", 8, 4, 128, {513, 129}},     {"BSH", 16, 1, 512, {1024, 1025}}, {"BSND_NBSD", 32, 3, 32, {600}},
      {"TND_NTD", 64, 1, 128, {255, 3}},  {"BSH_NBSD", 128, 1, 128, {530}},  {"BSND", 2, 16, 256, {1040}},
      {"BSND", 8, 7, 128, {5}},  // causal with fewer keys than query rows: fully masked rows
  };
  std::uint64_t seed = 100;
  int variant = 0;
  for (const Case& k : cases) {
    CallSpec s = mla_spec(k.layout, k.heads, k.q_seq, k.block, k.act_kv);
    s.lse = variant % 2 == 0 && std::string(k.layout).rfind("TND", 0) != 0;
    if (k.q_seq > 1 && variant % 3 != 2) s.sparse_mode = 3, s.mask = MaskKind::kCompressed;
    expect_cpu_matches_reference(s, ++seed);
    ++variant;
  }
}

// pse_shift (8.1) is added to the dequantized scores after scaling, as in every other path: a
// random pse matches the reference; a zero pse changes nothing; a pse of -inf excludes its key like
// a mask (25.1 #24-25). Not on the NPU (strict mode rejects pse with rope).
TEST(MlaFullQuantCpu, PseIsAddedAfterScaling) {
  CallSpec s = mla_spec("BSND", 4, 2, 128, {300, 700});
  s.pse = true;
  s.lse = true;
  expect_cpu_matches_reference(s, 31);
  s.pse = false;
  MlaFullQuantCall plain = build_mla_full_quant_call(s, 32);
  const FiaArgs& a = plain.call.args;
  const std::int64_t B = 2, N = 4, Q = 2, W = a.block_table.shape[1] * s.block_size;
  std::vector<float> zeros(static_cast<std::size_t>(B * N * Q * W), 0.0f), cut = zeros;
  std::vector<float> mask(static_cast<std::size_t>(B * Q * W), 0.0f);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Q; ++i)
      for (std::int64_t j = 5 + i; j < W; j += 7) {  // every 7th key from 5 + i, for every head
        mask[static_cast<std::size_t>((b * Q + i) * W + j)] = 1.0f;
        for (std::int64_t n = 0; n < N; ++n)
          cut[static_cast<std::size_t>(((b * N + n) * Q + i) * W + j)] = -std::numeric_limits<float>::infinity();
      }
  TestCall zero_pse, inf_pse, masked;
  for (TestCall* t : {&zero_pse, &inf_pse, &masked}) t->args = a;
  zero_pse.args.pse_shift = zero_pse.keep(tensor_of(DType::F16, {B, N, Q, W}, zeros));
  inf_pse.args.pse_shift = inf_pse.keep(tensor_of(DType::F16, {B, N, Q, W}, cut));
  masked.args.atten_mask = masked.keep(tensor_of(DType::I8, {B, Q, W}, mask));
  for (Backend backend : {Backend::kReference, Backend::kCpu}) {
    const Outputs none = run_full_quant(a, backend, 2);
    const Outputs zero = run_full_quant(zero_pse.args, backend, 2);
    EXPECT_EQ(zero.attention_out.bytes, none.attention_out.bytes);
    EXPECT_EQ(zero.softmax_lse.bytes, none.softmax_lse.bytes);
    const Outputs excluded = run_full_quant(inf_pse.args, backend, 2);
    const Outputs mask_out = run_full_quant(masked.args, backend, 2);
    EXPECT_EQ(excluded.attention_out.bytes, mask_out.attention_out.bytes);
    EXPECT_EQ(excluded.softmax_lse.bytes, mask_out.softmax_lse.bytes);
    EXPECT_NE(excluded.attention_out.bytes, none.attention_out.bytes);
  }
}

TEST(MlaFullQuantCpu, SameBytesOnEveryIsaAndProduct) {
  // VNNI byte quads and 16-bit pairs give the same exact integers; the f32 steps round alike.
  CallSpec s = mla_spec("BSND", 16, 2, 128, {1100});
  s.sparse_mode = 3;
  s.mask = MaskKind::kCompressed;
  s.lse = true;
  const Outputs first = expect_cpu_matches_reference(s, 7);
  MlaFullQuantCall c = build_mla_full_quant_call(s, 7);
  for (const std::string& isa : detail::available_isas())
    for (bool quads : {true, false}) {
      ASSERT_TRUE(detail::force_isa(isa));
      detail::allow_byte_quads(quads);
      const Outputs out = run_full_quant(c.call.args, Backend::kCpu, 2);
      EXPECT_EQ(out.attention_out.bytes, first.attention_out.bytes) << isa << (quads ? " quads" : " pairs");
      EXPECT_EQ(out.softmax_lse.bytes, first.softmax_lse.bytes) << isa << (quads ? " quads" : " pairs");
    }
  detail::allow_byte_quads(true);
  detail::force_isa("");
}

TEST(MlaFullQuantCpu, FullyMaskedRowsAreZeroAndInfinity) {
  // Causal (sparse 3) with 3 keys and 6 query rows: rows 0-2 see nothing.
  CallSpec s = mla_spec("BSND", 2, 6, 16, {3});
  s.sparse_mode = 3;
  s.mask = MaskKind::kCompressed;
  s.lse = true;
  MlaFullQuantCall c = build_mla_full_quant_call(s, 5);
  for (Backend backend : {Backend::kReference, Backend::kCpu}) {
    const Outputs out = run_full_quant(c.call.args, backend, 1);
    for (std::int64_t i = 0; i < 6; ++i)
      for (std::int64_t n = 0; n < 2; ++n) {
        const float lse = out.softmax_lse.as<float>()[n * 6 + i];
        EXPECT_EQ(std::isinf(lse), i < 3) << "row " << i;
        if (i < 3) {
          for (std::int64_t d = 0; d < 512; ++d) EXPECT_EQ(value_at(out.attention_out, (i * 2 + n) * 512 + d), 0.0);
        }
      }
  }
}

/// A rank-5 NZ paged cache (block_num, KV_N, D / D0, block_size, D0) re-laid as the ND
/// (block_num, KV_N, block_size, D) cache with the same tokens: K[b][h][t][d] = K_nz[b][h][d /
/// D0][t][d % D0].
OwnedTensor nz_to_nd(const TensorView& nz) {
  const auto& s = nz.shape;
  const std::int64_t blocks = s[0], heads = s[1], tiles = s[2], bs = s[3], d0 = s[4], es = dtype_size(nz.dtype);
  OwnedTensor nd(nz.dtype, {blocks, heads, bs, tiles * d0});
  const auto* src = static_cast<const std::byte*>(nz.data);
  for (std::int64_t b = 0; b < blocks * heads; ++b)
    for (std::int64_t x = 0; x < tiles; ++x)
      for (std::int64_t t = 0; t < bs; ++t)
        std::memcpy(nd.bytes.data() + ((b * bs + t) * tiles * d0 + x * d0) * es,
                    src + (((b * tiles + x) * bs + t) * d0) * es, static_cast<std::size_t>(d0 * es));
  return nd;
}

TEST(MlaFullQuantSharedCases, NzCachesAndTheNdCachePassOnBothBackends) {
  // The shared MLA full-quant cases (../shared/cases/quant) use NZ caches; read as given and with
  // the same tokens re-laid in the ND layout, both backends must give the expected answers.
  namespace fs = std::filesystem;
  const fs::path root = fs::path(FIA_SHARED_DIR) / "cases" / "quant";
  if (!fs::is_directory(root)) GTEST_SKIP() << "no shared cases at " << root;
  int cases = 0;
  for (const auto& e : fs::directory_iterator(root)) {
    io::Case c;
    ASSERT_TRUE(io::load_case(e.path().string(), &c).ok()) << e.path();
    const FiaArgs& nz = c.args;
    if (nz.query.dtype != DType::I8 || !nz.query_rope.present() || nz.key[0].rank() != 5) continue;
    std::vector<OwnedTensor> tensors;
    tensors.push_back(nz_to_nd(nz.key[0]));
    tensors.push_back(nz_to_nd(nz.key_rope));
    FiaArgs nd = nz;
    nd.key = {tensors[0].view()};
    nd.value = {tensors[0].view()};
    nd.key_rope = tensors[1].view();
    io::TensorFile want;
    ASSERT_TRUE(io::read_safetensors((e.path() / "expected.safetensors").string(), &want).ok());
    for (const FiaArgs* a : {&nz, static_cast<const FiaArgs*>(&nd)})
      for (Backend backend : {Backend::kReference, Backend::kCpu}) {
        const Outputs out = run_full_quant(*a, backend, 2);
        const Verdict v = criterion_a(out.attention_out, to_doubles(want.tensors.at("attention_out")));
        EXPECT_TRUE(v.pass) << e.path().filename() << (a == &nz ? " NZ: " : " ND: ") << v.detail;
        if (a->softmax_lse_flag) {
          EXPECT_TRUE(lse_match(out.softmax_lse, to_doubles(want.tensors.at("softmax_lse"))).pass) << e.path();
        }
      }
    ++cases;
  }
  EXPECT_GE(cases, 7);
}

}  // namespace
}  // namespace fia::test
