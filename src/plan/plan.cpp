#include "plan/plan.hpp"

#include <algorithm>

namespace fia::detail {

namespace {
constexpr std::int64_t kTileRows = 64;          // packed rows: reuse of each K/V tile
constexpr std::int64_t kTileCols = 128;         // KV columns per tile: K and V tiles stay in L2
constexpr std::int64_t kScoreBudget = 1 << 18;  // floats of stored scores per self-contained item
constexpr std::int64_t kChunkCols = 512;        // KV tokens per chunk of a split group
constexpr std::int64_t kSplitMaxRows = 16;      // query rows per item below which long rows split

std::size_t round16(std::size_t n) { return (n + 15) / 16 * 16; }
}  // namespace

void visible_columns(const Problem& p, std::int64_t b, std::int64_t row_begin, std::int64_t row_end,
                     std::int64_t* lo, std::int64_t* hi) {
  *lo = std::max<std::int64_t>(0, row_begin + p.band_lo[b]);
  *hi = std::min<std::int64_t>(p.kv_len(b) - 1, row_end - 1 + p.band_hi[b]);
}

CpuPlan make_cpu_plan(const Problem& p, int threads) {
  CpuPlan plan;
  plan.threads = std::max(threads, 1);
  plan.tile.cols = kTileCols;
  plan.chunk_cols = kChunkCols;
  const std::int64_t G = p.group;
  const std::int64_t kw = p.qk_dim + p.rope_dim, vd = p.v_dim;
  std::int64_t max_rows = G, max_scores = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t L = p.kv_len(b);
    if (p.act_q[b] == 0 || L == 0) continue;
    // Query rows per item: a full tile, fewer when the stored scores of a long row would not fit.
    const std::int64_t rows = std::clamp<std::int64_t>(kScoreBudget / (G * L), 1, std::max<std::int64_t>(1, kTileRows / G));
    const bool split_rows = p.act_q[b] <= kSplitMaxRows;
    for (std::int64_t h = 0; h < p.num_kv_heads; ++h) {
      for (std::int64_t r = 0; r < p.act_q[b]; r += rows) {
        WorkItem it{b, h, r, std::min(r + rows, p.act_q[b])};
        std::int64_t lo, hi;
        visible_columns(p, b, it.row_begin, it.row_end, &lo, &hi);
        if (lo > hi) continue;  // every row fully masked: stays 0 / +inf
        it.col_begin = lo;
        it.col_end = hi + 1;
        const std::int64_t R = (it.row_end - it.row_begin) * G, cols = it.col_end - it.col_begin;
        max_rows = std::max(max_rows, R);
        if (split_rows && cols > 2 * kChunkCols) {
          SplitGroup g;
          g.item = it;
          g.item.split = static_cast<std::int64_t>(plan.splits.size());
          g.chunks = (cols + kChunkCols - 1) / kChunkCols;
          g.offset = plan.global_floats;
          plan.global_floats += round16(static_cast<std::size_t>(R * cols + g.chunks * R * (2 + vd)));
          for (std::int64_t c = 0; c < g.chunks; ++c) {
            WorkItem ch = g.item;
            ch.chunk = c;
            ch.col_begin = it.col_begin + c * kChunkCols;
            ch.col_end = std::min(it.col_end, ch.col_begin + kChunkCols);
            plan.chunks.push_back(ch);
          }
          plan.splits.push_back(g);
        } else {
          max_scores = std::max(max_scores, R * cols);
          plan.items.push_back(it);
        }
      }
    }
  }
  plan.tile.rows = max_rows;
  const std::int64_t C = plan.tile.cols, R = max_rows;
  // Per worker: Q tile, K tile, V tile, stored scores, accumulators, row max and sum.
  plan.floats_per_thread =
      round16(R * kw) + round16(C * kw) + round16(C * vd) + round16(max_scores) + round16(R * vd) + 2 * round16(R);
  const bool any = !plan.items.empty() || !plan.splits.empty();
  plan.workspace_bytes = any ? (plan.floats_per_thread * plan.threads + plan.global_floats) * sizeof(float) + 64 : 0;
  return plan;
}

}  // namespace fia::detail
