// `fia bench`: the workloads of bench/shapes.json (or a case folder) against the machine's limits.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/machine_limits.hpp"
#include "bench/runner.hpp"
#include "commands.hpp"
#include "cpu/amx.hpp"
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

/// "30.2 GB/s (28.1-31.0 over 7 rounds)" for a probe of `unit` (scaled by 1e9).
std::string probe_text(const bench::Probe& p, const char* unit) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f %s (%.1f-%.1f over %d rounds)", p.median / 1e9, unit, p.min / 1e9, p.max / 1e9,
                p.rounds);
  return buf;
}

nlohmann::json probe_json(const bench::Probe& p) {
  return {{"median", p.median / 1e9}, {"min", p.min / 1e9}, {"max", p.max / 1e9}, {"rounds", p.rounds}};
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
  if (!detail::bf16_dots_setting_valid()) {
    print_error("FIA_BF16_DOTS", "must be 0, 1 or unset");
    return kExitRejected;
  }
  if (!detail::amx_setting_valid()) {
    print_error("FIA_AMX", "must be 0, 1 or unset");
    return kExitRejected;
  }
  if (!args.isa.empty() && !detail::force_isa(args.isa)) {
    std::string names;
    for (const auto& n : detail::available_isas()) names += (names.empty() ? "" : ", ") + n;
    print_error("--isa", "must be one of " + names + ", got " + args.isa);
    return kExitRejected;
  }
  const int threads = args.threads > 0 ? args.threads : detail::default_threads();
  const bench::Pages pages = args.pages == "small" ? bench::Pages::kSmall : bench::Pages::kHuge;
  std::vector<bench::Workload> workloads;
  try {
    if (!args.case_dir.empty()) workloads.push_back(bench::load_case_workload(args.case_dir, pages));
    else workloads = bench::load_shapes(args.shapes, split_names(args.only), pages);
  } catch (const std::exception& e) {
    print_error("--shapes", e.what());
    return kExitRejected;
  }
  if (workloads.empty()) {
    print_error("--only", "no workload of " + args.shapes + " matches " + args.only);
    return kExitRejected;
  }
  std::fprintf(stderr, "paging in the read-bandwidth probe's buffer ...\r");
  bench::BandwidthProbe bandwidth_probe(threads, pages);
  const bench::LimitProbes probes{[&] { return bandwidth_probe.round(); },
                                  [&] { return bench::fma_peak_round(threads); }, args.probe_rounds,
                                  [&] { return bench::int8_peak_round(threads); },
                                  [&](const std::vector<bench::ByteRange>& kv) {
                                    return bench::read_bandwidth_round(threads, kv);
                                  },
                                  [&] { return bench::bf16_dot_peak_round(threads); },
                                  [&] { return bench::amx_bf16_peak_round(threads); },
                                  [&] { return bench::amx_int8_peak_round(threads); }};
  const double cold_bytes = 4.0 * static_cast<double>(bench::last_level_cache_bytes());
  const bool isa_has_dots = detail::kernel_isa_has_bf16_dots();
  const bool dots_taken = isa_has_dots && detail::bf16_dots_enabled();
  const char* dots = !detail::bf16_dots_supported() ? "none on this CPU"
                     : dots_taken                    ? "taken"
                     : !isa_has_dots                 ? "not taken by these kernels"
                                                     : "not taken (FIA_BF16_DOTS=1 asks for them)";
  const bool tiles_taken = isa_has_dots && detail::amx_enabled();
  const char* tiles = !detail::amx_bf16_in_cpu()     ? "none on this CPU"
                      : !detail::amx_setting_on()     ? "forbidden by FIA_AMX=0"
                      : !detail::amx_bf16_supported() ? "not granted by Linux"
                      : !isa_has_dots                 ? "not taken by these kernels"
                                                      : "taken";
  std::printf("fia bench: %d thread%s, kernels %s (bf16 dot products: %s; AMX tiles: %s), tensors on %s pages; each "
              "shape against the medians of %d probe rounds taken between its calls (decode: the read bandwidth of its "
              "own K/V copies)\n",
              threads, threads == 1 ? "" : "s", detail::kernel_isa(), dots, tiles, args.pages.c_str(), probes.rounds);
  std::printf("%-6s %10s %11s %9s %10s %9s %7s %6s %8s  %s\n", "shape", "median ms", "roofline ms", "of it", "MB read",
              "GFLOP", "bound", "GB/s", "GFLOP/s", "what");
  std::vector<double> all_bandwidth, all_peak, all_int8, all_dot, all_amx, all_amx_int8;  // every round of the run, for its summary

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
    const bench::Measurement m = bench::measure(w, opt, repeat, probes, [&](int done, int total) {
      std::fprintf(stderr, "\r[%zu/%zu] %s: call %d/%d   ", i + 1, workloads.size(), w.name.c_str(), done, total);
    });
    std::fprintf(stderr, "\r%-70s\r", "");
    nlohmann::json r = {{"name", m.name}, {"what", m.what}};
    if (m.bytes_per_call > 0.0) r["bytes_per_call"] = m.bytes_per_call;
    if (!m.error.empty()) {
      // Rejected as not supported yet: listed and skipped. Any other error fails the run (exit 1).
      std::printf("%-6s %10s %11s %9s %10s %9s %7s %6s %8s  %s (%s: %s)\n", m.name.c_str(), "-", "-", "-",
                  bytes_text(m.bytes_per_call).c_str(), "-", "-", "-", "-", m.what.c_str(),
                  m.skipped ? "skipped" : "failed", m.error.c_str());
      r[m.skipped ? "skipped" : "error"] = m.error;
      if (!m.skipped) ++failures;
    } else {
      // Above 1 the probe or the cold rotation is wrong, not the kernel fast: say so. Int8 products
      // are judged against the int8 peak ("int8" bound, GOP/s in the peak column), of AMX-INT8
      // tiles where they take them ("int8 AMX").
      const bench::Probe& peak = m.compute_peak();
      std::printf("%-6s %10.3f %11.3f %8.0f%% %10s %9.2f %7s %6.1f %8.1f  %s%s\n", m.name.c_str(), m.median_s * 1e3,
                  m.roofline_s * 1e3, 100.0 * m.fraction, bytes_text(m.bytes_per_call).c_str(), m.flops_per_call / 1e9,
                  m.memory_bound ? "memory" : m.int8_tiles ? "int8 AMX" : m.int8_products ? "int8" : "compute",
                  m.read_bandwidth.median / 1e9,
                  peak.median / 1e9, m.what.c_str(),
                  m.fraction > 1.0 ? " (above the roofline: check the probes and the cold rotation)" : "");
      all_bandwidth.insert(all_bandwidth.end(), m.bandwidth_rounds.begin(), m.bandwidth_rounds.end());
      all_peak.insert(all_peak.end(), m.peak_rounds.begin(), m.peak_rounds.end());
      std::vector<double>& int8_rounds = m.int8_tiles ? all_amx_int8 : all_int8;
      int8_rounds.insert(int8_rounds.end(), m.int8_rounds.begin(), m.int8_rounds.end());
      all_dot.insert(all_dot.end(), m.dot_rounds.begin(), m.dot_rounds.end());
      all_amx.insert(all_amx.end(), m.amx_rounds.begin(), m.amx_rounds.end());
      if (m.bf16_dot_peak.rounds > 0)
        r.update({{"bf16_dot_flops_per_call", m.dot_flops_per_call}, {"bf16_dot_peak_GFLOPs", probe_json(m.bf16_dot_peak)}});
      if (m.amx_peak.rounds > 0)
        r.update({{"amx_flops_per_call", m.tile_flops_per_call}, {"amx_bf16_peak_GFLOPs", probe_json(m.amx_peak)}});
      r.update({{"kind", m.decode ? "decode" : "prefill"}, {"repeat", m.repeat}, {"median_s", m.median_s}, {"min_s", m.min_s},
                {"flops_per_call", m.flops_per_call}, {"roofline_s", m.roofline_s},
                {"read_bandwidth_GBps", probe_json(m.read_bandwidth)},
                {"read_bandwidth_of", m.bandwidth_of_kv ? "kv_copies" : "probe_buffer"},
                {m.int8_tiles ? "amx_int8_peak_GOPs" : m.int8_products ? "int8_peak_GOPs" : "fma_peak_GFLOPs",
                 probe_json(peak)},
                {"products", m.int8_tiles ? "int8_amx" : m.int8_products ? "int8" : "fp32"},
                {"bound", m.memory_bound ? "memory" : "compute"}, {"fraction_of_roofline", m.fraction},
                {"GBps", m.bytes_per_call / m.median_s / 1e9}, {"GFLOPs", m.flops_per_call / m.median_s / 1e9},
                {"copies", w.copies.size()}});
    }
    results.push_back(r);
    std::fflush(stdout);
  }
  const bench::HugePageUse huge = bench::huge_page_use();
  if (pages == bench::Pages::kHuge)
    std::printf("huge pages: %.0f of the %.0f MiB asked for (the rest lies on 4 KiB pages)\n", huge.backed / 1048576.0,
                huge.advised / 1048576.0);
  const bench::Probe bandwidth = bench::summarize(all_bandwidth), peak = bench::summarize(all_peak);
  const bench::Probe int8 = bench::summarize(all_int8), dot = bench::summarize(all_dot);
  const bench::Probe amx = bench::summarize(all_amx), amx_int8 = bench::summarize(all_amx_int8);
  std::printf("probes over the run: read bandwidth %s, fp32 FMA peak %s%s%s%s%s (medians)\n",
              probe_text(bandwidth, "GB/s").c_str(), probe_text(peak, "GFLOP/s").c_str(),
              int8.rounds > 0 ? (", int8 multiply-add peak " + probe_text(int8, "GOP/s")).c_str() : "",
              dot.rounds > 0 ? (", bf16 dot-product peak " + probe_text(dot, "GFLOP/s") + " (the products of " +
                                "shapes that take them)").c_str() : "",
              amx.rounds > 0 ? (", AMX bf16 peak " + probe_text(amx, "GFLOP/s") + " (the Q·Kᵀ of shapes that " +
                                "take the tiles)").c_str() : "",
              amx_int8.rounds > 0 ? (", AMX-INT8 peak " + probe_text(amx_int8, "GOP/s") + " (the int8 products of " +
                                     "shapes that take the tiles)").c_str() : "");
  if (!args.json.empty()) {
    nlohmann::json doc = {{"threads", threads},
                          {"isa", detail::kernel_isa()},
                          {"bf16_dots", dots_taken},
                          {"amx_tiles", tiles_taken},
                          {"pages", args.pages},
                          {"huge_pages_MiB", {{"asked", huge.advised / 1048576.0}, {"backed", huge.backed / 1048576.0}}},
                          {"read_bandwidth_GBps", probe_json(bandwidth)},
                          {"fma_peak_GFLOPs", probe_json(peak)},
                          {"results", results}};
    if (int8.rounds > 0) doc["int8_peak_GOPs"] = probe_json(int8);
    if (amx_int8.rounds > 0) doc["amx_int8_peak_GOPs"] = probe_json(amx_int8);
    if (dot.rounds > 0) doc["bf16_dot_peak_GFLOPs"] = probe_json(dot);
    if (amx.rounds > 0) doc["amx_bf16_peak_GFLOPs"] = probe_json(amx);
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
