// Phases A, B and C of one work item (FIA-SPEC 5 steps 2-11).
#include "cpu/attention_item.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/convert.hpp"

namespace fia::detail {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

const std::byte* element(const void* base, std::int64_t offset, std::size_t es) {
  return static_cast<const std::byte*>(base) + offset * static_cast<std::int64_t>(es);
}

/// Copies tokens [j0, j0 + count) of batch b, KV head h into f32 tiles: K rows of `kw` floats
/// (rope part after the first qk_dim), or V rows of v_dim floats.
void gather(const Problem& p, std::int64_t b, std::int64_t h, std::int64_t j0, std::int64_t count, bool keys,
            float* dst) {
  const std::size_t es = dtype_size(p.dtype);
  const std::int64_t kw = p.qk_dim + p.rope_dim;
  std::int64_t c = 0;
  while (c < count) {
    const KvRun run = p.locate(b, h, j0 + c);
    const std::int64_t n = std::min(run.count, count - c);
    for (std::int64_t t = 0; t < n; ++t, ++c) {
      if (keys) {
        load_row(element(run.key, t * run.key_stride, es), p.dtype, p.qk_dim, dst + c * kw);
        if (p.rope_dim > 0) load_row(element(run.key_rope, t * run.rope_stride, es), p.dtype, p.rope_dim, dst + c * kw + p.qk_dim);
      } else {
        load_row(element(run.value, t * run.value_stride, es), p.dtype, p.v_dim, dst + c * p.v_dim);
      }
    }
  }
}

float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

void load_queries(const Problem& p, const WorkItem& item, float* q) {
  const std::int64_t G = p.group, kw = p.qk_dim + p.rope_dim;
  const std::size_t es = dtype_size(p.dtype);
  for (std::int64_t ii = 0; ii < item.row_end - item.row_begin; ++ii) {
    for (std::int64_t g = 0; g < G; ++g) {
      const std::int64_t r = ii * G + g, n = item.h * G + g, i = item.row_begin + ii;
      load_row(element(p.query.base, p.query.offset(item.b, n, i), es), p.dtype, p.qk_dim, q + r * kw);
      if (p.rope_dim > 0)
        load_row(element(p.query_rope.base, p.query_rope.offset(item.b, n, i), es), p.dtype, p.rope_dim, q + r * kw + p.qk_dim);
    }
  }
}

}  // namespace

void item_scores(const Problem& p, const TileShape& tile, const WorkItem& item, const TileBuffers& buf,
                 float* scores, std::int64_t ld, float* m) {
  const std::int64_t b = item.b, G = p.group, kw = p.qk_dim + p.rope_dim;
  const std::int64_t R = (item.row_end - item.row_begin) * G;
  load_queries(p, item, buf.q);
  std::fill(m, m + R, kNegInf);
  for (std::int64_t c0 = item.col_begin; c0 < item.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, item.col_end - c0);
    gather(p, b, item.h, c0, nc, true, buf.k);
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t n = item.h * G + r % G, i = item.row_begin + r / G;
      const std::int64_t lo = i + p.band_lo[b], hi = i + p.band_hi[b];
      float* sr = scores + r * ld + (c0 - item.col_begin);
      float row_max = m[r];
      for (std::int64_t c = 0; c < nc; ++c) {
        const std::int64_t j = c0 + c;
        if (j < lo || j > hi || (p.has_mask && p.masked(b, i, j))) {  // section 6
          sr[c] = kNegInf;
          continue;
        }
        float s = dot(buf.q + r * kw, buf.k + c * kw, kw) * p.scale;  // steps 2-3
        if (p.has_pse) {                                               // step 4
          const BiasIndex& x = p.pse;
          s += load_one(x.base, x.dtype,
                        b * x.batch_stride + n * x.head_stride + (p.q_start[b] + i) * x.row_stride +
                            (j + p.kv_col_offset[b]) * x.col_stride);
        }
        sr[c] = s;
        row_max = std::max(row_max, s);
      }
      m[r] = row_max;
    }
  }
}

void item_accumulate(const Problem& p, const TileShape& tile, const WorkItem& item, const TileBuffers& buf,
                     const float* scores, std::int64_t ld, const float* m, float* l, float* acc) {
  const std::int64_t R = (item.row_end - item.row_begin) * p.group, vd = p.v_dim;
  std::fill(l, l + R, 0.0f);
  std::fill(acc, acc + R * vd, 0.0f);
  for (std::int64_t c0 = item.col_begin; c0 < item.col_end; c0 += tile.cols) {
    const std::int64_t nc = std::min(tile.cols, item.col_end - c0);
    gather(p, item.b, item.h, c0, nc, false, buf.v);
    for (std::int64_t r = 0; r < R; ++r) {
      if (m[r] == kNegInf) continue;
      const float* sr = scores + r * ld + (c0 - item.col_begin);
      float* ar = acc + r * vd;
      float sum = 0.0f;
      for (std::int64_t c = 0; c < nc; ++c) {
        if (sr[c] == kNegInf) continue;
        const float e = std::exp(sr[c] - m[r]);        // step 6
        sum += e;
        const float pe = round_to_dtype(e, p.dtype);  // step 7: the P cast
        const float* vr = buf.v + c * vd;
        for (std::int64_t d = 0; d < vd; ++d) ar[d] += pe * vr[d];  // step 8
      }
      l[r] += sum;
    }
  }
}

void item_finalize(const Problem& p, const WorkItem& item, const float* m, const float* l, float* acc,
                   const OutputRows& dst) {
  const std::int64_t G = p.group, vd = p.v_dim;
  const std::int64_t R = (item.row_end - item.row_begin) * G;
  const std::size_t out_es = dtype_size(p.out_dtype);
  for (std::int64_t r = 0; r < R; ++r) {
    if (m[r] == kNegInf) continue;  // fully masked: 0 / +inf (25.1 #1)
    const std::int64_t n = item.h * G + r % G, i = item.row_begin + r / G;
    float norm, lse;
    if (p.has_sink) {  // section 16, stabilised with max(m, sink)
      const float sink = p.sink[n];
      const float m2 = std::max(m[r], sink);
      const float denom = l[r] * std::exp(m[r] - m2) + std::exp(sink - m2);
      norm = std::exp(m[r] - m2) / denom;
      lse = m2 + std::log(denom);
    } else {
      norm = 1.0f / l[r];
      lse = m[r] + std::log(l[r]);  // section 17
    }
    float* ar = acc + r * vd;
    for (std::int64_t d = 0; d < vd; ++d) ar[d] *= norm;
    auto* orow = static_cast<std::byte*>(const_cast<void*>(dst.out.base)) +
                 dst.out.offset(item.b, n, i) * static_cast<std::int64_t>(out_es);
    store_row(ar, vd, p.out_dtype, orow);
    if (p.lse) static_cast<float*>(const_cast<void*>(dst.lse.base))[dst.lse.offset(item.b, n, i)] = lse;
  }
}

}  // namespace fia::detail
