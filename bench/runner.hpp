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

struct Measurement {
  std::string name, what, error;
  bool decode = false;
  int repeat = 0;
  double median_s = 0.0, min_s = 0.0;
  double rate = 0.0;      ///< decode: bytes / s of K+V read; prefill: FLOP / s
  double fraction = 0.0;  ///< rate / the matching machine limit
};

/// Times `repeat` calls (plan + run, rotating over the workload's copies after one warm-up call
/// per copy) with `options`; `progress(done, total)` is called after each call.
Measurement measure(Workload& w, const Options& options, int repeat, const MachineLimits& limits,
                    const std::function<void(int, int)>& progress);

}  // namespace fia::bench
