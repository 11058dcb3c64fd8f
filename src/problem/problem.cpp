#include "problem/problem.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace fia::detail {

namespace {
const void* advance(const void* base, std::int64_t elements, std::size_t elem_size) {
  return static_cast<const std::byte*>(base) + elements * static_cast<std::int64_t>(elem_size);
}
}  // namespace

KvRun Problem::locate(std::int64_t b, std::int64_t h, std::int64_t j) const {
  const std::size_t es = dtype_size(kv_dtype);
  for (const KvSegment& seg : segments) {
    const std::int64_t len = seg.length[b];
    if (j >= len) {
      j -= len;
      continue;
    }
    KvRun run;
    if (!seg.paged) {
      auto at = [&](const KvTensorRows& rows, std::size_t size, const void** ptr, std::int64_t* stride,
                    std::int64_t* head_stride) {
        const auto& r = rows.batch[b];
        *ptr = advance(r.base, h * r.head_stride + j * r.token_stride, size);
        *stride = r.token_stride;
        *head_stride = r.head_stride;
      };
      at(seg.key, es, &run.key, &run.key_stride, &run.key_head_stride);
      at(seg.value, es, &run.value, &run.value_stride, &run.value_head_stride);
      if (rope_dim > 0) at(seg.key_rope, dtype_size(rope_dtype), &run.key_rope, &run.rope_stride, &run.rope_head_stride);
      run.count = len - j;
    } else {
      const std::int64_t blk = seg.block_id(b, j / seg.block_size);
      const std::int64_t off = j % seg.block_size;
      auto at = [&](const KvTensorRows& rows, std::size_t size, const void** ptr, std::int64_t* stride,
                    std::int64_t* head_stride, RowTiling* tiling) {
        *ptr = advance(rows.pool, blk * rows.block_stride + h * rows.head_stride +
                                      off * rows.token_stride, size);
        *stride = rows.token_stride;
        *head_stride = rows.head_stride;
        *tiling = rows.tiling;
      };
      at(seg.key, es, &run.key, &run.key_stride, &run.key_head_stride, &run.key_tiling);
      at(seg.value, es, &run.value, &run.value_stride, &run.value_head_stride, &run.value_tiling);
      if (rope_dim > 0)
        at(seg.key_rope, dtype_size(rope_dtype), &run.key_rope, &run.rope_stride, &run.rope_head_stride,
           &run.rope_tiling);
      run.count = std::min(seg.block_size - off, len - j);
    }
    return run;
  }
  return {};
}

namespace {
/// Copies `count` rows of `width` elements (`size` bytes each) laid out by `tiling`, rows `stride`
/// elements apart, into contiguous rows at dst.
void gather_rows(const void* src, std::int64_t stride, RowTiling tiling, std::int64_t count, std::int64_t width,
                 std::size_t size, std::byte* dst) {
  const auto* s = static_cast<const std::byte*>(src);
  const std::int64_t es = static_cast<std::int64_t>(size);
  const std::int64_t piece = tiling.tiled() ? tiling.width : width;
  for (std::int64_t t = 0; t < count; ++t)
    for (std::int64_t d = 0; d < width; d += piece) {
      const std::int64_t at = t * stride + (tiling.tiled() ? (d / piece) * tiling.stride : d);
      std::memcpy(dst + (t * width + d) * es, s + at * es, static_cast<std::size_t>(std::min(piece, width - d) * es));
    }
}
}  // namespace

KvRun Problem::untile(const KvRun& run, KvParts parts, std::vector<std::byte>* scratch) const {
  if (!run.tiled()) return run;
  const bool keys = (static_cast<unsigned>(parts) & static_cast<unsigned>(KvParts::kKeys)) != 0;
  const bool values = (static_cast<unsigned>(parts) & static_cast<unsigned>(KvParts::kValues)) != 0;
  const bool shared = run.value == run.key && v_dim == qk_dim;  // decode MLA: V is K (25.1 #11)
  const std::size_t es = dtype_size(kv_dtype), rs = dtype_size(rope_dtype);
  const std::int64_t n = run.count;
  const std::int64_t key_bytes = keys || shared ? n * qk_dim * static_cast<std::int64_t>(es) : 0;
  const std::int64_t rope_bytes = keys && rope_dim > 0 ? n * rope_dim * static_cast<std::int64_t>(rs) : 0;
  const std::int64_t value_bytes = values && !shared ? n * v_dim * static_cast<std::int64_t>(es) : 0;
  const std::size_t total = static_cast<std::size_t>(key_bytes + rope_bytes + value_bytes);
  if (scratch->size() < total) scratch->resize(total);
  std::byte* at = scratch->data();
  KvRun out;
  out.count = n;
  if (key_bytes > 0) {
    gather_rows(run.key, run.key_stride, run.key_tiling, n, qk_dim, es, at);
    out.key = keys ? at : nullptr;
    out.key_stride = qk_dim;
    if (values && shared) {
      out.value = at;
      out.value_stride = v_dim;
    }
    at += key_bytes;
  }
  if (rope_bytes > 0) {
    gather_rows(run.key_rope, run.rope_stride, run.rope_tiling, n, rope_dim, rs, at);
    out.key_rope = at;
    out.rope_stride = rope_dim;
    at += rope_bytes;
  }
  if (value_bytes > 0) {
    gather_rows(run.value, run.value_stride, run.value_tiling, n, v_dim, es, at);
    out.value = at;
    out.value_stride = v_dim;
  }
  return out;
}

std::int64_t Problem::token_factor_offset(const Antiquant& q, std::int64_t b, std::int64_t h, std::int64_t j) const {
  if (q.paged) {
    const KvSegment& own = segments.back();
    const std::int64_t t = j - prefix_len;
    const std::int64_t blk = own.block_id(b, t / own.block_size);
    return blk * q.block_stride + h * q.head_stride + (t % own.block_size) * q.token_stride;
  }
  return b * q.batch_stride + h * q.head_stride + (j + q.column_offset[b]) * q.token_stride;
}

bool Problem::kv_heads_interleaved() const {
  if (segments.empty()) return false;
  const KvSegment& own = segments.back();
  if (own.paged) return !own.key.tiling.tiled() && own.key.head_stride < own.key.token_stride;
  return !own.key.batch.empty() && own.key.batch[0].head_stride < own.key.batch[0].token_stride;
}

RowIndex Problem::out_index(const MutableTensorView& out) const {
  const AxisPos p = axis_positions(out_layout);
  RowIndex r;
  r.base = out.data;
  r.row_stride = out.stride(p.s);
  r.head_stride = out_layout == Layout::kBSH ? v_dim * out.stride(2) : out.stride(p.n);
  r.batch_offset.resize(batch);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t first = token_layout ? q_token_start[b] * r.row_stride : b * out.stride(p.b);
    r.batch_offset[b] = first + q_start[b] * r.row_stride;
  }
  return r;
}

RowIndex Problem::lse_index(const MutableTensorView& lse_view) const {
  RowIndex r;
  r.base = lse_view.data;
  r.head_stride = lse_view.stride(1);
  r.row_stride = token_layout ? lse_view.stride(0) : lse_view.stride(2);
  r.batch_offset.resize(batch);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t first = token_layout ? q_token_start[b] * r.row_stride : b * lse_view.stride(0);
    r.batch_offset[b] = first + q_start[b] * r.row_stride;
  }
  return r;
}

}  // namespace fia::detail
