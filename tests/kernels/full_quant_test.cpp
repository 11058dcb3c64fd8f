// Int8 full quantization (FIA-SPEC 13.1, 22.14, 25.1 #12): the scalar steps, the pipeline on hand
// cases (one chunk and two), and the cpu backend against the reference on a sweep over layouts,
// GQA, masks, sparse modes, pse, lengths around the 1024-key chunk, LSE and post-quant, on every
// instruction set, bit for bit across thread counts. Validation: full_quant_rules_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "api/plan_state.hpp"
#include "cpu/full_quant.hpp"
#include "cpu/isa.hpp"
#include "numeric/full_quant.hpp"
#include "support/call_builder.hpp"
#include "support/full_quant_builder.hpp"
#include "support/run_helpers.hpp"
#include "validate/build_problem.hpp"

namespace fia::test {
namespace {

TEST(FullQuantSteps, NineteenBitScalesOf22_14) {
  EXPECT_EQ(detail::truncate_to_19_bits(0.5f), 0.5f);
  EXPECT_EQ(detail::truncate_to_19_bits(0.1f), 0.0999755859375f);
  EXPECT_EQ(detail::truncate_to_19_bits(0.0123f), 0.012298583984375f);
  EXPECT_EQ(detail::truncate_to_19_bits(-0.1f), -0.0999755859375f);
}

TEST(FullQuantSteps, PIsRoundedToFp16ThenHalfToEvenAndSaturated) {
  EXPECT_EQ(detail::quantize_p(0.5f, 127.0f), 64);   // 63.5: a tie, to even
  EXPECT_EQ(detail::quantize_p(0.5f, 125.0f), 62);   // 62.5: a tie, to even
  EXPECT_EQ(detail::quantize_p(1.0f, 127.0f), 127);
  EXPECT_EQ(detail::quantize_p(1.0f, 200.0f), 127);  // saturated
  EXPECT_EQ(detail::quantize_p(1.0f, -300.0f), -128);
  // 0.50048828125 * 127 = 63.562 in fp32, 63.5625 in fp16 -> 64; without the fp16 step also 64
  EXPECT_EQ(detail::quantize_p(0.50048828125f, 127.0f), 64);
  // fp16(0.0039215 * 127 = 0.498) = 0.498 -> 0, and a product that only fp16 makes a tie:
  // 0.003936767578125 * 127 = 0.49997 -> fp16 0.5 -> 0 (even)
  EXPECT_EQ(detail::quantize_p(0.003936767578125f, 127.0f), 0);
  EXPECT_EQ(detail::quantize_p(0.011810302734375f, 127.0f), 2);  // 1.49990 -> fp16 1.5 -> 2
}

TEST(FullQuantSteps, ScoresAreClampedToTheFp16Range) {
  EXPECT_EQ(detail::full_quant_score(1 << 22, 1.0f, 1.0f), 65504.0f);
  EXPECT_EQ(detail::full_quant_score(-(1 << 22), 1.0f, 0.5f), -32752.0f);
  EXPECT_EQ(detail::full_quant_score(1000, 0.001f, 1.0f), 1.0f);
  // fp32 product, then fp16: 3 * 0.1 = 0.3 (fp16 0.2998046875), times 0.125 -> 0.037475585...
  EXPECT_EQ(detail::full_quant_score(3, 0.1f, 0.125f), detail::round_to_f16(detail::round_to_f16(0.3f) * 0.125f));
}

/// One query row over L keys, D = 32: Q = 1 everywhere, K(j) = j % 5 - 2, V(j, d) = (j + d) % 7 - 3.
/// The pipeline written out for it (one chunk or two), against both backends.
TEST(FullQuantPipeline, HandComputedRowOverOneAndTwoChunks) {
  for (std::int64_t L : {5, 1024, 1025, 1500}) {
    const std::int64_t D = 32;
    FullQuantCall call = hand_call(L, D);
    // Expected by hand: scores s(j) = fp16(fp16(32 * (j % 5 - 2) * dq1) * sc16).
    const float dq1 = detail::truncate_to_19_bits(0.01f), sc16 = detail::round_to_f16(0.5f);
    const float q1 = 127.0f, dq2 = detail::truncate_to_19_bits(1.0f / 127.0f);
    std::vector<float> o(D, 0.0f);
    float m = -std::numeric_limits<float>::infinity();
    double l = 0.0;
    for (std::int64_t c0 = 0; c0 < L; c0 += 1024) {
      const std::int64_t c1 = std::min(L, c0 + 1024);
      float mc = -std::numeric_limits<float>::infinity();
      for (std::int64_t j = c0; j < c1; ++j) mc = std::max(mc, detail::full_quant_score(32 * (j % 5 - 2), dq1, sc16));
      const float mn = std::max(m, mc);
      double sum = 0.0;
      std::vector<std::int32_t> acc(D, 0);
      for (std::int64_t j = c0; j < c1; ++j) {
        const float s = detail::full_quant_score(32 * (j % 5 - 2), dq1, sc16);
        sum += std::exp(static_cast<double>(s) - mc);
        const int p = detail::quantize_p(detail::round_to_f16(static_cast<float>(std::exp(double(s) - mn))), q1);
        for (std::int64_t d = 0; d < D; ++d) acc[d] += p * static_cast<int>((j + d) % 7 - 3);
      }
      const double alpha = std::exp(static_cast<double>(m) - mn);
      l = l * alpha + sum * std::exp(static_cast<double>(mc) - mn);
      for (std::int64_t d = 0; d < D; ++d)
        o[d] = c0 == 0 ? acc[d] * dq2
                       : detail::clamp_to_f16(o[d] * detail::round_to_f16(float(alpha)) +
                                              detail::clamp_to_f16(acc[d] * dq2));
      m = mn;
    }
    for (Backend backend : {Backend::kReference, Backend::kCpu}) {
      const Outputs out = run_full_quant(call.call.args, backend, 1);
      ASSERT_EQ(out.attention_out.dtype, DType::F16);
      for (std::int64_t d = 0; d < D; ++d)
        EXPECT_EQ(value_at(out.attention_out, d), detail::round_to_f16(o[d] / detail::clamp_to_f16(float(l))))
            << "L " << L << " d " << d << (backend == Backend::kCpu ? " cpu" : " reference");
      EXPECT_NEAR(out.softmax_lse.as<float>()[0], std::log(l) + m, 1e-5 * std::fabs(std::log(l) + m));
    }
  }
}

/// Differing and compared elements of a comparison.
struct Tally {
  std::int64_t differ = 0, elements = 0;
  void operator+=(const Tally& t) {
    differ += t.differ;
    elements += t.elements;
  }
};

/// Compares the cpu backend with the reference: fp16 outputs within criterion A, int8 outputs
/// within 1 and different only next to a rounding tie; LSE within 1e-5 relative; 1 and 2 threads
/// bit-identical. The two differ where the row sum l (float32 in the cpu backend, float64 in the
/// reference) lies next to an fp16 rounding boundary: rarely, and then in a whole row.
Tally expect_cpu_matches_reference(const FullQuantSpec& fs, std::uint64_t seed, const std::string& what) {
  FullQuantCall fq = build_full_quant_call(fs, seed);
  const Outputs ref = run_full_quant(fq.call.args, Backend::kReference, 1);
  const Outputs cpu = run_full_quant(fq.call.args, Backend::kCpu, 2);
  const Outputs one = run_full_quant(fq.call.args, Backend::kCpu, 1);
  EXPECT_EQ(cpu.attention_out.bytes, one.attention_out.bytes) << what << ": 1 and 2 threads differ";
  EXPECT_EQ(cpu.softmax_lse.bytes, one.softmax_lse.bytes) << what;
  EXPECT_EQ(cpu.attention_out.dtype, fs.int8_out ? DType::I8 : DType::F16);
  const std::int64_t n = cpu.attention_out.numel();
  detail::Problem p;
  EXPECT_TRUE(detail::build_problem(fq.call.args, false, &p).ok());
  detail::ReferenceResult exact;
  if (fs.int8_out) {
    EXPECT_TRUE(reference_exact(fq.call.args, &exact).ok());
  }
  std::int64_t differ = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    const double a = value_at(cpu.attention_out, k), e = value_at(ref.attention_out, k);
    if (a == e) continue;
    ++differ;
    if (!fs.int8_out) {
      EXPECT_LE(std::fabs(a - e), 2.5e-5 + 0.005 * std::fabs(e)) << what << " element " << k;
      continue;
    }
    EXPECT_LE(std::fabs(a - e), 1.0) << what << " element " << k;
    // An int8 element may differ only next to a rounding tie of O * scale + offset (under some
    // head: the layouts place heads differently).
    const auto& pq = p.post_quant;
    const std::int64_t vd = p.v_dim, d = k % vd;
    double best = 1.0;
    for (std::int64_t h = 0; h < p.num_heads; ++h) {
      const std::size_t at = pq.scale.size() == 1 ? 0 : static_cast<std::size_t>(h * vd + d);
      const double y = exact.out[k] * pq.scale[at] + (pq.offset.empty() ? 0.0 : pq.offset[at]);
      best = std::min(best, std::fabs(std::fabs(y - std::floor(y)) - 0.5));
    }
    EXPECT_LT(best, 0x1p-7) << what << " element " << k << ": cpu " << a << ", reference " << e;
  }

  if (fs.spec.lse) {
    const float* a = cpu.softmax_lse.as<float>();
    const float* e = ref.softmax_lse.as<float>();
    for (std::int64_t k = 0; k < cpu.softmax_lse.numel(); ++k) {
      if (std::isinf(e[k])) {
        EXPECT_EQ(a[k], e[k]) << what << " lse " << k;
      } else {
        EXPECT_NEAR(a[k], e[k], 1e-5 * (1.0 + std::fabs(e[k]))) << what << " lse " << k;
      }
    }
  }
  return {differ, n};
}

TEST(FullQuantCpu, MatchesTheReferenceOnASweep) {
  std::uint64_t seed = 100;
  Tally tally;
  int variant = 0;
  for (const char* layout : {"BNSD", "BSH", "BSND", "TND", "BNSD_BSND"})
    for (std::int64_t kv : {37, 1023, 1024, 1025}) {
      FullQuantSpec fs;
      CallSpec& s = fs.spec;
      s.layout = layout;
      s.batch = 2;
      s.num_heads = 4;
      s.num_kv_heads = variant % 2 ? 2 : 1;
      s.q_seq = 5 + variant % 3;
      s.kv_seq = kv;
      s.qk_dim = variant % 4 == 3 ? 48 : 64;
      s.act_kv = std::vector<std::int64_t>{kv, kv - 1 - variant};
      if (std::string(layout) == "TND") s.act_q = std::vector<std::int64_t>{s.q_seq, s.q_seq - 2};
      s.lse = variant % 2 == 0;
      switch (variant % 6) {
        case 1: s.sparse_mode = 3, s.mask = MaskKind::kCompressed; break;
        case 2: s.mask = MaskKind::kFull, s.mask_density = 0.4; break;
        case 3: s.sparse_mode = 4, s.mask = MaskKind::kCompressed, s.pre_tokens = 700, s.next_tokens = 3; break;
        case 4: s.sparse_mode = 2, s.mask = MaskKind::kCompressed; break;
        case 5: s.sparse_mode = 1, s.mask = MaskKind::kFull, s.mask_density = 0.1; break;
        default: break;
      }
      s.pse = variant % 3 == 1 && std::string(layout) != "TND";
      fs.int8_out = variant % 3 != 0;
      fs.per_channel = variant % 2 == 1;
      fs.offset = variant % 4 == 1 && s.mask == MaskKind::kNone;
      tally += expect_cpu_matches_reference(fs, ++seed, std::string(layout) + " kv " + std::to_string(kv) +
                                                               " variant " + std::to_string(variant));
      ++variant;
    }
  EXPECT_EQ(variant, 20);
  EXPECT_GT(tally.elements, 10000);
  EXPECT_LE(tally.differ * 100, tally.elements) << tally.differ << " of " << tally.elements << " elements differ";
}

TEST(FullQuantCpu, EveryStorageForm) {
  // Paged KV (both cache layouts), tensor lists, a shared prefix and left padding: Ascend computes
  // none of them with an int8 query (strict mode rejects them), fia's default mode computes them
  // through the same storage addressing as every other call.
  Tally tally;
  for (int form = 0; form < 5; ++form) {
    FullQuantSpec fs;
    CallSpec& s = fs.spec;
    s.layout = form == 2 ? "BSND" : "BSH";
    s.batch = 3;
    s.num_heads = 4;
    s.num_kv_heads = 2;
    s.q_seq = 6;
    s.kv_seq = 1100;
    s.qk_dim = 32;
    s.act_kv = std::vector<std::int64_t>{1100, 1030, 700};
    s.lse = true;
    s.sparse_mode = form % 2 ? 3 : 0;
    if (s.sparse_mode == 3) s.mask = MaskKind::kCompressed;
    switch (form) {
      case 0: s.storage = KvStorage::kPaged, s.block_size = 128; break;
      case 1: s.storage = KvStorage::kPaged, s.block_size = 64, s.paged_bnbsd = true; break;
      case 2: s.storage = KvStorage::kTensorList; break;
      case 3: s.prefix_seq = 40, s.prefix_len = 33, s.act_kv = std::vector<std::int64_t>{1000, 1030, 700}; break;
      default: s.query_padding = 2, s.kv_padding = 5, s.act_q = std::vector<std::int64_t>{4, 3, 4},
               s.act_kv = std::vector<std::int64_t>{1090, 1030, 700}; break;
    }
    fs.int8_out = form % 2 == 0;
    tally += expect_cpu_matches_reference(fs, 40 + form, "storage form " + std::to_string(form));
  }
  EXPECT_GT(tally.elements, 5000);
  EXPECT_LE(tally.differ * 100, tally.elements) << tally.differ << " of " << tally.elements;
}

TEST(FullQuantCpu, Fp32PseIsRoundedToFp16LikeAnFp16One) {
  // A FLOAT32 pse_shift (accepted in the default mode) is rounded to fp16 by "A + pse (fp16)":
  // the same call with that pse in fp16 gives the same bytes, on both backends.
  FullQuantSpec fs;
  fs.spec.layout = "BNSD";
  fs.spec.num_heads = 2;
  fs.spec.q_seq = 4;
  fs.spec.kv_seq = 50;
  fs.spec.qk_dim = 32;
  fs.spec.pse = true;
  fs.spec.lse = true;
  FullQuantCall half = build_full_quant_call(fs, 13), single = build_full_quant_call(fs, 13);
  const TensorView& pse16 = half.call.args.pse_shift;
  ASSERT_EQ(pse16.dtype, DType::F16);
  OwnedTensor pse32(DType::F32, pse16.shape);
  for (std::int64_t k = 0; k < pse32.numel(); ++k)
    pse32.as<float>()[k] = detail::f16_to_f32(static_cast<const std::uint16_t*>(pse16.data)[k]);
  single.call.args.pse_shift = single.call.keep(std::move(pse32));
  for (Backend backend : {Backend::kReference, Backend::kCpu}) {
    const Outputs a = run_full_quant(half.call.args, backend, 1), b = run_full_quant(single.call.args, backend, 1);
    EXPECT_EQ(a.attention_out.bytes, b.attention_out.bytes) << (backend == Backend::kCpu ? "cpu" : "reference");
    EXPECT_EQ(a.softmax_lse.bytes, b.softmax_lse.bytes);
  }
}

TEST(FullQuantCpu, LongRowsAndEveryIsa) {
  // Chunk boundaries at 1024 and 2048 with a causal mask (chunks a row cannot see are skipped),
  // on every instruction set the machine has, with byte-quad (VNNI) and 16-bit pair products.
  for (const std::string& isa : detail::available_isas())
    for (bool quads : {true, false}) {
      ASSERT_TRUE(detail::force_isa(isa));
      detail::allow_byte_quads(quads);
      FullQuantSpec fs;
      fs.spec.layout = "BSND";
      fs.spec.batch = 1;
      fs.spec.num_heads = 2;
      fs.spec.q_seq = 3;
      fs.spec.kv_seq = 2049;
      fs.spec.qk_dim = 32;
      fs.spec.lse = true;
      fs.int8_out = isa.size() % 2 == 0;
      Tally tally = expect_cpu_matches_reference(fs, 5, isa + " 2049 keys");
      fs.spec.sparse_mode = 3;
      fs.spec.mask = MaskKind::kCompressed;
      fs.spec.q_seq = 1030;
      fs.spec.kv_seq = 1030;
      fs.spec.num_heads = 1;
      tally += expect_cpu_matches_reference(fs, 6, isa + " causal 1030");
      EXPECT_LE(tally.differ * 100, tally.elements) << isa << ": " << tally.differ << " of " << tally.elements;
    }
  detail::allow_byte_quads(true);
  detail::force_isa("");
}

TEST(FullQuantCpu, ByteQuadsAndPairsGiveTheSameBytes) {
  // Both group forms sum the integer products exactly and every instruction set takes the same
  // float steps, so a call gives the same bytes with either form on any of them: each ISA's pairs,
  // and its byte quads where it takes them, against the pairs of the first. P·V groups V's rows 64
  // keys at a time, each word from its G rows (group_value_rows): keys around a group (4), a V tile
  // (64) and a chunk (1024), V dims with a vector tail at 4, 8 and 16 lanes (38, 42) and without
  // (32), the byte -128, paged caches and a shared prefix.
  int variant = 0, quad_runs = 0;
  for (std::int64_t kv : {1, 2, 3, 5, 63, 64, 65, 66, 67, 130, 1025}) {
    FullQuantSpec fs;
    CallSpec& s = fs.spec;
    s.layout = variant % 2 ? "BSND" : "BNSD";
    s.batch = 2;
    s.num_heads = 4;
    s.num_kv_heads = 1 + variant % 2;
    s.q_seq = 1 + variant % 4;
    s.kv_seq = kv;
    s.qk_dim = 32;
    s.v_dim = variant % 3 == 0 ? 38 : variant % 3 == 1 ? 32 : 42;
    s.act_kv = std::vector<std::int64_t>{kv, std::max<std::int64_t>(1, kv - variant % 3)};
    s.lse = true;
    if (variant % 4 == 3) s.storage = KvStorage::kPaged, s.block_size = 16;
    else if (variant % 5 == 4 && kv > 8) s.prefix_seq = 8, s.prefix_len = 5;
    fs.int8_out = s.v_dim == s.qk_dim;  // post-quant needs equal head dims
    FullQuantCall call = build_full_quant_call(fs, 900 + variant);
    for (const TensorView& t : {call.call.args.query, call.call.args.key[0], call.call.args.value[0]})
      put_int8_extremes(t);
    Outputs first;
    bool have_first = false;
    for (const std::string& isa : detail::available_isas()) {
      ASSERT_TRUE(detail::force_isa(isa));
      for (bool quads : {false, true}) {
        if (quads && !detail::kernel_isa_takes_byte_quads()) continue;
        detail::allow_byte_quads(quads);
        const Outputs out = run_full_quant(call.call.args, Backend::kCpu, 2);
        quad_runs += quads;
        if (!have_first) {
          first = out;
          have_first = true;
          continue;
        }
        const std::string what = isa + (quads ? " quads" : " pairs") + " kv " + std::to_string(kv) + " variant " +
                                 std::to_string(variant);
        EXPECT_EQ(out.attention_out.bytes, first.attention_out.bytes) << what;
        EXPECT_EQ(out.softmax_lse.bytes, first.softmax_lse.bytes) << what;
      }
    }
    ++variant;
  }
  detail::allow_byte_quads(true);
  detail::force_isa("");
  EXPECT_EQ(variant, 11);
  if (quad_runs == 0 && !HasFailure()) GTEST_SKIP() << "no instruction set takes byte quads on this CPU: pairs only";
}

TEST(FullQuantCpu, FullyMaskedRowsAreZeroOrQuantizedZero) {
  FullQuantSpec fs;
  fs.spec.layout = "BNSD";
  fs.spec.num_heads = 2;
  fs.spec.q_seq = 6;
  fs.spec.kv_seq = 40;
  fs.spec.qk_dim = 32;
  fs.spec.mask = MaskKind::kFull;
  fs.spec.mask_density = 0.97;  // some rows see nothing
  fs.spec.lse = true;
  for (bool int8 : {false, true}) {
    fs.int8_out = int8;
    fs.offset = int8;
    FullQuantCall fq = build_full_quant_call(fs, 11);
    for (Backend backend : {Backend::kReference, Backend::kCpu}) {
      const Outputs out = run_full_quant(fq.call.args, backend, 2);
      int masked_rows = 0;
      for (std::int64_t r = 0; r < 2 * 6; ++r) {
        if (!std::isinf(out.softmax_lse.as<float>()[r])) continue;
        ++masked_rows;
        for (std::int64_t d = 0; d < 32; ++d) {
          const double want = int8 ? std::nearbyint(fq.offset_value) : 0.0;  // quantize(0) = round(offset)
          EXPECT_EQ(value_at(out.attention_out, r * 32 + d), want) << "row " << r;
        }
      }
      EXPECT_GT(masked_rows, 0);
    }
  }
}

}  // namespace
}  // namespace fia::test
