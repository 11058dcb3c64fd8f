#include "plan/plan.hpp"

#include "cpu/attention_item.hpp"
#include "cpu/full_quant.hpp"
#include "cpu/item_common.hpp"
#include "cpu/mla_full_quant.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

namespace fia::detail {

void visible_columns(const Problem& p, std::int64_t b, std::int64_t row_begin, std::int64_t row_end,
                     std::int64_t* lo, std::int64_t* hi) {
  *lo = std::max<std::int64_t>(0, row_begin + p.band_lo[b]);
  *hi = std::min<std::int64_t>(p.kv_len(b) - 1, row_end - 1 + p.band_hi[b]);
}

namespace {
constexpr std::int64_t kTileRows = 64;        // packed rows per item: reuse of each K/V tile
constexpr std::int64_t kMaxHeads = 256;       // query heads packed into one item at most
constexpr std::int64_t kTileCols = 128;       // KV columns per tile: K and V tiles stay in L2
constexpr std::int64_t kSplitMaxRows = 16;    // query rows below which long rows split for parallelism
constexpr std::int64_t kNarrowMaxRows = 64;   // packed rows of a narrow item spanning several KV heads

std::size_t round16(std::int64_t n) { return static_cast<std::size_t>((n + 15) / 16 * 16); }

/// Columns of each worker's WidenedKv: none unless some KV head has two self-contained wide items
/// on the tiled kernels (the row blocks of a prefill) and those read widened columns (not when
/// bf16 dot products read K and V where they are stored), else as many as the widest of them
/// spans, within lim.widened_kv_bytes, and at least a tile.
std::int64_t widened_kv_columns(const Problem& p, const CpuPlan& plan, const PlanLimits& lim) {
  if (plan.kernels.wide_reads_kv_in_place) return 0;
  const std::int64_t per_column = (p.qk_dim + p.rope_dim + v_tile_stride(p.v_dim)) * std::int64_t{sizeof(float)};
  const std::int64_t most = lim.widened_kv_bytes / per_column;
  std::int64_t span = 0;
  bool shared = false;
  const WorkItem* last = nullptr;
  for (const WorkItem& it : plan.items) {
    if (!is_wide(it) || runs_in_place(plan, it)) continue;
    shared = shared || (last != nullptr && last->b == it.b && last->h == it.h);
    span = std::max(span, it.col_end - it.col_begin);
    last = &it;
  }
  const std::int64_t cols = std::min(span, most);
  return shared && cols >= std::min(span, kTileCols) ? cols : 0;
}

/// True when the items and split groups of `plan` write every row of attention_out. Each writes
/// every row it covers, fully masked ones included (item_finalize, fq::write_item_row), and no
/// two cover the same row, so they cover every row exactly when their rows add up to the output's.
bool writes_every_row(const Problem& p, const CpuPlan& plan) {
  std::int64_t out_elements = 1;
  for (const std::int64_t d : p.out_shape) out_elements *= d;
  if (out_elements == 0) return true;
  std::int64_t rows = 0;
  for (const WorkItem& it : plan.items) rows += packed_rows(it);
  for (const SplitGroup& g : plan.splits) rows += packed_rows(g.item);
  return rows * p.v_dim == out_elements;
}

/// The schedule of every call but the full-quant ones: make_cpu_plan.
CpuPlan attention_plan(const Problem& p, int threads, const PlanLimits& lim) {
  CpuPlan plan;
  plan.kernels = select_item_kernels(p);
  plan.threads = std::max(threads, 1);
  plan.tile.cols = kTileCols;
  const std::int64_t G = p.group, vd = p.v_dim, kw = p.qk_dim + p.rope_dim;
  const std::int64_t heads = std::min(G, kMaxHeads);
  std::int64_t max_rows = kRowPad, thread_scores = 0;
  // Every item of the call, and whether it is decode-like (few query rows over a long KV range).
  std::vector<std::pair<WorkItem, bool>> candidates;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t L = p.kv_len(b);
    if (p.act_q[b] == 0 || L == 0) continue;
    // Query rows per item: a full tile, fewer when the stored scores of a long row would not fit.
    const std::int64_t rows =
        std::clamp<std::int64_t>(lim.score_budget / (heads * L), 1, std::max<std::int64_t>(1, kTileRows / heads));
    const bool decode_like = p.act_q[b] <= kSplitMaxRows;
    // Decode over a layout whose KV heads interleave within a token row: one item takes several
    // KV heads, so that each token row is read once, sequentially.
    const std::int64_t item_rows = std::min(rows, p.act_q[b]);
    const std::int64_t kv_group = decode_like && p.kv_heads_interleaved() && heads == G && item_rows * G < kWideRows
                                      ? std::clamp<std::int64_t>(kNarrowMaxRows / (item_rows * G), 1, p.num_kv_heads)
                                      : 1;
    for (std::int64_t h = 0; h < p.num_kv_heads; h += kv_group) {
      for (std::int64_t g0 = 0; g0 < G; g0 += heads) {
        for (std::int64_t r = 0; r < p.act_q[b]; r += rows) {
          WorkItem it;
          it.b = b;
          it.h = h;
          it.kv_heads = std::min(kv_group, p.num_kv_heads - h);
          it.row_begin = r;
          it.row_end = std::min(r + rows, p.act_q[b]);
          it.head0 = g0;
          it.heads = std::min(heads, G - g0);
          std::int64_t lo, hi;
          visible_columns(p, b, it.row_begin, it.row_end, &lo, &hi);
          if (lo > hi) continue;  // every row fully masked: stays 0 / +inf
          it.col_begin = lo;
          it.col_end = hi + 1;
          candidates.emplace_back(it, decode_like);
        }
      }
    }
  }
  // Long decode-like rows split for parallelism only when the call has few items (a count of the
  // problem's, not of the workers: the bits never depend on the thread count).
  const bool split_decode = static_cast<std::int64_t>(candidates.size()) < lim.split_items_below;
  std::vector<SplitGroup> groups;
  for (const auto& [it, decode_like] : candidates) {
    const std::int64_t Rp = padded_rows(it), cols = it.col_end - it.col_begin;
    max_rows = std::max(max_rows, Rp);
    const bool too_big = Rp * cols > lim.score_budget;
    if (!too_big && !(split_decode && decode_like && cols > 2 * lim.chunk_cols)) {
      thread_scores = std::max(thread_scores, Rp * cols);
      plan.items.push_back(it);
      continue;
    }
    SplitGroup g;
    g.item = it;
    g.item.split = static_cast<std::int64_t>(groups.size());
    // Chunks: lim.chunk_cols tokens or lim.chunk_bytes of K and V rows, longer when the partials
    // would not fit half a wave.
    const std::int64_t per_chunk = Rp * (2 + vd);
    const std::int64_t max_chunks = std::max<std::int64_t>(1, lim.wave_budget / 2 / per_chunk);
    const std::int64_t token_bytes =
        it.kv_heads * (kv_row_bytes(p, p.qk_dim) + kv_row_bytes(p, p.v_dim) +
                       p.rope_dim * static_cast<std::int64_t>(dtype_size(p.rope_dtype)));
    g.chunk_cols = std::max({lim.chunk_cols, lim.chunk_bytes / std::max<std::int64_t>(1, token_bytes),
                             (cols + max_chunks - 1) / max_chunks});
    g.chunk_origin = it.col_begin;
    if (p.p_rule.kind == PRule::Kind::kRunningMax) {  // chunks on the grid of the running max (25.3)
      const std::int64_t t = p.p_rule.tile_cols;
      g.chunk_cols = (g.chunk_cols + t - 1) / t * t;
      g.chunk_origin = it.col_begin / g.chunk_cols * g.chunk_cols;
    }
    g.chunks = (it.col_end - g.chunk_origin + g.chunk_cols - 1) / g.chunk_cols;
    g.stored = Rp * cols + g.chunks * per_chunk <= lim.wave_budget;
    if (!g.stored) thread_scores = std::max(thread_scores, Rp * g.chunk_cols);
    groups.push_back(g);
  }
  // With enough groups for every worker, each runs whole on one worker, its storage in the
  // worker's scratch; otherwise pack the groups into waves that fit the wave budget, in order.
  auto scores_floats = [&](const SplitGroup& g) {
    return round16(padded_rows(g.item) * (g.item.col_end - g.item.col_begin));
  };
  auto partial_floats = [&](const SplitGroup& g) { return round16(g.chunks * padded_rows(g.item) * (2 + vd)); };
  plan.whole_groups = !groups.empty() &&
                      static_cast<std::int64_t>(groups.size()) >= lim.whole_groups_from * plan.threads &&
                      std::all_of(groups.begin(), groups.end(), [&](const SplitGroup& g) {
                        return scores_floats(g) + partial_floats(g) <= static_cast<std::size_t>(lim.score_budget);
                      });
  if (plan.whole_groups)
    for (SplitGroup& g : groups) {
      g.stored = true;
      g.scores_offset = 0;
      g.partial_offset = scores_floats(g);
      plan.group_floats = std::max(plan.group_floats, scores_floats(g) + partial_floats(g));
      for (std::int64_t c = 0; c < g.chunks; ++c) plan.chunks.push_back(chunk_item(g, c));
    }
  std::size_t used = 0;
  for (std::size_t gi = 0; gi < groups.size() && !plan.whole_groups; ++gi) {
    SplitGroup& g = groups[gi];
    const std::size_t scores = g.stored ? scores_floats(g) : 0;
    if (plan.waves.empty() || used + scores + partial_floats(g) > static_cast<std::size_t>(lim.wave_budget)) {
      plan.waves.push_back({static_cast<std::int64_t>(gi), static_cast<std::int64_t>(gi),
                            static_cast<std::int64_t>(plan.chunks.size()), static_cast<std::int64_t>(plan.chunks.size())});
      used = 0;
    }
    g.scores_offset = used;
    used += scores;
    g.partial_offset = used;
    used += partial_floats(g);
    plan.wave_floats = std::max(plan.wave_floats, used);
    for (std::int64_t c = 0; c < g.chunks; ++c) plan.chunks.push_back(chunk_item(g, c));
    Wave& w = plan.waves.back();
    w.group_end = static_cast<std::int64_t>(gi) + 1;
    w.chunk_end = static_cast<std::int64_t>(plan.chunks.size());
  }
  // Within a wave, run the chunks of one batch position by position across KV heads, so that
  // heads interleaved within a token row (BSH, paged BnBsH) read neighbouring memory together.
  for (const Wave& w : plan.waves)
    std::stable_sort(plan.chunks.begin() + w.chunk_begin, plan.chunks.begin() + w.chunk_end,
                     [](const WorkItem& x, const WorkItem& y) {
                       return std::tie(x.b, x.chunk, x.row_begin, x.head0, x.h) <
                              std::tie(y.b, y.chunk, y.row_begin, y.head0, y.h);
                     });
  plan.splits = std::move(groups);
  // More workers than independent pieces of work would only hold scratch; and a call too small to
  // amortise waking them (and waiting for them on a busy machine) runs on the calling thread.
  std::size_t widest = std::max(plan.items.size(), plan.whole_groups ? plan.splits.size() : 0);
  for (const Wave& w : plan.waves) widest = std::max<std::size_t>(widest, static_cast<std::size_t>(w.chunk_end - w.chunk_begin));
  double work = 0.0;  // multiply-adds
  auto add_work = [&](const WorkItem& it) {
    work += static_cast<double>(packed_rows(it)) * static_cast<double>(it.col_end - it.col_begin) * static_cast<double>(kw + vd);
  };
  for (const WorkItem& it : plan.items) add_work(it);
  for (const WorkItem& it : plan.chunks) add_work(it);
  if (work < lim.serial_work) widest = 1;
  plan.threads = static_cast<int>(std::clamp<std::size_t>(widest, 1, static_cast<std::size_t>(plan.threads)));
  plan.tile.rows = max_rows;
  const std::int64_t C = plan.tile.cols, R = max_rows;
  plan.widened_kv_cols = widened_kv_columns(p, plan, lim);
  const std::int64_t W = plan.widened_kv_cols;
  // Per worker: Q, K tile, V tile, accumulators (and transposed), row max, sum, a spare max, the
  // running max entering an item and the normalising factors (25.3), scores, a whole split
  // group's scores and partials (whole_groups); with a WidenedKv, the store and its K and V
  // columns.
  plan.floats_per_thread = round16(R * kw) + round16(C * kw) + round16(C * v_tile_stride(vd)) + 2 * round16(R * vd) +
                           5 * round16(R) + round16(thread_scores) + plan.group_floats;
  if (W > 0)
    plan.floats_per_thread += round16(static_cast<std::int64_t>(kWidenedKvFloats)) + round16(W * kw) +
                              round16(W * v_tile_stride(vd));
  const bool any = !plan.items.empty() || !plan.splits.empty();
  plan.workspace_bytes = any ? (plan.floats_per_thread * plan.threads + plan.wave_floats) * sizeof(float) + 64 : 0;
  return plan;
}
}  // namespace

CpuPlan make_cpu_plan(const Problem& p, int threads, const PlanLimits& lim) {
  CpuPlan plan = p.full_quant.on       ? make_full_quant_plan(p, threads)      // FIA-SPEC 13.1
                 : p.mla_full_quant.on ? make_mla_full_quant_plan(p, threads)  // FIA-SPEC 13.3
                                       : attention_plan(p, threads, lim);
  plan.writes_every_row = writes_every_row(p, plan);
  return plan;
}

}  // namespace fia::detail
