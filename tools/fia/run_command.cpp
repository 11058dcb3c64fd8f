#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "commands.hpp"
#include "io/case_dir.hpp"
#include "validate/printable.hpp"

namespace fia::cli {

void print_error(const std::string& parameter, const std::string& message) {
  // Escaped, so that a NUL or newline in echoed user text can neither cut nor split the line.
  const std::string p = detail::printable(parameter, 200), m = detail::printable(message, 2000);
  if (p.empty()) std::fprintf(stderr, "error: %s\n", m.c_str());
  else std::fprintf(stderr, "error: %s: %s\n", p.c_str(), m.c_str());
}

namespace {

/// A rejected call writes nothing; an earlier run's result must not look like this one's either.
int reject(const RunArgs& args, const Status& st) {
  print_error(st.parameter, st.message);
  std::error_code ec;
  std::filesystem::remove(std::filesystem::path(args.out_dir) / "outputs.safetensors", ec);
  return kExitRejected;
}

}  // namespace

bool resolve_backend(std::string* backend) {
  if (!backend->empty()) return true;
  const char* env = std::getenv("FIA_BACKEND");
  *backend = env && *env ? env : "cpu";
  if (*backend == "cpu" || *backend == "reference") return true;
  print_error("FIA_BACKEND", "must be 'cpu' or 'reference', got '" + *backend + "'");
  return false;
}

int run_command(const RunArgs& in) {
  RunArgs args = in;
  if (!resolve_backend(&args.backend)) return kExitRejected;
  io::Case c;
  Status st = io::load_case(args.case_dir, &c);
  if (!st.ok()) return reject(args, st);
  Options opt;
  opt.strict = args.strict;
  opt.threads = args.threads;
  opt.backend = args.backend == "reference" ? Backend::kReference : Backend::kCpu;
  Outputs out;
  st = fused_infer_attention_score(c.args, opt, &out);
  if (!st.ok() && st.code != StatusCode::kInternal) return reject(args, st);
  if (!st.ok()) {
    print_error(st.parameter, st.message);
    return kExitFailure;
  }
  st = io::write_outputs(args.out_dir, out);
  if (!st.ok()) {
    print_error(st.parameter, st.message);
    return kExitFailure;
  }
  auto shape = [](const std::vector<std::int64_t>& s) {
    std::string r = "[";
    for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
  };
  std::printf("wrote %s/outputs.safetensors: attention_out %s %s, softmax_lse F32 %s\n", args.out_dir.c_str(),
              std::string(dtype_name(out.attention_out.dtype)).c_str(), shape(out.attention_out.shape).c_str(),
              shape(out.softmax_lse.shape).c_str());
  return kExitOk;
}

}  // namespace fia::cli
