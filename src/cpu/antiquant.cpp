#include "cpu/antiquant.hpp"

namespace fia::detail {

namespace {

std::int64_t kv_head(const WorkItem& it, std::int64_t r) { return it.h + (r / it.heads) % it.kv_heads; }

/// Calls fn(r, ts, to, token_stride) per packed row with the row's token factors of column j0;
/// to is null without a token offset.
template <class Fn>
void for_each_row_tokens(const Problem& p, const Antiquant& q, const WorkItem& it, std::int64_t j0, Fn fn) {
  for (std::int64_t r = 0; r < packed_rows(it); ++r) {
    const std::int64_t o = p.token_factor_offset(q, it.b, kv_head(it, r), j0);
    fn(r, q.token_scale + o, q.token_offset ? q.token_offset + o : nullptr, q.token_stride);
  }
}

}  // namespace

bool key_needs_terms(const Problem& p) {
  return p.key_antiquant.per_token || !p.key_antiquant.channel_offset.empty();
}

bool value_needs_sums(const Problem& p) {
  return p.value_antiquant.per_token || !p.value_antiquant.channel_offset.empty();
}

void fold_key_scale(const Problem& p, const WorkItem& it, float* q, std::int64_t kw, float* a, float* b) {
  const Antiquant& k = p.key_antiquant;
  const std::int64_t D = p.qk_dim;
  for (std::int64_t r = 0; r < packed_rows(it); ++r) {
    float* row = q + r * kw;
    const std::int64_t h = kv_head(it, r);
    if (!k.channel_scale.empty())
      for (std::int64_t d = 0; d < D; ++d) row[d] *= k.channel_scale[h * D + d];
    float sa = 0.0f, sb = 0.0f;
    if (!k.channel_offset.empty())
      for (std::int64_t d = 0; d < D; ++d) sa += row[d] * k.channel_offset[h * D + d];
    if (k.token_offset)
      for (std::int64_t d = 0; d < D; ++d) sb += row[d];
    a[r] = sa;
    b[r] = sb;
  }
}

void finish_key_scores(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, float* s,
                       std::int64_t row_stride, const float* a, const float* b) {
  const Antiquant& k = p.key_antiquant;
  if (!k.per_token) {
    if (k.channel_offset.empty()) return;
    for (std::int64_t r = 0; r < packed_rows(it); ++r)
      for (std::int64_t c = 0; c < count; ++c) s[r * row_stride + c] += a[r];
    return;
  }
  for_each_row_tokens(p, k, it, j0, [&](std::int64_t r, const float* ts, const float* to, std::int64_t st) {
    float* row = s + r * row_stride;
    for (std::int64_t c = 0; c < count; ++c) {
      const float off = to ? to[c * st] * b[r] : 0.0f;
      row[c] = ts[c * st] * (row[c] + a[r] + off);
    }
  });
}

void scale_p_for_values(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, float* pr,
                        std::int64_t row_stride, float* sum_p, float* sum_po) {
  const Antiquant& v = p.value_antiquant;
  // Token by token into the running sums: the order of additions must not depend on where the
  // storage cuts runs (paged blocks, the prefix), so that every storage form gives the same bits.
  // (The running sums are carried in locals: the same additions, kept in registers.)
  if (!v.per_token) {
    for (std::int64_t r = 0; r < packed_rows(it); ++r) {
      float s = sum_p[r];
      for (std::int64_t c = 0; c < count; ++c) s += pr[r * row_stride + c];
      sum_p[r] = s;
    }
    return;
  }
  for_each_row_tokens(p, v, it, j0, [&](std::int64_t r, const float* ts, const float* to, std::int64_t st) {
    float* row = pr + r * row_stride;
    float s = sum_p[r], so = sum_po[r];
    for (std::int64_t c = 0; c < count; ++c) {
      // A masked key (P = 0) contributes nothing, whatever its scale slot holds (25.1 #24).
      const float x = row[c] == 0.0f ? 0.0f : row[c] * ts[c * st];
      row[c] = x;
      s += x;
      if (to && x != 0.0f) so += x * to[c * st];
    }
    sum_p[r] = s;
    sum_po[r] = so;
  });
}

void finish_values(const Problem& p, const WorkItem& it, float* acc, const float* sum_p, const float* sum_po) {
  const Antiquant& v = p.value_antiquant;
  const std::int64_t D = p.v_dim;
  const bool sums = value_needs_sums(p);
  for (std::int64_t r = 0; r < packed_rows(it); ++r) {
    float* row = acc + r * D;
    const std::int64_t h = kv_head(it, r);
    const float* cs = v.channel_scale.empty() ? nullptr : v.channel_scale.data() + h * D;
    const float* co = v.channel_offset.empty() ? nullptr : v.channel_offset.data() + h * D;
    const float po = sums ? sum_po[r] : 0.0f;
    for (std::int64_t d = 0; d < D; ++d) {
      float x = row[d];
      if (sums) x += (co ? co[d] * sum_p[r] : 0.0f) + po;
      row[d] = cs ? cs[d] * x : x;
    }
  }
}

}  // namespace fia::detail
