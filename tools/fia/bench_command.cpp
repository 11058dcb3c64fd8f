// `fia bench`: the workloads of bench/shapes.json (or a case folder) against the machine's limits.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/machine_limits.hpp"
#include "bench/runner.hpp"
#include "commands.hpp"
#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "cpu/threads.hpp"

namespace fia::cli {

namespace {

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) v.push_back(x);
  return v;
}

/// Bytes read per call in MB, or "-" when unknown (a call the library rejects before a Problem).
std::string bytes_text(double bytes) {
  if (bytes <= 0.0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", bytes / 1e6);
  return buf;
}

std::string rate_text(const bench::Measurement& m) {
  char buf[64];
  if (m.decode) std::snprintf(buf, sizeof buf, "%8.2f GB/s    ", m.rate / 1e9);
  else std::snprintf(buf, sizeof buf, "%8.2f GFLOP/s ", m.rate / 1e9);
  return buf;
}

}  // namespace

int bench_command(const BenchArgs& in) {
  BenchArgs args = in;
  if (args.shapes == BenchArgs{}.shapes && !std::filesystem::exists(args.shapes))
    args.shapes = FIA_SOURCE_DIR "/bench/shapes.json";  // run from outside the repository
  if (!detail::apply_isa_cap_from_env()) {
    print_error("FIA_ISA", "must name an instruction set of this build");
    return kExitRejected;
  }
  if (!args.isa.empty() && !detail::force_isa(args.isa)) {
    std::string names;
    for (const auto& n : detail::available_isas()) names += (names.empty() ? "" : ", ") + n;
    print_error("--isa", "must be one of " + names + ", got " + args.isa);
    return kExitRejected;
  }
  const int threads = args.threads > 0 ? args.threads : detail::default_threads();
  std::vector<bench::Workload> workloads;
  try {
    if (!args.case_dir.empty()) workloads.push_back(bench::load_case_workload(args.case_dir));
    else workloads = bench::load_shapes(args.shapes, split_names(args.only));
  } catch (const std::exception& e) {
    print_error("--shapes", e.what());
    return kExitRejected;
  }
  if (workloads.empty()) {
    print_error("--only", "no workload of " + args.shapes + " matches " + args.only);
    return kExitRejected;
  }
  std::fprintf(stderr, "measuring the machine's read bandwidth and fp32 FMA peak ...\r");
  bench::MachineLimits limits;
  limits.read_bandwidth = bench::measure_read_bandwidth(threads);
  limits.fma_peak = bench::measure_fma_peak(threads);
  const double cold_bytes = 4.0 * static_cast<double>(bench::last_level_cache_bytes());
  std::printf("fia bench: %d thread%s, kernels %s; measured read bandwidth %.1f GB/s, fp32 FMA peak %.1f GFLOP/s\n",
              threads, threads == 1 ? "" : "s", detail::kernel_isa(), limits.read_bandwidth / 1e9, limits.fma_peak / 1e9);
  std::printf("%-6s %10s %10s %18s %9s  %s\n", "shape", "median ms", "MB read", "rate", "of limit", "what");

  Options opt;
  opt.threads = threads;
  opt.backend = Backend::kCpu;
  nlohmann::json results = nlohmann::json::array();
  int failures = 0;
  for (std::size_t i = 0; i < workloads.size(); ++i) {
    bench::Workload& w = workloads[i];
    std::fprintf(stderr, "\r%-70s\r[%zu/%zu] %s: preparing", "", i + 1, workloads.size(), w.name.c_str());
    bench::add_cold_copies(w, cold_bytes);
    const int repeat = args.repeat > 0 ? args.repeat : (w.decode ? 30 : 5);
    const bench::Measurement m = bench::measure(w, opt, repeat, limits, [&](int done, int total) {
      std::fprintf(stderr, "\r[%zu/%zu] %s: call %d/%d   ", i + 1, workloads.size(), w.name.c_str(), done, total);
    });
    std::fprintf(stderr, "\r%-70s\r", "");
    nlohmann::json r = {{"name", m.name}, {"what", m.what}};
    if (m.bytes_per_call > 0.0) r["bytes_per_call"] = m.bytes_per_call;
    if (!m.error.empty()) {
      // Rejected as not supported yet: listed and skipped. Any other error fails the run (exit 1).
      std::printf("%-6s %10s %10s %18s %9s  %s (%s: %s)\n", m.name.c_str(), "-", bytes_text(m.bytes_per_call).c_str(), "-",
                  "-", m.what.c_str(), m.skipped ? "skipped" : "failed", m.error.c_str());
      r[m.skipped ? "skipped" : "error"] = m.error;
      if (!m.skipped) ++failures;
    } else {
      std::printf("%-6s %10.3f %10s %18s %8.0f%%  %s\n", m.name.c_str(), m.median_s * 1e3, bytes_text(m.bytes_per_call).c_str(),
                  rate_text(m).c_str(), 100.0 * m.fraction, m.what.c_str());
      r.update({{"kind", m.decode ? "decode" : "prefill"}, {"repeat", m.repeat}, {"median_s", m.median_s}, {"min_s", m.min_s},
                {m.decode ? "GBps" : "GFLOPs", m.rate / 1e9}, {"fraction_of_limit", m.fraction},
                {"copies", w.copies.size()}});
    }
    results.push_back(r);
    std::fflush(stdout);
  }
  if (!args.json.empty()) {
    nlohmann::json doc = {{"threads", threads},
                          {"isa", detail::kernel_isa()},
                          {"read_bandwidth_GBps", limits.read_bandwidth / 1e9},
                          {"fma_peak_GFLOPs", limits.fma_peak / 1e9},
                          {"results", results}};
    std::ofstream f(args.json);
    f << doc.dump(2) << "\n";
    if (!f) {
      print_error("--json", "cannot write " + args.json);
      return kExitFailure;
    }
  }
  return failures == 0 ? kExitOk : kExitFailure;
}

}  // namespace fia::cli
