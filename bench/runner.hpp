// Timing one workload (median of repeated FIA calls) against the machine's limits.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/machine_limits.hpp"
#include "bench/workload.hpp"

namespace fia::bench {

struct MachineLimits {
  double read_bandwidth = 0.0;  ///< bytes / s
  double fma_peak = 0.0;        ///< FLOP / s (int8 operations / s for int8 products)
  double bf16_dot_peak = 0.0;   ///< FLOP / s of bf16 dot products (0: none)
  double amx_peak = 0.0;        ///< FLOP / s of AMX bf16 tiles (0: none)
};

/// The roofline time of a call: max(bytes / read bandwidth, FLOPs / FMA peak) in seconds (one
/// rule for decode and prefill); `memory_bound` tells which term is the larger. 0 without limits.
/// Of the FLOPs, `dot_flops` run as bf16 dot products: they take dot_flops / bf16_dot_peak; and
/// `tile_flops` on AMX tiles: they take tile_flops / amx_peak.
double roofline_seconds(double bytes, double flops, const MachineLimits& limits, bool* memory_bound,
                        double dot_flops = 0.0, double tile_flops = 0.0);

/// One round of each machine probe (bytes / s, FLOP / s, int8 operations / s; an empty function
/// is not probed), taken between a workload's calls: `rounds` of each per workload, the first
/// before its first timed call and the others spread evenly after its calls. A shared machine's
/// bandwidth and FMA rate drift by more than 1.5x within a run, so each workload is judged against
/// the medians of the rounds taken while it ran rather than against one probe at the start.
/// Workloads of int8 products (Workload::int8_products) take `int8_peak` rounds instead of
/// `fma_peak` ones; workloads with bf16 dot products (Workload::dot_flops_per_call) take
/// `bf16_dot_peak` rounds besides them, and those with AMX tiles (Workload::tile_flops_per_call)
/// `amx_peak` rounds. Decode workloads with cold copies take `read_ranges` rounds over their own K/V
/// copies (kv_ranges, the next timed call's copy first) instead of `read_bandwidth` ones: on the
/// Zen 4 VM buffers of the same process read at different rates (K/V copies of D2 in one process:
/// 23.6-29.1 GB/s, the slowest copy taking D2 7.58 ms and the fastest 5.95), so a probe over a
/// buffer of its own judged each decode workload by where its copies happened to lie.
struct LimitProbes {
  std::function<double()> read_bandwidth, fma_peak;
  int rounds = 12;  ///< `fia bench --probe-rounds`' default
  std::function<double()> int8_peak;
  std::function<double(const std::vector<ByteRange>&)> read_ranges;
  std::function<double()> bf16_dot_peak;
  std::function<double()> amx_peak;
  std::function<double()> amx_int8_peak;  ///< taken instead of int8_peak by Workload::int8_tiles
};

struct Measurement {
  std::string name, what, error;
  bool skipped = false;  ///< error is the library's "not supported yet" (kUnsupported): not a failure
  bool decode = false;
  int repeat = 0;
  double median_s = 0.0, min_s = 0.0;
  double bytes_per_call = 0.0;  ///< Workload::bytes_per_call (0: unknown, the call was rejected)
  double flops_per_call = 0.0;  ///< Workload::flops_per_call
  double rate = 0.0;        ///< decode: bytes_per_call / median_s; prefill: FLOP / s
  bool int8_products = false;  ///< Workload::int8_products: judged against int8_peak, not fma_peak
  bool int8_tiles = false;     ///< Workload::int8_tiles: int8_peak holds AMX-INT8 rounds (amx_int8_peak)
  double dot_flops_per_call = 0.0;  ///< Workload::dot_flops_per_call
  double tile_flops_per_call = 0.0;  ///< Workload::tile_flops_per_call
  /// the rounds taken between the calls
  std::vector<double> bandwidth_rounds, peak_rounds, int8_rounds, dot_rounds, amx_rounds;
  bool bandwidth_of_kv = false;  ///< the bandwidth rounds read the workload's own K/V copies
  /// their summaries (bytes / s, FLOP / s, int8 ops / s)
  Probe read_bandwidth, fma_peak, int8_peak, bf16_dot_peak, amx_peak;
  /// The compute peak the workload is judged against: int8_peak for int8 products, else fma_peak.
  const Probe& compute_peak() const { return int8_products ? int8_peak : fma_peak; }
  double roofline_s = 0.0;  ///< roofline_seconds of the call against the probes' medians
  bool memory_bound = false;
  double fraction = 0.0;    ///< roofline_s / median_s: the fraction of the roofline reached
};

/// Times `repeat` calls (plan + run, rotating over the workload's copies after one warm-up call
/// per copy) with `options`, taking the rounds of `probes` between them (untimed);
/// `progress(done, total)` is called after each call.
Measurement measure(Workload& w, const Options& options, int repeat, const LimitProbes& probes,
                    const std::function<void(int, int)>& progress);

}  // namespace fia::bench
