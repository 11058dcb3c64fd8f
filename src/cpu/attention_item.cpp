// Flash-style attention for one work item (FIA-SPEC 5 with an online softmax, DESIGN.md kernels).
#include "cpu/attention_item.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/convert.hpp"

namespace fia::detail {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float* align64(float* p) {
  auto u = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<float*>((u + 63) & ~std::uintptr_t{63});
}

/// Copies tokens [j0, j0 + count) of batch b, KV head h into f32 tiles (rows of `k_width` floats
/// for K with the rope part after the first qk_dim, `v_dim` floats for V).
void gather_kv(const Problem& p, std::int64_t b, std::int64_t h, std::int64_t j0, std::int64_t count, float* k,
               std::int64_t k_width, float* v) {
  const std::size_t es = dtype_size(p.dtype);
  std::int64_t c = 0;
  while (c < count) {
    const KvRun run = p.locate(b, h, j0 + c);
    const std::int64_t n = std::min(run.count, count - c);
    for (std::int64_t t = 0; t < n; ++t, ++c) {
      const auto* kr = static_cast<const std::byte*>(run.key) + t * run.key_stride * static_cast<std::int64_t>(es);
      const auto* vr = static_cast<const std::byte*>(run.value) + t * run.value_stride * static_cast<std::int64_t>(es);
      load_row(kr, p.dtype, p.qk_dim, k + c * k_width);
      if (p.rope_dim > 0) {
        const auto* rr = static_cast<const std::byte*>(run.key_rope) + t * run.rope_stride * static_cast<std::int64_t>(es);
        load_row(rr, p.dtype, p.rope_dim, k + c * k_width + p.qk_dim);
      }
      load_row(vr, p.dtype, p.v_dim, v + c * p.v_dim);
    }
  }
}

float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

}  // namespace

void compute_item(const Problem& p, const TileShape& tile, const WorkItem& item, const OutputRows& dst,
                  float* scratch) {
  const std::int64_t b = item.b, h = item.h, G = p.group;
  const std::int64_t n_rows = item.row_end - item.row_begin;
  const std::int64_t R = n_rows * G;  // packed rows: r = ii * G + g
  const std::int64_t kw = p.qk_dim + p.rope_dim;
  const std::int64_t vd = p.v_dim;
  const std::int64_t L = p.kv_len(b);

  // Columns any row of the item can see (FIA-SPEC 6.4 band), clipped to [0, L).
  const std::int64_t j_lo = std::max<std::int64_t>(0, item.row_begin + p.band_lo[b]);
  const std::int64_t j_hi = std::min<std::int64_t>(L - 1, item.row_end - 1 + p.band_hi[b]);
  if (j_lo > j_hi) return;

  float* q = align64(scratch);
  float* k = align64(q + tile.rows * kw);
  float* v = align64(k + tile.cols * kw);
  float* s = align64(v + tile.cols * vd);
  float* acc = align64(s + tile.rows * tile.cols);
  float* m = align64(acc + tile.rows * vd);
  float* l = m + tile.rows;

  const std::size_t es = dtype_size(p.dtype);
  for (std::int64_t ii = 0; ii < n_rows; ++ii) {
    for (std::int64_t g = 0; g < G; ++g) {
      const std::int64_t r = ii * G + g, n = h * G + g, i = item.row_begin + ii;
      const auto* qrow = static_cast<const std::byte*>(p.query.base) + p.query.offset(b, n, i) * static_cast<std::int64_t>(es);
      load_row(qrow, p.dtype, p.qk_dim, q + r * kw);
      if (p.rope_dim > 0) {
        const auto* rrow = static_cast<const std::byte*>(p.query_rope.base) +
                           p.query_rope.offset(b, n, i) * static_cast<std::int64_t>(es);
        load_row(rrow, p.dtype, p.rope_dim, q + r * kw + p.qk_dim);
      }
    }
  }
  std::fill(acc, acc + R * vd, 0.0f);
  std::fill(m, m + R, kNegInf);
  std::fill(l, l + R, 0.0f);

  for (std::int64_t c0 = j_lo; c0 <= j_hi; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, j_hi + 1 - c0);
    gather_kv(p, b, h, c0, nc, k, kw, v);
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t ii = r / G, n = h * G + r % G, i = item.row_begin + ii;
      const std::int64_t lo = i + p.band_lo[b], hi = i + p.band_hi[b];
      float* sr = s + r * tile.cols;
      float tile_max = kNegInf;
      for (std::int64_t c = 0; c < nc; ++c) {
        const std::int64_t j = c0 + c;
        if (j < lo || j > hi || (p.has_mask && p.masked(b, i, j))) {
          sr[c] = kNegInf;
          continue;
        }
        float score = dot(q + r * kw, k + c * kw, kw) * p.scale;  // steps 2-3
        if (p.has_pse) {                                           // step 4
          const BiasIndex& x = p.pse;
          score += load_one(x.base, x.dtype,
                            b * x.batch_stride + n * x.head_stride + (p.q_start[b] + i) * x.row_stride +
                                (j + p.kv_col_offset[b]) * x.col_stride);
        }
        sr[c] = score;
        tile_max = std::max(tile_max, score);
      }
      if (tile_max == kNegInf) continue;  // nothing visible in this tile
      // Online softmax (step 6) with the P cast of step 7 applied to exp(S - running max).
      const float m_new = std::max(m[r], tile_max);
      const float alpha = std::exp(m[r] - m_new);
      float* ar = acc + r * vd;
      if (alpha != 1.0f) {
        l[r] *= alpha;
        for (std::int64_t d = 0; d < vd; ++d) ar[d] *= alpha;
      }
      float sum = 0.0f;
      for (std::int64_t c = 0; c < nc; ++c) {
        if (sr[c] == kNegInf) continue;
        const float e = std::exp(sr[c] - m_new);
        sum += e;
        const float pe = round_to_dtype(e, p.dtype);
        const float* vr = v + c * vd;
        for (std::int64_t d = 0; d < vd; ++d) ar[d] += pe * vr[d];  // step 8
      }
      l[r] += sum;
      m[r] = m_new;
    }
  }

  // Normalise and write: O = acc / l, LSE = m + ln(l); the sink joins the denominator (16).
  const std::size_t out_es = dtype_size(p.out_dtype);
  for (std::int64_t r = 0; r < R; ++r) {
    if (m[r] == kNegInf) continue;  // fully masked: stays 0 / +inf (25.1 #1)
    const std::int64_t n = h * G + r % G, i = item.row_begin + r / G;
    float norm, lse;
    if (p.has_sink) {
      const float sink = p.sink[n];
      const float m2 = std::max(m[r], sink);
      const float denom = l[r] * std::exp(m[r] - m2) + std::exp(sink - m2);
      norm = std::exp(m[r] - m2) / denom;
      lse = m2 + std::log(denom);
    } else {
      norm = 1.0f / l[r];
      lse = m[r] + std::log(l[r]);
    }
    float* ar = acc + r * vd;
    for (std::int64_t d = 0; d < vd; ++d) ar[d] *= norm;
    auto* orow = static_cast<std::byte*>(const_cast<void*>(dst.out.base)) + dst.out.offset(b, n, i) * static_cast<std::int64_t>(out_es);
    store_row(ar, vd, p.out_dtype, orow);
    if (p.lse) static_cast<float*>(const_cast<void*>(dst.lse.base))[dst.lse.offset(b, n, i)] = lse;
  }
}

}  // namespace fia::detail
