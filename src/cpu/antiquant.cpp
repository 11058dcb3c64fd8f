#include "cpu/antiquant.hpp"

namespace fia::detail {

namespace {

std::int64_t kv_head(const WorkItem& it, std::int64_t r) { return it.h + (r / it.heads) % it.kv_heads; }

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

bool row_token_scales(const Problem& p, const Antiquant& q, const WorkItem& it, std::int64_t r, std::int64_t j0,
                      const float** scales, std::int64_t* stride) {
  if (!q.per_token) return false;
  *scales = q.token_scale + p.token_factor_offset(q, it.b, kv_head(it, r), j0);
  *stride = q.token_stride;
  return true;
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
