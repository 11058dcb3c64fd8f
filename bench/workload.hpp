// Benchmark workloads: FIA calls from shapes.json (random tensors, fixed seed) or a case folder.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "fia/fia.hpp"

namespace fia::bench {

/// One call's arguments and the tensors they view.
struct CallData {
  FiaArgs args;
  std::deque<OwnedTensor> tensors;
};

/// A workload: the same call over `copies` independent sets of K/V buffers (decode rotates
/// through them so the KV a call reads is not resident in the last-level cache).
struct Workload {
  std::string name;
  std::string what;
  std::vector<std::unique_ptr<CallData>> copies;
  bool decode = false;          ///< memory-bound: judged in GB/s against the read bandwidth
  double bytes_per_call = 0.0;  ///< K + V bytes one call reads (the lengths FIA reads)
  double flops_per_call = 0.0;  ///< 4 * N * sum_b(Sq_b * Skv_b) * D, halved for causal
  std::string error;            ///< set when the workload cannot be built or run
  bool unsupported = false;     ///< the error is a feature fia does not implement yet
};

/// Reads a shapes file (see ../shared/bench/shapes.json: name, what, params, tensors). Entries
/// whose name is not in `only` (when not empty) are skipped. Throws std::runtime_error on a
/// malformed file.
std::vector<Workload> load_shapes(const std::string& path, const std::vector<std::string>& only);

/// A workload from a case folder (CASE-FORMAT.md); decode ones are not rotated.
Workload load_case_workload(const std::string& dir);

/// Makes decode workloads cold: adds K/V copies until they span `bytes` (at least two copies).
void add_cold_copies(Workload& w, double bytes);

/// Fills bytes_per_call, flops_per_call and decode from a valid call (false: not a valid call).
bool describe_work(Workload& w);

}  // namespace fia::bench
