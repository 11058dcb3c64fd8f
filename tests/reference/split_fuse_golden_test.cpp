// FIA-SPEC 21.6 (the split-fuse golden of FIA's TND/NTD path) written out independently, tile by
// tile, in float64: 128 query rows x 512 keys, an online softmax whose running max starts at the
// sink, the P tiles rounded to fp16 when inner_precise bit 0 is 1 (25.3), kept otherwise. Both
// backends must agree with it (criterion A, LSE) on the random sweep of the core tests restricted
// to token layouts with contiguous KV and no full mask (the masks 21.6 maps: none, 2, 3, 4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "fia/half.hpp"
#include "support/call_builder.hpp"
#include "support/criterion.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

constexpr std::int64_t kTileRows = 128, kTileCols = 512;

double element(const TensorView& t, std::int64_t i) {
  const auto* u = static_cast<const std::uint16_t*>(t.data);
  switch (t.dtype) {
    case DType::F16: return f16_to_f32(u[i]);
    case DType::BF16: return bf16_to_f32(u[i]);
    default: return static_cast<const float*>(t.data)[i];
  }
}

/// Element (token, head, d) of a contiguous TND or NTD tensor.
double token_element(const TensorView& t, bool ntd, std::int64_t token, std::int64_t head, std::int64_t d) {
  const std::int64_t dim = t.shape[2];
  const std::int64_t heads = ntd ? t.shape[0] : t.shape[1], tokens = ntd ? t.shape[1] : t.shape[0];
  return element(t, ntd ? (head * tokens + token) * dim + d : (token * heads + head) * dim + d);
}

struct Golden {
  std::vector<double> out, lse;
};

/// The split-fuse golden of one call (spec as built by build_call: cumulative lengths).
Golden split_fuse(const CallSpec& spec, const FiaArgs& a) {
  const std::string in = a.input_layout.substr(0, 3), out_layout = a.input_layout.size() > 3 ? a.input_layout.substr(4) : in;
  const bool ntd = in == "NTD", out_ntd = out_layout == "NTD";
  const TensorView &q = a.query, &k = a.key[0], &v = a.value[0];
  const std::int64_t N = a.num_heads, KVN = a.num_key_value_heads ? a.num_key_value_heads : N, G = N / KVN;
  const std::int64_t D = q.shape[2], VD = v.shape[2], T = ntd ? q.shape[1] : q.shape[0];
  const bool fp16_tiles = (a.inner_precise & 1) != 0 && q.dtype != DType::F32;
  const double scale = static_cast<float>(a.scale);
  Golden g;
  g.out.assign(T * N * VD, 0.0);
  g.lse.assign(T * N, std::numeric_limits<double>::infinity());
  const auto& cq = *a.actual_seq_lengths;
  const auto& ck = *a.actual_seq_lengths_kv;
  for (std::int64_t b = 0; b < spec.batch; ++b) {
    const std::int64_t q0 = b ? cq[b - 1] : 0, k0 = b ? ck[b - 1] : 0;
    const std::int64_t act_q = cq[b] - q0, act_kv = ck[b] - k0, d = act_kv - act_q;
    auto visible = [&](std::int64_t i, std::int64_t j) {
      switch (a.sparse_mode) {
        case 2: return j <= i;
        case 3: return j <= i + d;
        case 4: return j >= i + d - a.pre_tokens && j <= i + d + a.next_tokens;
        default: return true;
      }
    };
    for (std::int64_t n = 0; n < N; ++n) {
      const std::int64_t h = n / G;
      const double sink = spec.sink ? element(a.learnable_sink, n) : -std::numeric_limits<double>::infinity();
      for (std::int64_t i0 = 0; i0 < act_q; i0 += kTileRows) {
        for (std::int64_t i = i0; i < std::min(act_q, i0 + kTileRows); ++i) {
          double m = sink, l = 0.0;
          bool seen = false;
          std::vector<double> o(VD, 0.0);
          for (std::int64_t j0 = 0; j0 < act_kv; j0 += kTileCols) {
            const std::int64_t j1 = std::min(act_kv, j0 + kTileCols);
            std::vector<double> s(j1 - j0, -std::numeric_limits<double>::infinity());
            double tile_max = -std::numeric_limits<double>::infinity();
            for (std::int64_t j = j0; j < j1; ++j) {
              if (!visible(i, j)) continue;
              double dot = 0.0;
              for (std::int64_t x = 0; x < D; ++x)
                dot += token_element(q, ntd, q0 + i, n, x) * token_element(k, ntd, k0 + j, h, x);
              s[j - j0] = dot * scale;
              tile_max = std::max(tile_max, s[j - j0]);
              seen = true;
            }
            const double m_new = std::max(m, tile_max);
            if (m_new == -std::numeric_limits<double>::infinity()) continue;
            const double rescale = m == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp(m - m_new);
            l *= rescale;
            for (auto& x : o) x *= rescale;
            for (std::int64_t j = j0; j < j1; ++j) {
              if (s[j - j0] == -std::numeric_limits<double>::infinity()) continue;
              const double e = std::exp(s[j - j0] - m_new);
              l += e;
              const double p = fp16_tiles ? f16_to_f32(f64_to_f16(e)) : e;
              for (std::int64_t x = 0; x < VD; ++x) o[x] += p * token_element(v, ntd, k0 + j, h, x);
            }
            m = m_new;
          }
          if (!seen) continue;  // fully masked: 0 / +inf
          if (spec.sink) l += std::exp(sink - m);
          const std::int64_t t = q0 + i;
          for (std::int64_t x = 0; x < VD; ++x) g.out[(out_ntd ? n * T + t : t * N + n) * VD + x] = o[x] / l;
          g.lse[t * N + n] = m + std::log(l);
        }
      }
    }
  }
  return g;
}

bool covered(const CallSpec& s) {
  return s.layout.find('T') != std::string::npos && s.storage == KvStorage::kContiguous && s.rope_dim == 0 &&
         s.mask != MaskKind::kFull && s.quant.format == KvQuant::kNone;
}

TEST(SplitFuseGolden, BothBackendsAgreeOnTheTokenLayoutSweep) {
  int checked = 0;
  for (std::uint64_t seed = 0; seed < 3000 && checked < 80; ++seed) {
    CallSpec spec = random_spec(seed);
    if (!covered(spec)) continue;
    TestCall call = build_call(spec, seed);
    if (!plan_status(call.args).ok()) continue;
    ++checked;
    const Golden golden = split_fuse(spec, call.args);
    for (Backend backend : {Backend::kCpu, Backend::kReference}) {
      Outputs out;
      ASSERT_TRUE(run_call(call.args, backend, 2, &out).ok()) << describe(spec);
      const Verdict v = criterion_a(out.attention_out, golden.out);
      EXPECT_TRUE(v.pass) << (backend == Backend::kCpu ? "cpu: " : "reference: ") << v.detail << "\n" << describe(spec);
      if (spec.lse) {
        const Verdict l = lse_match(out.softmax_lse, golden.lse);
        EXPECT_TRUE(l.pass) << l.detail << "\n" << describe(spec);
      }
    }
  }
  EXPECT_GE(checked, 40);
}

/// The golden against both backends on one call.
void expect_golden(const CallSpec& spec, std::uint64_t seed) {
  TestCall call = build_call(spec, seed);
  const Golden golden = split_fuse(spec, call.args);
  for (Backend backend : {Backend::kCpu, Backend::kReference}) {
    Outputs out;
    ASSERT_TRUE(run_call(call.args, backend, 2, &out).ok()) << describe(spec);
    const Verdict v = criterion_a(out.attention_out, golden.out);
    EXPECT_TRUE(v.pass) << (backend == Backend::kCpu ? "cpu: " : "reference: ") << v.detail << "\n" << describe(spec);
    const Verdict l = lse_match(out.softmax_lse, golden.lse);
    EXPECT_TRUE(l.pass) << l.detail << "\n" << describe(spec);
  }
}

// Rows longer than one 512-key tile, where the running max and the fp16 tiles matter: decode-like
// rows (split into chunks) and prefill rows (wide items), causal and not, with a sink and GQA.
TEST(SplitFuseGolden, RowsAcrossSeveralTiles) {
  for (DType t : {DType::BF16, DType::F16})
    for (std::int64_t ip : {0, 1})
      for (std::int64_t rows : {5, 140}) {
        CallSpec s;
        s.layout = rows == 5 ? "TND" : "NTD_TND";
        s.dtype = t;
        s.batch = 2;
        s.num_heads = 4;
        s.num_kv_heads = 2;
        s.qk_dim = 32;
        s.act_q = std::vector<std::int64_t>{rows, rows - 2};
        s.act_kv = std::vector<std::int64_t>{1300, 1100};
        s.q_seq = rows;
        s.kv_seq = 1300;
        s.inner_precise = ip;
        s.sink = ip == 1;
        s.sparse_mode = rows == 5 ? 0 : 3;
        s.mask = rows == 5 ? MaskKind::kNone : MaskKind::kCompressed;
        s.value_range = 4.0f;
        s.lse = true;
        expect_golden(s, static_cast<std::uint64_t>(rows * 10 + ip));
      }
}

}  // namespace
}  // namespace fia::test
