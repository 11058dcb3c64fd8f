#include "cpu/antiquant.hpp"

namespace fia::detail {

namespace {

std::int64_t kv_head(const WorkItem& it, std::int64_t r) { return it.h + (r / it.heads) % it.kv_heads; }

/// Calls fn(r, ts, token_stride) per packed row with the row's token scales from column j0.
template <class Fn>
void for_each_row_tokens(const Problem& p, const Antiquant& q, const WorkItem& it, std::int64_t j0, Fn fn) {
  for (std::int64_t r = 0; r < packed_rows(it); ++r)
    fn(r, q.token_scale + p.token_factor_offset(q, it.b, kv_head(it, r), j0), q.token_stride);
}

}  // namespace

void fold_key_scale(const Problem& p, const WorkItem& it, float* q, std::int64_t kw) {
  const Antiquant& k = p.key_antiquant;
  if (k.channel_scale.empty()) return;
  const std::int64_t D = p.qk_dim;
  for (std::int64_t r = 0; r < packed_rows(it); ++r) {
    float* row = q + r * kw;
    const float* cs = k.channel_scale.data() + kv_head(it, r) * D;
    for (std::int64_t d = 0; d < D; ++d) row[d] *= cs[d];
  }
}

void finish_key_scores(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, float* s,
                       std::int64_t row_stride) {
  const Antiquant& k = p.key_antiquant;
  if (!k.per_token) return;
  for_each_row_tokens(p, k, it, j0, [&](std::int64_t r, const float* ts, std::int64_t st) {
    float* row = s + r * row_stride;
    for (std::int64_t c = 0; c < count; ++c) row[c] *= ts[c * st];
  });
}

void scale_p_for_values(const Problem& p, const WorkItem& it, std::int64_t j0, std::int64_t count, float* pr,
                        std::int64_t row_stride) {
  const Antiquant& v = p.value_antiquant;
  if (!v.per_token) return;
  for_each_row_tokens(p, v, it, j0, [&](std::int64_t r, const float* ts, std::int64_t st) {
    float* row = pr + r * row_stride;
    for (std::int64_t c = 0; c < count; ++c) row[c] = row[c] == 0.0f ? 0.0f : row[c] * ts[c * st];
  });
}

void finish_values(const Problem& p, const WorkItem& it, float* acc) {
  const Antiquant& v = p.value_antiquant;
  if (v.channel_scale.empty()) return;
  const std::int64_t D = p.v_dim;
  for (std::int64_t r = 0; r < packed_rows(it); ++r) {
    float* row = acc + r * D;
    const float* cs = v.channel_scale.data() + kv_head(it, r) * D;
    for (std::int64_t d = 0; d < D; ++d) row[d] *= cs[d];
  }
}

}  // namespace fia::detail
