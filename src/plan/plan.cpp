#include "plan/plan.hpp"

#include <algorithm>

namespace fia::detail {

namespace {
constexpr std::int64_t kTileRows = 64;  // packed rows: enough reuse of each K/V tile
constexpr std::int64_t kTileCols = 128;  // KV columns: a K and a V tile of D = 128 fit in L2
}  // namespace

std::size_t tile_floats(const Problem& p, const TileShape& t) {
  const std::int64_t qk = p.qk_dim + p.rope_dim;
  const std::int64_t floats = t.rows * qk       // Q tile
                              + t.cols * qk     // K tile
                              + t.cols * p.v_dim  // V tile
                              + t.rows * t.cols   // scores
                              + t.rows * p.v_dim  // accumulators
                              + 2 * t.rows;       // running max and sum
  return static_cast<std::size_t>(floats) + 16;   // room to align each buffer
}

CpuPlan make_cpu_plan(const Problem& p, int threads) {
  CpuPlan plan;
  plan.threads = std::max(threads, 1);
  const std::int64_t q_rows = std::max<std::int64_t>(1, kTileRows / p.group);
  plan.tile.rows = q_rows * p.group;
  plan.tile.cols = kTileCols;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    if (p.act_q[b] == 0 || p.kv_len(b) == 0) continue;
    for (std::int64_t h = 0; h < p.num_kv_heads; ++h)
      for (std::int64_t r = 0; r < p.act_q[b]; r += q_rows)
        plan.items.push_back({b, h, r, std::min(r + q_rows, p.act_q[b])});
  }
  plan.floats_per_thread = (tile_floats(p, plan.tile) + 15) / 16 * 16;
  plan.workspace_bytes = plan.items.empty() ? 0 : plan.floats_per_thread * sizeof(float) * plan.threads + 64;
  return plan;
}

}  // namespace fia::detail
