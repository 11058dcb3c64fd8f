// FIA-SPEC 13.3 step by step: MLA full quantization of one query row in float64. The integer and
// bf16 products are exact; the one rounding the device makes that changes results, P quantized to
// int8 per 512-key chunk, is reproduced (docs/numerics.md "MLA full quantization").
#include <cmath>
#include <limits>
#include <vector>

#include "numeric/full_quant.hpp"
#include "numeric/half.hpp"
#include "cpu/convert.hpp"
#include "reference/reference.hpp"

namespace fia::detail {

bool reference_mla_full_quant_row(const Problem& p, std::int64_t b, std::int64_t n, std::int64_t i, double* out,
                                  double* lse) {
  const Problem::MlaFullQuant& mq = p.mla_full_quant;
  const std::int64_t L = p.kv_len(b), h = n / p.group, D = p.qk_dim, VD = p.v_dim;
  const auto* q = static_cast<const std::int8_t*>(p.query.base) + p.query.offset(b, n, i);
  const auto* qr = static_cast<const std::byte*>(p.query_rope.base) +
                   p.query_rope.offset(b, n, i) * static_cast<std::int64_t>(dtype_size(p.rope_dtype));
  const double dq = static_cast<const float*>(mq.dequant_query.base)[mq.dequant_query.offset(b, n, i)];
  const double factor = dq * mq.key_scale * static_cast<double>(p.scale);  // dq[b][n][s] * scaleValue
  double m = -std::numeric_limits<double>::infinity(), l = 0.0;
  std::vector<double> acc(VD, 0.0), s;
  std::vector<std::int64_t> cols, pv(VD);
  std::vector<std::byte> scratch;  // NZ rows made contiguous (9.1)
  for (std::int64_t c0 = 0; c0 < L; c0 += kMlaFullQuantChunk) {
    const std::int64_t c1 = std::min(L, c0 + kMlaFullQuantChunk);
    s.clear();
    cols.clear();
    for (std::int64_t j = c0; j < c1; ++j) {  // masked keys take no part (25.1 #24)
      if (!p.visible(b, i, j)) continue;
      const KvRun kv = p.token_rows(b, h, j, KvParts::kKeys, &scratch);
      const auto* k = static_cast<const std::int8_t*>(kv.key);
      std::int64_t dot = 0;
      for (std::int64_t d = 0; d < D; ++d) dot += static_cast<std::int64_t>(q[d]) * k[d];
      double rope = 0.0;
      for (std::int64_t d = 0; d < p.rope_dim; ++d)
        rope += static_cast<double>(load_one(qr, p.rope_dtype, d)) * load_one(kv.key_rope, p.rope_dtype, d);
      double score = (static_cast<double>(dot) + rope) * factor;  // the rope part is dequantized too
      if (p.has_pse) score += load_one(p.pse.base, p.pse.dtype, p.pse_offset(b, n, i, j));  // after scaling (5, 8.1)
      if (score == -std::numeric_limits<double>::infinity()) continue;  // a pse of -inf excludes the key
      s.push_back(std::min(score, std::numeric_limits<double>::max()));
      cols.push_back(j);
    }
    if (s.empty()) continue;  // nothing visible in this chunk: it changes nothing
    double mc = s[0];
    for (double x : s) mc = std::max(mc, x);
    const double m_new = std::max(m, mc), alpha = std::exp(m - m_new), beta = std::exp(mc - m_new);
    // P_q = round(127 exp(S - chunk max)); l sums the unquantized exponentials.
    double sum = 0.0;
    std::fill(pv.begin(), pv.end(), 0);
    for (std::size_t c = 0; c < s.size(); ++c) {
      const double e = std::exp(s[c] - mc);
      sum += e;
      const std::int64_t pq = quantize_mla_p(e);
      const auto* v = static_cast<const std::int8_t*>(p.token_rows(b, h, cols[c], KvParts::kValues, &scratch).value);
      for (std::int64_t d = 0; d < VD; ++d) pv[d] += pq * v[d];
    }
    l = l * alpha + sum * beta;
    for (std::int64_t d = 0; d < VD; ++d) acc[d] = acc[d] * alpha + static_cast<double>(pv[d]) * beta / 127.0;
    m = m_new;
  }
  if (l == 0.0) return false;  // fully masked: 0 / +inf
  for (std::int64_t d = 0; d < VD; ++d) out[d] = acc[d] / l * mq.value_scale;
  *lse = std::log(l) + m;
  return true;
}

}  // namespace fia::detail
