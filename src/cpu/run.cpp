#include "cpu/run.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <omp.h>

namespace fia::detail {

namespace {

std::size_t round16(std::size_t n) { return (n + 15) / 16 * 16; }

/// One worker's slice of the workspace.
struct Scratch {
  TileBuffers tiles;
  float* scores = nullptr;
  float* acc = nullptr;
  float* m = nullptr;
  float* l = nullptr;
};

Scratch scratch_for(const Problem& p, const CpuPlan& plan, float* base, int thread) {
  const std::int64_t R = plan.tile.rows, C = plan.tile.cols;
  const std::int64_t kw = p.qk_dim + p.rope_dim, vd = p.v_dim;
  float* f = base + static_cast<std::size_t>(thread) * plan.floats_per_thread;
  Scratch s;
  s.tiles.q = f;
  f += round16(R * kw);
  s.tiles.k = f;
  f += round16(C * kw);
  s.tiles.v = f;
  f += round16(C * vd);
  s.acc = f;
  f += round16(R * vd);
  s.m = f;
  f += round16(R);
  s.l = f;
  f += round16(R);
  s.scores = f;
  return s;
}

/// A split group's storage: scores [R x cols], then per chunk max [R], sum [R], acc [R x v_dim].
struct GroupStore {
  float* scores;
  std::int64_t ld, R;
  float* chunk_base;
  std::int64_t vd;
  float* max(std::int64_t c) const { return chunk_base + c * R * (2 + vd); }
  float* sum(std::int64_t c) const { return max(c) + R; }
  float* acc(std::int64_t c) const { return max(c) + 2 * R; }
};

GroupStore store_of(const Problem& p, const SplitGroup& g, float* global) {
  GroupStore s;
  s.R = (g.item.row_end - g.item.row_begin) * p.group;
  s.ld = g.item.col_end - g.item.col_begin;
  s.vd = p.v_dim;
  s.scores = global + g.offset;
  s.chunk_base = s.scores + s.R * s.ld;
  return s;
}

/// The exact row max of a split group: the max over its chunks' maxima.
void group_max(const GroupStore& s, std::int64_t chunks, float* m) {
  std::fill(m, m + s.R, -std::numeric_limits<float>::infinity());
  for (std::int64_t c = 0; c < chunks; ++c)
    for (std::int64_t r = 0; r < s.R; ++r) m[r] = std::max(m[r], s.max(c)[r]);
}

}  // namespace

void cpu_run(const Problem& p, const CpuPlan& plan, const OutputRows& dst, void* workspace, int threads) {
  if (plan.items.empty() && plan.splits.empty()) return;
  auto* base = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(workspace) + 63) & ~std::uintptr_t{63});
  float* global = base + plan.floats_per_thread * static_cast<std::size_t>(plan.threads);
  const int workers = std::clamp(threads, 1, plan.threads);
  const auto n_items = static_cast<std::int64_t>(plan.items.size());
  const auto n_chunks = static_cast<std::int64_t>(plan.chunks.size());
  const auto n_splits = static_cast<std::int64_t>(plan.splits.size());
  const std::int64_t vd = p.v_dim;

#pragma omp parallel num_threads(workers)
  {
    const Scratch s = scratch_for(p, plan, base, omp_get_thread_num());
    // Self-contained items (all phases), and phase A of every chunk of the split groups.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t w = 0; w < n_items + n_chunks; ++w) {
      if (w < n_items) {
        const WorkItem& it = plan.items[w];
        const std::int64_t ld = it.col_end - it.col_begin;
        item_scores(p, plan.tile, it, s.tiles, s.scores, ld, s.m);
        item_accumulate(p, plan.tile, it, s.tiles, s.scores, ld, s.m, s.l, s.acc);
        item_finalize(p, it, s.m, s.l, s.acc, dst);
      } else {
        const WorkItem& ch = plan.chunks[w - n_items];
        const SplitGroup& g = plan.splits[ch.split];
        const GroupStore st = store_of(p, g, global);
        item_scores(p, plan.tile, ch, s.tiles, st.scores + (ch.col_begin - g.item.col_begin), st.ld, st.max(ch.chunk));
      }
    }
    // Phase B of every chunk, with the exact max over the whole row.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t w = 0; w < n_chunks; ++w) {
      const WorkItem& ch = plan.chunks[w];
      const SplitGroup& g = plan.splits[ch.split];
      const GroupStore st = store_of(p, g, global);
      group_max(st, g.chunks, s.m);
      item_accumulate(p, plan.tile, ch, s.tiles, st.scores + (ch.col_begin - g.item.col_begin), st.ld, s.m,
                      st.sum(ch.chunk), st.acc(ch.chunk));
    }
    // Merge the chunks of each group in chunk order, then normalise.
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t gi = 0; gi < n_splits; ++gi) {
      const SplitGroup& g = plan.splits[gi];
      const GroupStore st = store_of(p, g, global);
      group_max(st, g.chunks, s.m);
      std::fill(s.l, s.l + st.R, 0.0f);
      std::fill(s.acc, s.acc + st.R * vd, 0.0f);
      for (std::int64_t c = 0; c < g.chunks; ++c) {
        for (std::int64_t r = 0; r < st.R; ++r) s.l[r] += st.sum(c)[r];
        for (std::int64_t i = 0; i < st.R * vd; ++i) s.acc[i] += st.acc(c)[i];
      }
      item_finalize(p, g.item, s.m, s.l, s.acc, dst);
    }
  }
}

}  // namespace fia::detail
