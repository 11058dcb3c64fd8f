#include "cpu/run.hpp"

#include "cpu/full_quant.hpp"
#include "cpu/item_common.hpp"
#include "cpu/mla_full_quant.hpp"
#include "cpu/thread_placement.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <map>
#include <memory>
#include <mutex>
#include <new>

namespace fia::detail {

namespace {

std::size_t round16(std::size_t n) { return (n + 15) / 16 * 16; }

/// One worker's slice of the workspace (layout as sized by make_cpu_plan).
struct Scratch {
  float* slice = nullptr;  ///< the worker's plan.floats_per_thread floats
  ItemScratch tiles;
  float* acc = nullptr;
  float* m = nullptr;
  float* l = nullptr;
  float* spare_max = nullptr;
  float* entering = nullptr;
  float* norm = nullptr;
  float* widened_k = nullptr;  ///< the K and V columns of tiles.kv (with a WidenedKv)
  float* widened_v = nullptr;
  float* group = nullptr;  ///< a whole split group's scores and partials (CpuPlan::whole_groups)
  float* scores = nullptr;
};

Scratch scratch_for(const Problem& p, const CpuPlan& plan, float* base, int thread) {
  const std::int64_t R = plan.tile.rows, C = plan.tile.cols;
  const std::int64_t kw = p.qk_dim + p.rope_dim, vd = p.v_dim;
  float* f = base + static_cast<std::size_t>(thread) * plan.floats_per_thread;
  auto take = [&](std::size_t n) {
    float* r = f;
    f += round16(n);
    return r;
  };
  Scratch s;
  s.slice = f;
  if (p.full_quant.on || p.mla_full_quant.on) return s;  // carved by (mla_)full_quant_item
  s.tiles.q = take(R * kw);
  s.tiles.k = take(C * kw);
  s.tiles.v = take(C * v_tile_stride(vd));
  s.tiles.acc_t = take(R * vd);
  s.acc = take(R * vd);
  s.m = take(R);
  s.l = take(R);
  s.spare_max = take(R);
  s.entering = take(R);
  s.norm = take(R);
  if (plan.widened_kv_cols > 0) {
    s.tiles.kv = reinterpret_cast<WidenedKv*>(take(kWidenedKvFloats));
    s.widened_k = take(plan.widened_kv_cols * kw);
    s.widened_v = take(plan.widened_kv_cols * v_tile_stride(vd));
  }
  if (plan.group_floats > 0) s.group = take(plan.group_floats);
  s.scores = f;
  return s;
}

/// Empties every worker's WidenedKv: the workspace is the caller's, and may hold another call's.
void reset_widened_kv(const Problem& p, const CpuPlan& plan, float* base) {
  if (plan.widened_kv_cols == 0) return;
  for (int t = 0; t < plan.threads; ++t) {
    const Scratch s = scratch_for(p, plan, base, t);
    new (s.tiles.kv) WidenedKv{.capacity = plan.widened_kv_cols, .k = s.widened_k, .v = s.widened_v};
  }
}

/// The layout of an item's scores: column-major (stride Rp) for wide items, row-major otherwise.
ScoreView score_view(const WorkItem& it, float* base, std::int64_t cols) {
  if (is_wide(it)) return {base, 1, padded_rows(it)};
  return {base, cols, 1};
}

/// A split group's storage: in its wave's buffer, or in a worker's scratch (CpuPlan::whole_groups).
struct GroupStore {
  ScoreView scores;  ///< stored groups only
  std::int64_t R, Rp, vd;
  float* partials;
  float* max(std::int64_t c) const { return partials + c * Rp * (2 + vd); }
  float* sum(std::int64_t c) const { return max(c) + Rp; }
  float* acc(std::int64_t c) const { return max(c) + 2 * Rp; }
};

GroupStore store_of(const Problem& p, const SplitGroup& g, float* base) {
  GroupStore s;
  s.R = packed_rows(g.item);
  s.Rp = padded_rows(g.item);
  s.vd = p.v_dim;
  if (g.stored) s.scores = score_view(g.item, base + g.scores_offset, g.item.col_end - g.item.col_begin);
  s.partials = base + g.partial_offset;
  return s;
}

/// fia::Options::softmax_max: m[r] = max(m[r], the row's given value) on rows that see something,
/// before phase B forms P against m (phase C then uses the same m).
void apply_softmax_max(const Problem& p, const WorkItem& it, float* m) {
  if (p.softmax_max_rows.base == nullptr) return;
  for (std::int64_t r = 0; r < packed_rows(it); ++r)
    if (m[r] != -std::numeric_limits<float>::infinity())
      m[r] = std::max(m[r], p.softmax_max_floor(it.b, it.query_head(p.group, r), it.query_row(r)));
}

/// The row max phase B takes E against, for a split group: the exact max over its chunks'
/// maxima, raised to Options::softmax_max.
void group_max(const Problem& p, const SplitGroup& g, const GroupStore& s, float* m) {
  std::fill(m, m + s.Rp, -std::numeric_limits<float>::infinity());
  for (std::int64_t c = 0; c < g.chunks; ++c)
    for (std::int64_t r = 0; r < s.Rp; ++r) m[r] = std::max(m[r], s.max(c)[r]);
  apply_softmax_max(p, g.item, m);
}

/// Where chunk `ch` keeps its scores: in the wave buffer, or (recomputed) in the worker's scratch.
ScoreView chunk_scores(const SplitGroup& g, const GroupStore& st, const WorkItem& ch, const Scratch& s) {
  if (g.stored) return st.scores.at_column(ch.col_begin - g.item.col_begin);
  return score_view(ch, s.scores, ch.col_end - ch.col_begin);
}

/// The learnable sink of packed row r, or -inf (no sink, padding rows).
float sink_of(const Problem& p, const WorkItem& it, std::int64_t r) {
  if (!p.has_sink || r >= packed_rows(it)) return -std::numeric_limits<float>::infinity();
  return p.sink[it.query_head(p.group, r)];
}

/// For PRule kRunningMax: m = max(m, sink) on rows that see something (RowStats::max).
void include_sink(const Problem& p, const WorkItem& it, float* m) {
  if (p.p_rule.kind != PRule::Kind::kRunningMax || !p.has_sink) return;
  for (std::int64_t r = 0; r < packed_rows(it); ++r)
    if (m[r] != -std::numeric_limits<float>::infinity()) m[r] = std::max(m[r], sink_of(p, it, r));
}

/// Phase B's row stats of an item or chunk (FIA-SPEC 25.3), in the worker's scratch; s.m holds the
/// row max over the whole row. A chunk of a split group reads the partials `st` of its group's
/// `chunks` chunks.
RowStats row_stats(const Problem& p, const WorkItem& it, const Scratch& s, const GroupStore* st = nullptr,
                   std::int64_t chunks = 0) {
  RowStats rs;
  rs.max = s.m;
  include_sink(p, it, s.m);
  const std::int64_t Rp = padded_rows(it);
  if (p.p_rule.kind == PRule::Kind::kRunningMax) {
    for (std::int64_t r = 0; r < Rp; ++r) {
      s.entering[r] = sink_of(p, it, r);
      for (std::int64_t c = 0; st && c < it.chunk; ++c) s.entering[r] = std::max(s.entering[r], st->max(c)[r]);
    }
    rs.entering = s.entering;
  }
  if (p.p_rule.kind == PRule::Kind::kNormalizeFirst && st) {
    for (std::int64_t r = 0; r < Rp; ++r) {
      float l = 0.0f;
      for (std::int64_t c = 0; c < chunks; ++c) l += st->sum(c)[r];
      s.norm[r] = r < packed_rows(it) && s.m[r] != -std::numeric_limits<float>::infinity()
                      ? row_norm(p, it.query_head(p.group, r), s.m[r], l)
                      : 0.0f;
    }
    rs.norm = s.norm;
  }
  return rs;
}

/// A oneTBB task arena and the threads that ran its slots (cpu/thread_placement.hpp).
struct Arena {
  explicit Arena(int workers) : arena(workers), threads(arena) {}
  tbb::task_arena arena;
  ArenaThreads threads;
};

/// One arena per worker count, reused across calls.
Arena& arena_for(int workers) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<Arena>> arenas;
  std::lock_guard<std::mutex> lock(mu);
  auto& a = arenas[workers];
  if (!a) a = std::make_unique<Arena>(workers);
  return *a;
}

/// The per-thread scratch of one call: `base` holds plan.threads slots. With one worker the call
/// runs on the calling thread alone and `arena` is null: a oneTBB arena always has at least two
/// slots (one reserved for an external thread), so concurrent calls sharing a one-worker arena
/// would otherwise see slot index 1 and write past a one-slot workspace.
struct Slots {
  float* base;
  Arena* arena;
};

/// fn(i, scratch) for i in [begin, end), one index per task, on the arena's workers.
template <class Fn>
void parallel_each(const Problem& p, const CpuPlan& plan, const Slots& slots, std::int64_t begin, std::int64_t end,
                   Fn fn) {
  if (slots.arena == nullptr) {
    const Scratch s = scratch_for(p, plan, slots.base, 0);
    for (std::int64_t i = begin; i < end; ++i) fn(i, s);
    return;
  }
  LoopPlacement placement(slots.arena->threads, end - begin);
  tbb::parallel_for(
      tbb::blocked_range<std::int64_t>(begin, end, 1),
      [&](const tbb::blocked_range<std::int64_t>& r) {
        const int slot = tbb::this_task_arena::current_thread_index();
        placement.task_started(slot);
        const Scratch s = scratch_for(p, plan, slots.base, slot);
        for (std::int64_t i = r.begin(); i < r.end(); ++i) fn(i, s);
      },
      tbb::simple_partitioner());
}

/// The stages of a split group's chunks (FIA-SPEC 25.3): phase A, the row sums of kNormalizeFirst,
/// phase B, and the merge of the group's chunks in chunk order. Every stage of a chunk reads
/// what the stages before wrote for all chunks of its group, so a wave runs each stage for all
/// its chunks before the next, or a worker runs one group through all its stages; a chunk computes
/// the same bits either way.
struct SplitStages {
  const Problem& p;
  const CpuPlan& plan;
  float* wave;
  const OutputRows& dst;

  /// Its scores (kept only when the group is stored) and row max.
  void phase_a(const WorkItem& ch, const Scratch& s) const {
    const SplitGroup& g = plan.splits[ch.split];
    const GroupStore st = store(g, s);
    item_scores(p, plan, ch, s.tiles, chunk_scores(g, st, ch, s), st.max(ch.chunk));
  }
  /// IncreFlashAttention normalises P before rounding it (25.3): the row sums come first.
  void exp_sums(const WorkItem& ch, const Scratch& s) const {
    after_phase_a(ch, s, [&](const SplitGroup&, const GroupStore& st, ScoreView sv) {
      item_exp_sums(ch, sv, s.m, st.sum(ch.chunk));
    });
  }
  /// P·V with the exact max over the whole row.
  void phase_b(const WorkItem& ch, const Scratch& s) const {
    after_phase_a(ch, s, [&](const SplitGroup& g, const GroupStore& st, ScoreView sv) {
      // The row sums of kNormalizeFirst are in place already (and read by the other chunks).
      float* l = p.p_rule.kind == PRule::Kind::kNormalizeFirst ? s.l : st.sum(ch.chunk);
      item_accumulate(p, plan, ch, s.tiles, sv, row_stats(p, ch, s, &st, g.chunks), l, st.acc(ch.chunk));
    });
  }
  /// The group's chunks summed in chunk order, then normalised.
  void merge(std::int64_t gi, const Scratch& s) const {
    const SplitGroup& g = plan.splits[gi];
    const GroupStore st = store(g, s);
    group_max(p, g, st, s.m);
    include_sink(p, g.item, s.m);
    std::fill(s.l, s.l + st.R, 0.0f);
    std::fill(s.acc, s.acc + st.R * st.vd, 0.0f);
    for (std::int64_t c = 0; c < g.chunks; ++c) {
      for (std::int64_t r = 0; r < st.R; ++r) s.l[r] += st.sum(c)[r];
      for (std::int64_t i = 0; i < st.R * st.vd; ++i) s.acc[i] += st.acc(c)[i];
    }
    item_finalize(p, g.item, s.m, s.l, s.acc, dst);
  }
  /// Group g's storage: in its wave's buffer, or in the worker's scratch when groups run whole.
  GroupStore store(const SplitGroup& g, const Scratch& s) const {
    return store_of(p, g, plan.whole_groups ? s.group : wave);
  }
  /// Every stage of group gi on one worker (CpuPlan::whole_groups). Each chunk's prefetches run
  /// on into the next chunk's rows, which the same worker reads next (Zen 4 VM, 2 threads, cold,
  /// ABBA in one process: D1 0.959-0.980x the time on AVX3 and 0.963-0.980x on AVX2, D2
  /// 0.965-0.984x on AVX3 and 0.981-1.011x on AVX2, 4 sets each).
  void whole_group(std::int64_t gi, const Scratch& s) const {
    const SplitGroup& g = plan.splits[gi];
    auto chunk = [&](std::int64_t c) {
      WorkItem ch = chunk_item(g, c);
      ch.prefetch_end = g.item.col_end;
      return ch;
    };
    for (std::int64_t c = 0; c < g.chunks; ++c) phase_a(chunk(c), s);
    if (p.p_rule.kind == PRule::Kind::kNormalizeFirst)
      for (std::int64_t c = 0; c < g.chunks; ++c) exp_sums(chunk(c), s);
    for (std::int64_t c = 0; c < g.chunks; ++c) phase_b(chunk(c), s);
    merge(gi, s);
  }

 private:
  /// fn(group, its storage, the chunk's scores) with s.m the exact row max of the chunk's group;
  /// scores of groups too large to store are recomputed first.
  template <class Fn>
  void after_phase_a(const WorkItem& ch, const Scratch& s, Fn fn) const {
    const SplitGroup& g = plan.splits[ch.split];
    const GroupStore st = store(g, s);
    const ScoreView sv = chunk_scores(g, st, ch, s);
    if (!g.stored) item_scores(p, plan, ch, s.tiles, sv, s.spare_max);
    group_max(p, g, st, s.m);
    fn(g, st, sv);
  }
};

}  // namespace

void cpu_run(const Problem& p, const CpuPlan& plan, const OutputRows& dst, void* workspace, int threads) {
  if (plan.items.empty() && plan.splits.empty()) return;
  auto* base = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(workspace) + 63) & ~std::uintptr_t{63});
  float* wave = base + plan.floats_per_thread * static_cast<std::size_t>(plan.threads);
  const int workers = std::clamp(threads, 1, plan.threads);
  const Slots slots{base, workers == 1 ? nullptr : &arena_for(workers)};
  reset_widened_kv(p, plan, base);
  const auto n_items = static_cast<std::int64_t>(plan.items.size());
  auto body = [&] {
    if (p.full_quant.on || p.mla_full_quant.on) {  // FIA-SPEC 13.1, 13.3: own pipelines, one item over all its chunks
      const auto item = p.full_quant.on ? full_quant_item : mla_full_quant_item;
      parallel_each(p, plan, slots, 0, n_items,
                    [&](std::int64_t w, const Scratch& s) { item(p, plan.items[w], s.slice, dst); });
      return;
    }
    parallel_each(p, plan, slots, 0, n_items, [&](std::int64_t w, const Scratch& s) {
      const WorkItem& it = plan.items[w];
      if (w + 1 < n_items) prefetch_query_rows(p, plan.items[w + 1]);
      const ScoreView sv = score_view(it, s.scores, it.col_end - it.col_begin);
      item_scores(p, plan, it, s.tiles, sv, s.m);
      prefetch_output_rows(p, it, dst);
      apply_softmax_max(p, it, s.m);
      item_accumulate(p, plan, it, s.tiles, sv, row_stats(p, it, s), s.l, s.acc);
      item_finalize(p, it, s.m, s.l, s.acc, dst);
    });
    const SplitStages stages{p, plan, wave, dst};
    if (plan.whole_groups)
      parallel_each(p, plan, slots, 0, static_cast<std::int64_t>(plan.splits.size()),
                    [&](std::int64_t gi, const Scratch& s) { stages.whole_group(gi, s); });
    for (const Wave& wv : plan.waves) {
      auto each_chunk = [&](auto stage) {
        parallel_each(p, plan, slots, wv.chunk_begin, wv.chunk_end,
                      [&](std::int64_t w, const Scratch& s) { (stages.*stage)(plan.chunks[w], s); });
      };
      each_chunk(&SplitStages::phase_a);
      if (p.p_rule.kind == PRule::Kind::kNormalizeFirst) each_chunk(&SplitStages::exp_sums);
      each_chunk(&SplitStages::phase_b);
      parallel_each(p, plan, slots, wv.group_begin, wv.group_end,
                    [&](std::int64_t gi, const Scratch& s) { stages.merge(gi, s); });
    }
  };
  if (slots.arena == nullptr)
    body();
  else
    slots.arena->arena.execute(body);
}

}  // namespace fia::detail
