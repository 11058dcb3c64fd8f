// Timing one workload (median of repeated FIA calls) against the machine's limits.
#pragma once

#include <functional>
#include <string>

#include "bench/workload.hpp"

namespace fia::bench {

struct MachineLimits {
  double read_bandwidth = 0.0;  ///< bytes / s
  double fma_peak = 0.0;        ///< FLOP / s
};

/// The roofline time of a call: max(bytes / read bandwidth, FLOPs / FMA peak) in seconds (one
/// rule for decode and prefill); `memory_bound` tells which term is the larger. 0 without limits.
double roofline_seconds(double bytes, double flops, const MachineLimits& limits, bool* memory_bound);

struct Measurement {
  std::string name, what, error;
  bool skipped = false;  ///< error is the library's "not supported yet" (kUnsupported): not a failure
  bool decode = false;
  int repeat = 0;
  double median_s = 0.0, min_s = 0.0;
  double bytes_per_call = 0.0;  ///< Workload::bytes_per_call (0: unknown, the call was rejected)
  double flops_per_call = 0.0;  ///< Workload::flops_per_call
  double rate = 0.0;        ///< decode: bytes_per_call / median_s; prefill: FLOP / s
  double roofline_s = 0.0;  ///< roofline_seconds of the call
  bool memory_bound = false;
  double fraction = 0.0;    ///< roofline_s / median_s: the fraction of the roofline reached
};

/// Times `repeat` calls (plan + run, rotating over the workload's copies after one warm-up call
/// per copy) with `options`; `progress(done, total)` is called after each call.
Measurement measure(Workload& w, const Options& options, int repeat, const MachineLimits& limits,
                    const std::function<void(int, int)>& progress);

}  // namespace fia::bench
