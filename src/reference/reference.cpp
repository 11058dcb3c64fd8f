// FIA-SPEC 1 and 5, step by step, in float64. Written for reading, not for speed.
#include "reference/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "numeric/half.hpp"

namespace fia::detail {

namespace {

double load(const void* base, DType t, std::int64_t i) {
  switch (t) {
    case DType::F16: return f16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    case DType::F32: return static_cast<const float*>(base)[i];
    default: return 0.0;
  }
}

/// Step 7: the unnormalised exponential rounded to the query dtype.
double round_to(double x, DType t) {
  switch (t) {
    case DType::F16: return f16_to_f32(f64_to_f16(x));
    case DType::BF16: return bf16_to_f32(f64_to_bf16(x));
    case DType::F32: return static_cast<float>(x);
    default: return x;
  }
}

/// The stored integer of element d of an int8 row, or of a packed int4 row (FIA-SPEC 12.6: eight
/// two's-complement nibbles per int32, the lowest nibble first).
double stored_int(const void* row, KvFormat f, std::int64_t d) {
  if (f == KvFormat::kInt8) return static_cast<const std::int8_t*>(row)[d];
  const auto word = static_cast<std::uint32_t>(static_cast<const std::int32_t*>(row)[d / 8]);
  const auto nibble = static_cast<int>((word >> (4 * (d % 8))) & 0xFu);
  return nibble >= 8 ? nibble - 16 : nibble;
}

/// Element d (of `dim`) of the K or V row of logical column j, batch b, KV head h, as its real
/// value: float elements as stored; int8/int4 as (x + offset) * scale (FIA-SPEC 12.1, 12.3).
double kv_element(const Problem& p, const Antiquant& q, const void* row, std::int64_t dim, std::int64_t b,
                  std::int64_t h, std::int64_t j, std::int64_t d) {
  if (p.kv_format == KvFormat::kFloat) return load(row, p.kv_dtype, d);
  double scale = q.channel_scale.empty() ? 1.0 : q.channel_scale[h * dim + d];
  double offset = q.channel_offset.empty() ? 0.0 : q.channel_offset[h * dim + d];
  if (q.per_token) {
    const std::int64_t o = p.token_factor_offset(q, b, h, j);
    scale *= q.token_scale[o];
    if (q.token_offset) offset += q.token_offset[o];
  }
  return (stored_int(row, p.kv_format, d) + offset) * scale;
}

double dot(const void* a, const void* b, DType t, std::int64_t n) {
  double s = 0.0;
  for (std::int64_t d = 0; d < n; ++d) s += load(a, t, d) * load(b, t, d);
  return s;
}

/// Q row · K row of logical column j (12.5: the dequantized K replaces K).
double key_dot(const Problem& p, const void* q, const void* k, std::int64_t b, std::int64_t h, std::int64_t j) {
  double s = 0.0;
  for (std::int64_t d = 0; d < p.qk_dim; ++d)
    s += load(q, p.dtype, d) * kv_element(p, p.key_antiquant, k, p.qk_dim, b, h, j, d);
  return s;
}

const void* row(const RowIndex& r, DType t, std::int64_t b, std::int64_t n, std::int64_t i) {
  return static_cast<const std::byte*>(r.base) + r.offset(b, n, i) * static_cast<std::int64_t>(dtype_size(t));
}

/// The weights P of a row's V rows, the factor its P·V sum is multiplied by, and its LSE.
struct RowWeights {
  std::vector<double> p;
  double norm = 1.0;
  double lse = 0.0;
};

/// Steps 6-7 and sections 16-17 for query head n: s holds the scores of the allowed columns, m
/// their max. P is formed by the rule of the call's path (25.3).
RowWeights row_weights(const Problem& p, std::int64_t n, const std::vector<double>& s, const std::vector<char>& allowed,
                       double m) {
  const auto L = static_cast<std::int64_t>(s.size());
  const PRule& rule = p.p_rule;
  double l = 0.0;  // sum of the unrounded E
  for (std::int64_t j = 0; j < L; ++j)
    if (allowed[j]) l += std::exp(s[j] - m);
  // Section 16: the sink adds exp(sink - m) to the denominator only. Stabilised with
  // m2 = max(m, sink), which is mathematically the same.
  RowWeights w;
  double m2 = m, denom = l;
  if (p.has_sink) {
    const double sink = p.sink[n];
    m2 = std::max(m, sink);
    denom = l * std::exp(m - m2) + std::exp(sink - m2);
    w.norm = std::exp(m - m2) / denom;
    w.lse = m2 + std::log(denom);
  } else {
    w.norm = 1.0 / l;
    w.lse = m + std::log(l);  // section 17
  }
  w.p.assign(L, 0.0);
  double running = p.has_sink ? p.sink[n] : -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < L; ++j) {
    if (rule.kind == PRule::Kind::kRunningMax && j % rule.tile_cols == 0) {  // 21.6: the max through this tile
      for (std::int64_t k = j; k < std::min(L, j + rule.tile_cols); ++k)
        if (allowed[k]) running = std::max(running, s[k]);
    }
    if (!allowed[j]) continue;
    switch (rule.kind) {
      case PRule::Kind::kRoundE: w.p[j] = round_to(std::exp(s[j] - m), rule.round_to); break;  // step 7
      case PRule::Kind::kRunningMax:  // relative to m2 >= running, so that no factor overflows
        w.p[j] = round_to(std::exp(s[j] - running), rule.round_to) * std::exp(running - m2);
        break;
      case PRule::Kind::kNormalizeFirst:
        w.p[j] = round_to(std::exp(s[j] - m2) / denom, rule.round_to);
        break;
    }
  }
  if (rule.kind == PRule::Kind::kNormalizeFirst) w.norm = 1.0;
  if (rule.kind == PRule::Kind::kRunningMax) w.norm = 1.0 / denom;
  return w;
}

}  // namespace

bool reference_row(const Problem& p, std::int64_t b, std::int64_t n, std::int64_t i, double* out, double* lse) {
  if (p.full_quant.on) return reference_full_quant_row(p, b, n, i, out, lse);
  if (p.mla_full_quant.on) return reference_mla_full_quant_row(p, b, n, i, out, lse);
  const DType t = p.dtype;
  const double scale = p.scale;  // float32 value (25.1 #13)
  const std::int64_t L = p.kv_len(b);  // P + act_kv[b]
  const std::int64_t h = n / p.group;  // section 4
  const void* q = row(p.query, t, b, n, i);
  const void* qr = p.rope_dim > 0 ? row(p.query_rope, t, b, n, i) : nullptr;
  // Steps 2-5: scores of the allowed columns. A pse of -inf excludes its key like a mask, whatever
  // the key holds, and so does a score of -inf (25.1 #24-25); +inf (a pse of +inf) is the largest
  // double. A NaN score (NaN in a visible input) makes the row NaN, output and LSE.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> s(L);
  std::vector<char> allowed(L, 0);
  std::vector<std::byte> scratch;  // NZ rows made contiguous (9.1)
  bool any = false, nan_score = false;
  for (std::int64_t j = 0; j < L; ++j) {
    if (!p.visible(b, i, j)) continue;
    const double bias = p.has_pse ? load(p.pse.base, p.pse.dtype, p.pse_offset(b, n, i, j)) : 0.0;
    if (bias == -kInf) continue;
    const KvRun kv = p.token_rows(b, h, j, KvParts::kKeys, &scratch);
    double score = key_dot(p, q, kv.key, b, h, j);
    if (qr) score += dot(qr, kv.key_rope, t, p.rope_dim);  // 15.1
    score *= scale;                                       // step 3
    if (p.has_pse) score += bias;                         // step 4: after scaling
    if (score == -kInf) continue;
    nan_score |= std::isnan(score);
    s[j] = std::min(score, std::numeric_limits<double>::max());
    allowed[j] = 1;
    any = true;
  }
  if (!any) return false;  // fully masked row: 0 and +inf (6.7, 25.1 #1)
  if (nan_score) {
    std::fill(out, out + p.v_dim, std::numeric_limits<double>::quiet_NaN());
    *lse = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  // Step 6: max over allowed columns, exponentials, their sum.
  double m = -kInf;
  for (std::int64_t j = 0; j < L; ++j)
    if (allowed[j]) m = std::max(m, s[j]);
  if (p.softmax_max_rows.base != nullptr) m = std::max(m, static_cast<double>(p.softmax_max_floor(b, n, i)));
  const RowWeights w = row_weights(p, n, s, allowed, m);
  if (!std::isfinite(w.norm)) return false;  // every E underflowed against a given softmax_max: seen as empty
  std::vector<double> acc(p.v_dim, 0.0);
  for (std::int64_t j = 0; j < L; ++j) {
    if (!allowed[j]) continue;
    const KvRun kv = p.token_rows(b, h, j, KvParts::kValues, &scratch);
    for (std::int64_t d = 0; d < p.v_dim; ++d)  // step 8 (12.5: dequantized V)
      acc[d] += w.p[j] * kv_element(p, p.value_antiquant, kv.value, p.v_dim, b, h, j, d);
  }
  for (std::int64_t d = 0; d < p.v_dim; ++d) out[d] = acc[d] * w.norm;
  *lse = w.lse;
  return true;
}

ReferenceResult reference_compute(const Problem& p) {
  ReferenceResult res;
  std::int64_t out_numel = 1, lse_numel = 1;
  for (auto d : p.out_shape) out_numel *= d;
  for (auto d : p.lse_shape) lse_numel *= d;
  res.out.assign(out_numel, 0.0);  // rows never computed stay 0 (7.6)
  if (p.lse) res.lse.assign(lse_numel, std::numeric_limits<double>::infinity());
  // Offsets into row-major copies of the outputs.
  const RowIndex out_rows = p.out_index(MutableTensorView(nullptr, p.out_dtype, p.out_shape));
  const RowIndex lse_rows = p.lse_index(MutableTensorView(nullptr, DType::F32, p.lse_shape));
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t n = 0; n < p.num_heads; ++n)
      for (std::int64_t i = 0; i < p.act_q[b]; ++i) {
        double lse = 0.0;
        if (reference_row(p, b, n, i, &res.out[out_rows.offset(b, n, i)], &lse) && p.lse)
          res.lse[lse_rows.offset(b, n, i)] = lse;
      }
  return res;
}

}  // namespace fia::detail
