// FIA-SPEC 13.1 step by step: the int8 full-quantization pipeline of one query row. The chunking
// and the fp16 roundings are the semantics (25.1 #12), so the reference follows them exactly;
// integer products are exact, exponentials and the row sum are taken in float64.
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/convert.hpp"
#include "numeric/full_quant.hpp"
#include "reference/reference.hpp"

namespace fia::detail {

namespace {

/// The pse element of (b, n, i, j) rounded to fp16 (13.1: "A + pse (fp16)").
float pse16(const Problem& p, std::int64_t b, std::int64_t n, std::int64_t i, std::int64_t j) {
  const float v = load_one(p.pse.base, p.pse.dtype, p.pse_offset(b, n, i, j));  // FP16, BF16 or FLOAT32
  return v == -std::numeric_limits<float>::infinity() ? v : clamp_to_f16(v);
}

}  // namespace

bool reference_full_quant_row(const Problem& p, std::int64_t b, std::int64_t n, std::int64_t i, double* out,
                              double* lse) {
  const Problem::FullQuant& fq = p.full_quant;
  const std::int64_t L = p.kv_len(b), h = n / p.group, D = p.qk_dim, VD = p.v_dim;
  const auto* q = static_cast<const std::int8_t*>(p.query.base) + p.query.offset(b, n, i);
  float m = -std::numeric_limits<float>::infinity();  // running max (fp16 values)
  double l = 0.0;
  std::vector<float> o(VD, 0.0f);
  bool first = true;
  std::vector<float> a;
  std::vector<std::int64_t> cols;
  std::vector<std::byte> scratch;  // NZ rows made contiguous (9.1)
  for (std::int64_t c0 = 0; c0 < L; c0 += kFullQuantChunk) {
    const std::int64_t c1 = std::min(L, c0 + kFullQuantChunk);
    // Scores of the chunk's allowed columns: masked ones, and keys whose pse is -inf, take no part.
    a.clear();
    cols.clear();
    for (std::int64_t j = c0; j < c1; ++j) {
      if (!p.visible(b, i, j)) continue;
      const auto* k = static_cast<const std::int8_t*>(p.token_rows(b, h, j, KvParts::kKeys, &scratch).key);
      std::int32_t dot = 0;
      for (std::int64_t d = 0; d < D; ++d) dot += static_cast<std::int32_t>(q[d]) * k[d];
      float s = full_quant_score(dot, fq.dequant1, fq.scale16);
      if (p.has_pse) {
        const float bias = pse16(p, b, n, i, j);
        if (bias == -std::numeric_limits<float>::infinity()) continue;
        s = clamp_to_f16(s + bias);
      }
      a.push_back(s);
      cols.push_back(j);
    }
    if (a.empty()) continue;  // nothing visible in this chunk: it changes nothing
    float mc = a[0];
    for (float s : a) mc = std::max(mc, s);
    const float m_new = std::max(m, mc);
    // The online softmax: E relative to the new running max, rounded to fp16; l over unrounded E.
    double chunk_sum = 0.0;
    std::vector<std::int32_t> acc(VD, 0);
    for (std::size_t c = 0; c < a.size(); ++c) {
      chunk_sum += std::exp(static_cast<double>(a[c]) - mc);
      const float e16 = round_to_f16(static_cast<float>(std::exp(static_cast<double>(a[c]) - m_new)));
      const std::int32_t pq = quantize_p(e16, fq.quant1);
      const auto* v = static_cast<const std::int8_t*>(p.token_rows(b, h, cols[c], KvParts::kValues, &scratch).value);
      for (std::int64_t d = 0; d < VD; ++d) acc[d] += pq * v[d];
    }
    l = l * std::exp(static_cast<double>(m) - m_new) + chunk_sum * std::exp(static_cast<double>(mc) - m_new);
    if (first) {  // the first chunk's P·V stays fp32
      for (std::int64_t d = 0; d < VD; ++d) o[d] = static_cast<float>(acc[d]) * fq.dequant2;
      first = false;
    } else {  // later chunks: fp16 partials, fp16 accumulation
      const float alpha16 = round_to_f16(static_cast<float>(std::exp(static_cast<double>(m) - m_new)));
      for (std::int64_t d = 0; d < VD; ++d) {
        const float oj = clamp_to_f16(static_cast<float>(acc[d]) * fq.dequant2);
        o[d] = clamp_to_f16(o[d] * alpha16 + oj);
      }
    }
    m = m_new;
  }
  if (first) return false;  // fully masked: 0 / +inf
  const float l16 = clamp_to_f16(static_cast<float>(l));
  for (std::int64_t d = 0; d < VD; ++d) out[d] = static_cast<float>(o[d] / l16);
  *lse = std::log(l) + m;
  return true;
}

}  // namespace fia::detail
