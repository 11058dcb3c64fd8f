#include "bench/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace fia::bench {

double roofline_seconds(double bytes, double flops, const MachineLimits& limits, bool* memory_bound,
                        double dot_flops, double tile_flops) {
  const double memory = limits.read_bandwidth > 0 ? bytes / limits.read_bandwidth : 0.0;
  if (limits.bf16_dot_peak <= 0) dot_flops = 0.0;
  if (limits.amx_peak <= 0) tile_flops = 0.0;
  const double compute = (limits.fma_peak > 0 ? (flops - dot_flops - tile_flops) / limits.fma_peak : 0.0) +
                         (dot_flops > 0 ? dot_flops / limits.bf16_dot_peak : 0.0) +
                         (tile_flops > 0 ? tile_flops / limits.amx_peak : 0.0);
  if (memory_bound) *memory_bound = memory >= compute;
  return std::max(memory, compute);
}

Measurement measure(Workload& w, const Options& options, int repeat, const LimitProbes& probes,
                    const std::function<void(int, int)>& progress) {
  Measurement m;
  m.name = w.name;
  m.what = w.what;
  m.decode = w.decode;
  m.repeat = repeat;
  m.bytes_per_call = w.bytes_per_call;
  m.flops_per_call = w.flops_per_call;
  m.int8_products = w.int8_products;
  m.int8_tiles = w.int8_tiles && probes.amx_int8_peak != nullptr;
  m.dot_flops_per_call = w.dot_flops_per_call;
  m.tile_flops_per_call = w.tile_flops_per_call;
  auto fail = [&m](const Status& s) {
    m.error = s.to_string();
    m.skipped = s.code == StatusCode::kUnsupported;
    return m;
  };
  if (!w.error.empty()) {
    m.error = w.error;
    m.skipped = w.unsupported;
    return m;
  }
  Plan first;
  Status st = plan(w.copies[0]->args, options, &first);
  if (!st.ok()) return fail(st);
  OwnedTensor out(first.attention_out_dtype(), first.attention_out_shape());
  OwnedTensor lse(DType::F32, first.softmax_lse_shape());
  std::vector<std::byte> workspace(first.workspace_bytes());
  auto call = [&](const FiaArgs& args) {
    Plan pl;
    Status s = plan(args, options, &pl);
    if (s.ok() && pl.workspace_bytes() > workspace.size()) workspace.resize(pl.workspace_bytes());
    if (s.ok()) s = run(pl, out.mutable_view(), lse.mutable_view(), workspace.data(), workspace.size());
    return s;
  };
  for (const auto& c : w.copies) {  // warm-up: page in every copy and the workspace
    st = call(c->args);
    if (!st.ok()) return fail(st);
  }
  std::vector<double> times;
  std::vector<double>& bandwidth = m.bandwidth_rounds;
  const std::function<double()>& compute_probe =
      m.int8_tiles ? probes.amx_int8_peak : w.int8_products ? probes.int8_peak : probes.fma_peak;
  std::vector<double>& compute = w.int8_products ? m.int8_rounds : m.peak_rounds;
  int rounds = 0;
  // A round leaves the caches holding the probe's buffer; a decode call is short enough for that
  // to show, so an untimed call on the copy just used (its next call's KV is cold regardless)
  // brings back the workspace and the query first. Each round waits kSettle first: the library's
  // worker threads spin a little after a call before they sleep, and a probe started at once
  // shared the cores with them (Zen 4 VM, 2 threads: the bandwidth probe read about 10 % less,
  // 29.8-32.2 GB/s against 33.8-34.4 with a pause of 1-20 ms and 33.6 for the same loop in a
  // process of its own, so that D4 read 101-109 % of its roofline).
  constexpr auto kSettle = std::chrono::milliseconds(5);
  // A cold decode workload's bandwidth is read over its own K/V copies (LimitProbes::read_ranges),
  // the copy of the next timed call first so that the rest of the round leaves it cold again.
  const std::size_t n = w.copies.size();
  m.bandwidth_of_kv = w.decode && n > 1 && probes.read_ranges != nullptr;
  auto probe_round = [&](std::size_t copy) {
    std::this_thread::sleep_for(kSettle);
    if (m.bandwidth_of_kv) bandwidth.push_back(probes.read_ranges(kv_ranges(w, (copy + 1) % n)));
    else if (probes.read_bandwidth) bandwidth.push_back(probes.read_bandwidth());
    if (compute_probe) compute.push_back(compute_probe());
    if (m.dot_flops_per_call > 0 && probes.bf16_dot_peak) m.dot_rounds.push_back(probes.bf16_dot_peak());
    if (m.tile_flops_per_call > 0 && probes.amx_peak) m.amx_rounds.push_back(probes.amx_peak());
    ++rounds;
    return w.decode ? call(w.copies[copy % n]->args) : Status{};
  };
  if (probes.rounds > 0 && !(st = probe_round(n - 1)).ok()) return fail(st);
  for (int i = 0; i < repeat; ++i) {
    const FiaArgs& args = w.copies[static_cast<std::size_t>(i) % n]->args;
    const auto t0 = std::chrono::steady_clock::now();
    st = call(args);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (!st.ok()) return fail(st);
    if (progress) progress(i + 1, repeat);
    // Round k (k = 1 .. rounds - 1) after call ceil(k * repeat / (rounds - 1)).
    if (rounds > 0 && rounds < probes.rounds &&
        static_cast<std::int64_t>(i + 1) * (probes.rounds - 1) >= static_cast<std::int64_t>(rounds) * repeat &&
        !(st = probe_round(static_cast<std::size_t>(i))).ok())
      return fail(st);
  }
  m.read_bandwidth = summarize(bandwidth);
  m.fma_peak = summarize(m.peak_rounds);
  m.int8_peak = summarize(m.int8_rounds);
  m.bf16_dot_peak = summarize(m.dot_rounds);
  m.amx_peak = summarize(m.amx_rounds);
  const MachineLimits limits{m.read_bandwidth.median, m.compute_peak().median, m.bf16_dot_peak.median,
                             m.amx_peak.median};
  std::sort(times.begin(), times.end());
  m.median_s = times[times.size() / 2];
  m.min_s = times.front();
  m.rate = w.decode ? w.bytes_per_call / m.median_s : w.flops_per_call / m.median_s;
  m.roofline_s = roofline_seconds(w.bytes_per_call, w.flops_per_call, limits, &m.memory_bound, w.dot_flops_per_call,
                                  w.tile_flops_per_call);
  m.fraction = m.roofline_s / m.median_s;
  return m;
}

}  // namespace fia::bench
