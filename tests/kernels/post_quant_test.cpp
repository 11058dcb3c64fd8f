// Post-quantization of fp16/bf16 attention to int8 (FIA-SPEC 14, 25.1 #3): the formulas on the
// worked examples of 22.13, cpu against the float64 reference on a sweep (equal except next to a
// rounding tie of the exact value, and within 1 everywhere), the rows that become quantize(0) or
// stay 0, the golden switch, and thread independence. Validation rules: post_quant_rules_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "api/plan_state.hpp"
#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "numeric/post_quant.hpp"
#include "reference/reference.hpp"
#include "support/call_builder.hpp"

namespace fia::test {
namespace {

using detail::post_quant_device;
using detail::post_quant_golden;

TEST(PostQuantFormula, WorkedExamplesOf22_13) {
  EXPECT_EQ(post_quant_golden(1.2345f, 10.0f, 0.5f), 13);
  EXPECT_EQ(post_quant_device(1.2345f, 10.0f, 0.5f), 13);
  EXPECT_EQ(post_quant_golden(0.25f, 10.0f, 0.0f), 2);  // the tie 2.5: half to even
  EXPECT_EQ(post_quant_device(0.25f, 10.0f, 0.0f), 3);  // half away from zero
  EXPECT_EQ(post_quant_golden(0.35f, 10.0f, 0.0f), 4);
  EXPECT_EQ(post_quant_device(0.35f, 10.0f, 0.0f), 4);  // fp32 3.4999998 -> fp16 3.5 -> 4
  EXPECT_EQ(post_quant_golden(-20.0f, 10.0f, 0.0f), -128);
  EXPECT_EQ(post_quant_device(-20.0f, 10.0f, 0.0f), -128);
  EXPECT_EQ(post_quant_golden(30.0f, 10.0f, 0.0f), 127);
  EXPECT_EQ(post_quant_device(30.0f, 10.0f, 0.0f), 127);
  EXPECT_EQ(post_quant_device(-0.25f, 10.0f, 0.0f), -3);
  EXPECT_EQ(post_quant_golden(-0.25f, 10.0f, 0.0f), -2);
  EXPECT_EQ(post_quant_device(std::nanf(""), 1.0f, 0.0f), 0);
}

TEST(PostQuantFormula, Fp16RoundingTiesAwayFromZero) {
  // 2049 lies halfway between the fp16 values 2048 and 2050.
  EXPECT_EQ(detail::round_to_f16_ties_away(2049.0f), 2050.0f);
  EXPECT_EQ(detail::round_to_f16_ties_away(-2049.0f), -2050.0f);
  EXPECT_EQ(detail::round_to_f16(2049.0f), 2048.0f);  // ties to even
  EXPECT_EQ(detail::round_to_f16_ties_away(2049.5f), 2050.0f);
  EXPECT_EQ(detail::round_to_f16_ties_away(2048.5f), 2048.0f);
  EXPECT_EQ(detail::round_to_f16_ties_away(1.0f + 0x1p-11f), 1.0f + 0x1p-10f);
  EXPECT_EQ(detail::round_to_f16_ties_away(0.3f), detail::round_to_f16(0.3f));
}

/// The device formula written out step by step (fp16 conversion with ties away from zero, then
/// std::round): the oracle of the bit-level post_quant_device.
std::int8_t device_by_steps(float o, float scale, float offset) {
  const float product = o * scale;
  const float y = product + offset;
  return detail::saturate_int8(std::round(detail::round_to_f16_ties_away(y)));
}

TEST(PostQuantFormula, DeviceFormulaEqualsItsStepByStepDefinition) {
  // Every fp16 midpoint in [2^-15, 512] (and its float neighbours), both signs, and random values.
  std::int64_t checked = 0;
  for (std::uint32_t h = 0x0200; h < 0x6000; ++h) {  // fp16 magnitudes up to 512
    const float a = detail::f16_to_f32(static_cast<std::uint16_t>(h));
    const float b = detail::f16_to_f32(static_cast<std::uint16_t>(h + 1));
    const float mid = a + (b - a) / 2;
    for (float y : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), a, b})
      for (float sgn : {1.0f, -1.0f}) {
        ASSERT_EQ(post_quant_device(sgn * y, 1.0f, 0.0f), device_by_steps(sgn * y, 1.0f, 0.0f)) << sgn * y;
        ++checked;
      }
  }
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> o(-3.0f, 3.0f), scale(0.5f, 200.0f), offset(-5.0f, 5.0f);
  for (int i = 0; i < 2000000; ++i) {
    const float x = o(rng), s = scale(rng), f = offset(rng);
    ASSERT_EQ(post_quant_device(x, s, f), device_by_steps(x, s, f)) << x << " " << s << " " << f;
  }
  for (float y : {0.0f, -0.0f, 1e-30f, 0x1p-14f, 0.5f, -0.5f, 127.49f, 127.5f, -128.5f, -129.0f, 1e30f, -1e30f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})
    EXPECT_EQ(post_quant_device(y, 1.0f, 0.0f), device_by_steps(y, 1.0f, 0.0f)) << y;
  EXPECT_GT(checked, 100000);
}

TEST(PostQuantFormula, SimdRowEqualsTheScalarFormulaOnEveryIsa) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> o(-2.0f, 2.0f), scale(0.5f, 80.0f), offset(-5.0f, 5.0f);
  std::vector<float> src(4099), sc(4099), of(4099);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = o(rng), sc[i] = scale(rng), of[i] = offset(rng);
  // specials (NaN, infinities, zeros, tiny) and, from element 1000 on, fp16 midpoints with scale 1
  // and offset 0: the ties of the fp16 and the integer rounding.
  const float specials[] = {std::nanf(""), std::numeric_limits<float>::infinity(), -1e30f, 0.0f, -0.0f, 1e-30f};
  for (std::size_t i = 0; i < std::size(specials); ++i) src[i * 7] = specials[i];
  for (std::size_t i = 1000; i < src.size(); ++i) {
    const auto h = static_cast<std::uint16_t>(0x3000 + (i - 1000) * 5);  // fp16 magnitudes 0.125 .. ~1600
    const float a = detail::f16_to_f32(h), b = detail::f16_to_f32(static_cast<std::uint16_t>(h + 1));
    src[i] = (i % 2 ? -1.0f : 1.0f) * (a + (b - a) / 2);
    sc[i] = 1.0f;
    of[i] = 0.0f;
  }
  for (const std::string& isa : detail::available_isas()) {
    ASSERT_TRUE(detail::force_isa(isa));
    for (std::int64_t n : {1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 129, 4099})
      for (bool channel : {false, true})
        for (bool with_offset : {false, true}) {
          std::vector<std::int8_t> got(static_cast<std::size_t>(n));
          detail::post_quant_device_row(src.data(), sc.data(), with_offset ? of.data() : nullptr, channel, n,
                                        got.data());
          for (std::int64_t d = 0; d < n; ++d) {
            const float s = channel ? sc[d] : sc[0], f = with_offset ? (channel ? of[d] : of[0]) : 0.0f;
            ASSERT_EQ(got[d], post_quant_device(src[d], s, f)) << isa << " n " << n << " d " << d << " x " << src[d];
          }
        }
  }
  detail::force_isa("");
}

/// Element (n, d) of a post-quant scale or offset table: one value (per-tensor), Q_N * V_D
/// (per-channel, n * V_D + d), or none (no offset: 0).
float at(const std::vector<float>& table, std::int64_t n, std::int64_t d, std::int64_t vd) {
  if (table.empty()) return 0.0f;
  return table.size() == 1 ? table[0] : table[static_cast<std::size_t>(n * vd + d)];
}

/// Adds quant_scale2 (and quant_offset2) to a call: per-tensor, or per-channel (Q_N, V_D).
void add_post_quant(TestCall& call, const CallSpec& spec, bool per_channel, bool offset, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> scale(20.0f, 120.0f), shift(-3.0f, 3.0f);
  const std::int64_t n = per_channel ? spec.num_heads * (spec.v_dim ? spec.v_dim : spec.qk_dim) : 1;
  OwnedTensor s(DType::F32, per_channel ? std::vector<std::int64_t>{spec.num_heads, n / spec.num_heads}
                                        : std::vector<std::int64_t>{1});
  OwnedTensor o(DType::F32, s.shape);
  for (std::int64_t i = 0; i < n; ++i) {
    s.as<float>()[i] = scale(rng);
    o.as<float>()[i] = shift(rng);
  }
  call.args.quant_scale2 = call.keep(std::move(s));
  if (offset) call.args.quant_offset2 = call.keep(std::move(o));
}

Outputs run_call(const FiaArgs& args, Backend backend, int threads = 2,
                 PostQuantRounding rounding = PostQuantRounding::kDevice, Plan* plan_out = nullptr) {
  Options o;
  o.backend = backend;
  o.threads = threads;
  o.post_quant_rounding = rounding;
  Plan pl;
  const Status st = fia::plan(args, o, &pl);
  EXPECT_TRUE(st.ok()) << st.to_string();
  Outputs out;
  if (!st.ok()) return out;
  out.attention_out = OwnedTensor(pl.attention_out_dtype(), pl.attention_out_shape());
  out.softmax_lse = OwnedTensor(DType::F32, pl.softmax_lse_shape());
  std::vector<std::byte> ws(pl.workspace_bytes());
  EXPECT_TRUE(fia::run(pl, out.attention_out.mutable_view(), out.softmax_lse.mutable_view(), ws.data(), ws.size()).ok());
  if (plan_out) *plan_out = pl;
  return out;
}

TEST(PostQuant, CpuMatchesTheReferenceExceptNextToATie) {
  // Layouts, GQA, masks and sparse modes, lengths, per-tensor / per-channel, with and without an
  // offset, fp16 and bf16, int8 K/V antiquant in decode, both formulas. A cpu element may differ from the reference's only when
  // the reference's exact y = O * scale + offset is within 2^-8 of a rounding boundary (x.5).
  int cases = 0, elements = 0, near_tie = 0;
  std::uint64_t seed = 7;
  for (const char* layout : {"BNSD", "BSH", "BSND", "TND", "BNSD_BSND"})
    for (DType dtype : {DType::F16, DType::BF16})
      for (int variant = 0; variant < 4; ++variant) {
        CallSpec spec;
        spec.layout = layout;
        spec.dtype = dtype;
        spec.batch = 2;
        spec.num_heads = 4;
        spec.num_kv_heads = variant % 2 ? 2 : 4;
        spec.q_seq = variant == 3 ? 1 : 9;
        spec.kv_seq = 40 + 13 * variant;
        spec.qk_dim = 32;
        spec.act_kv = std::vector<std::int64_t>{spec.kv_seq, spec.kv_seq - 7};
        if (std::string(layout) == "TND") spec.act_q = std::vector<std::int64_t>{spec.q_seq, spec.q_seq - 1};
        if (variant == 2) {
          spec.sparse_mode = 3;
          spec.mask = MaskKind::kCompressed;
        } else if (variant == 1) {
          spec.mask = MaskKind::kFull;
          spec.mask_density = 0.3;
        }
        if (variant == 3 && std::string(layout) != "TND") {  // decode over int8 K/V (12 with 14)
          spec.quant.format = KvQuant::kInt8;
          spec.quant.offsets = true;
        }
        const bool per_channel = variant >= 2, offset = variant != 1;
        TestCall call = build_call(spec, ++seed);
        add_post_quant(call, spec, per_channel, offset, seed);
        for (PostQuantRounding rounding : {PostQuantRounding::kDevice, PostQuantRounding::kGolden}) {
          Plan ref_plan;
          const Outputs ref = run_call(call.args, Backend::kReference, 1, rounding, &ref_plan);
          const Outputs cpu = run_call(call.args, Backend::kCpu, 2, rounding);
          ASSERT_EQ(cpu.attention_out.dtype, DType::I8) << describe(spec);
          ASSERT_EQ(cpu.attention_out.bytes.size(), ref.attention_out.bytes.size());
          const detail::Problem& p = ref_plan.state().problem;
          const detail::ReferenceResult exact = detail::reference_compute(p);  // float64 O
          const auto* a = cpu.attention_out.as<std::int8_t>();
          const auto* e = ref.attention_out.as<std::int8_t>();
          const std::int64_t vd = p.v_dim, numel = cpu.attention_out.numel();
          for (std::int64_t k = 0; k < numel; ++k) {
            ++elements;
            if (a[k] == e[k]) continue;
            ASSERT_LE(std::abs(a[k] - e[k]), 1) << describe(spec) << " element " << k;
            // the element's head: out layouts BNSD (n before s), BSND/BSH (n after s), TND
            const std::int64_t d = k % vd;
            double best = 1.0;
            for (std::int64_t n = 0; n < p.num_heads; ++n) {  // the boundary distance under any head
              const double y = exact.out[k] * at(p.post_quant.scale, n, d, vd) + at(p.post_quant.offset, n, d, vd);
              best = std::min(best, std::fabs(std::fabs(y - std::floor(y)) - 0.5));
            }
            EXPECT_LT(best, 0x1p-8) << describe(spec) << " element " << k << ": cpu " << int(a[k]) << ", reference "
                                    << int(e[k]);
            ++near_tie;
          }
          ++cases;
        }
      }
  EXPECT_EQ(cases, 80);
  EXPECT_LT(near_tie * 100, elements) << near_tie << " of " << elements << " elements differ";
}

/// A BNSD call whose rows are fully masked, never computed or ordinary, with value all 0.25 and
/// a zero query: every computed row is exactly 0.25 (equal scores, E = 1).
struct RowKinds {
  TestCall call;
  static constexpr std::int64_t kQ = 3, kKv = 5, kD = 16;
};

RowKinds row_kinds(std::int64_t q_seq, std::vector<std::int64_t> act_q, std::vector<std::int64_t> act_kv,
                   bool mask_first_row) {
  RowKinds r;
  const std::int64_t B = static_cast<std::int64_t>(act_q.size());
  OwnedTensor q(DType::F16, {B, 1, q_seq, RowKinds::kD}), k(DType::F16, {B, 1, RowKinds::kKv, RowKinds::kD});
  OwnedTensor v(DType::F16, {B, 1, RowKinds::kKv, RowKinds::kD});
  for (std::int64_t i = 0; i < k.numel(); ++i) set_value(k, i, 0.5f);
  for (std::int64_t i = 0; i < v.numel(); ++i) set_value(v, i, 0.25f);
  r.call.args.query = r.call.keep(std::move(q));
  r.call.args.key = {r.call.keep(std::move(k))};
  r.call.args.value = {r.call.keep(std::move(v))};
  r.call.args.input_layout = "BNSD";
  r.call.args.actual_seq_lengths = act_q;
  r.call.args.actual_seq_lengths_kv = act_kv;
  if (mask_first_row) {
    OwnedTensor m(DType::Bool, {B, 1, q_seq, RowKinds::kKv});
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < RowKinds::kKv; ++j) m.as<std::uint8_t>()[b * q_seq * RowKinds::kKv + j] = 1;
    r.call.args.atten_mask = r.call.keep(std::move(m));
  }
  OwnedTensor s(DType::F32, {1});
  s.as<float>()[0] = 10.0f;  // 0.25 * 10 = 2.5: a tie
  r.call.args.quant_scale2 = r.call.keep(std::move(s));
  return r;
}

TEST(PostQuant, RowsAreQuantizedMaskedRowsGiveQuantizeZeroUncomputedRowsStayZero) {
  for (Backend backend : {Backend::kCpu, Backend::kReference})
    for (PostQuantRounding rounding : {PostQuantRounding::kDevice, PostQuantRounding::kGolden}) {
      // offset 0.75: computed rows 2.5 + 0.75 -> 3; the fully masked row 0 is quantize(0) =
      // round(0.75) = 1; row 2 of batch 1 (beyond act_q) is never computed and stays 0.
      RowKinds r = row_kinds(RowKinds::kQ, {3, 2}, {5, 5}, true);
      OwnedTensor o(DType::F32, {1});
      o.as<float>()[0] = 0.75f;
      r.call.args.quant_offset2 = r.call.keep(std::move(o));
      const Outputs out = run_call(r.call.args, backend, 2, rounding);
      const auto* q = out.attention_out.as<std::int8_t>();
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t i = 0; i < RowKinds::kQ; ++i)
          for (std::int64_t d = 0; d < RowKinds::kD; ++d) {
            const int want = b == 1 && i == 2 ? 0 : i == 0 ? 1 : 3;
            EXPECT_EQ(q[(b * RowKinds::kQ + i) * RowKinds::kD + d], want)
                << "backend " << int(backend) << " b " << b << " i " << i;
          }
      // no offset: 0.25 * 10 = 2.5 exactly, a tie: device 3 (half away), golden 2 (half even).
      RowKinds tie = row_kinds(RowKinds::kQ, {3, 3}, {5, 5}, false);
      tie.call.args.quant_offset2 = TensorView{};
      const Outputs t = run_call(tie.call.args, backend, 2, rounding);
      for (std::int64_t x = 0; x < t.attention_out.numel(); ++x)
        EXPECT_EQ(t.attention_out.as<std::int8_t>()[x], rounding == PostQuantRounding::kDevice ? 3 : 2);
    }
}

TEST(PostQuant, DecodeWithoutKeysGivesQuantizeZeroPrefillStaysZero) {
  for (Backend backend : {Backend::kCpu, Backend::kReference}) {
    // Q_S = 1: batch 1 has no keys -> quantize(0) = round(0.75) = 1 (25.1 #3).
    RowKinds decode = row_kinds(1, {1, 1}, {5, 0}, false);
    OwnedTensor o(DType::F32, {1});
    o.as<float>()[0] = 0.75f;
    decode.call.args.quant_offset2 = decode.call.keep(std::move(o));
    const Outputs d = run_call(decode.call.args, backend);
    for (std::int64_t x = 0; x < RowKinds::kD; ++x) {
      EXPECT_EQ(d.attention_out.as<std::int8_t>()[x], 3);                  // 2.5 + 0.75 = 3.25 -> 3
      EXPECT_EQ(d.attention_out.as<std::int8_t>()[RowKinds::kD + x], 1);   // quantize(0) = round(0.75)
    }
    // Q_S > 1: a batch with no keys stays 0 (7.6).
    RowKinds prefill = row_kinds(RowKinds::kQ, {3, 3}, {5, 0}, false);
    prefill.call.args.quant_offset2 = prefill.call.keep([] {
      OwnedTensor t(DType::F32, {1});
      t.as<float>()[0] = 0.75f;
      return t;
    }());
    const Outputs p = run_call(prefill.call.args, backend);
    for (std::int64_t x = 0; x < RowKinds::kQ * RowKinds::kD; ++x)
      EXPECT_EQ(p.attention_out.as<std::int8_t>()[RowKinds::kQ * RowKinds::kD + x], 0);
  }
}

TEST(PostQuant, ResultsDoNotDependOnThreads) {
  CallSpec spec;
  spec.layout = "BSND";
  spec.batch = 3;
  spec.num_heads = 8;
  spec.num_kv_heads = 2;
  spec.q_seq = 33;
  spec.kv_seq = 1030;
  spec.qk_dim = 64;
  TestCall call = build_call(spec, 99);
  add_post_quant(call, spec, true, true, 99);
  const Outputs one = run_call(call.args, Backend::kCpu, 1);
  const Outputs two = run_call(call.args, Backend::kCpu, 2);
  EXPECT_EQ(one.attention_out.bytes, two.attention_out.bytes);
}

}  // namespace
}  // namespace fia::test
