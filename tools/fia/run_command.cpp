#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "commands.hpp"
#include "fia/io/case_dir.hpp"
#include "fia/io/safetensors.hpp"
#include "reference/reference.hpp"
#include "validate/build_problem.hpp"
#include "validate/printable.hpp"

namespace fia::cli {

void print_error(const std::string& parameter, const std::string& message) {
  // Escaped, so that a NUL or newline in echoed user text can neither cut nor split the line.
  const std::string p = detail::printable(parameter, 200), m = detail::printable(message, 2000);
  if (p.empty()) std::fprintf(stderr, "error: %s\n", m.c_str());
  else std::fprintf(stderr, "error: %s: %s\n", p.c_str(), m.c_str());
}

namespace {

std::string shape(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

/// The file `fia run` writes in OUT_DIR.
std::filesystem::path result_path(const RunArgs& args) {
  return std::filesystem::path(args.out_dir) / (args.expected ? "expected.safetensors" : "outputs.safetensors");
}

/// A rejected call writes nothing; an earlier run's result must not look like this one's either.
int reject(const RunArgs& args, const Status& st) {
  print_error(st.parameter, st.message);
  std::error_code ec;
  std::filesystem::remove(result_path(args), ec);
  return kExitRejected;
}

PostQuantRounding post_quant_rounding(const RunArgs& args) {
  return args.post_quant_rounding == "golden" ? PostQuantRounding::kGolden : PostQuantRounding::kDevice;
}

/// `--expected`: the float64 reference's answer in the format of the shared sample cases
/// (cases/README.md): attention_out as F32 before the cast to the output dtype, softmax_lse F32
/// ([1] holding 0 without the flag), and metadata out_dtype, lse_flag and about.
int write_expected(const RunArgs& args, const io::Case& c) {
  detail::Problem p;
  const Status st = detail::build_problem(c.args, args.strict, &p);
  if (!st.ok()) return reject(args, st);
  const detail::ReferenceResult exact = detail::reference_compute(p);
  OwnedTensor out(DType::F32, p.out_shape), lse(DType::F32, p.lse ? p.lse_shape : std::vector<std::int64_t>{1});
  for (std::size_t i = 0; i < exact.out.size(); ++i) out.as<float>()[i] = static_cast<float>(exact.out[i]);
  if (p.post_quant.on) {  // an int8 output (FIA-SPEC 14): the reference's quantized values, as F32
    Options opt;
    opt.backend = Backend::kReference;
    opt.post_quant_rounding = post_quant_rounding(args);
    Outputs q;
    const Status run = fused_infer_attention_score(c.args, opt, &q);
    if (!run.ok()) return reject(args, run);
    for (std::int64_t i = 0; i < q.attention_out.numel(); ++i)
      out.as<float>()[i] = q.attention_out.as<std::int8_t>()[i];
  }
  for (std::size_t i = 0; i < exact.lse.size(); ++i) lse.as<float>()[i] = static_cast<float>(exact.lse[i]);
  std::error_code ec;
  std::filesystem::create_directories(args.out_dir, ec);
  const Status written = io::write_safetensors(
      result_path(args).string(), {{"attention_out", &out}, {"softmax_lse", &lse}},
      {{"out_dtype", std::string(dtype_name(p.out_dtype))},
       {"lse_flag", p.lse ? "true" : "false"},
       {"about", "fia run --expected: the float64 reference's answer for " + args.case_dir}});
  if (!written.ok()) {
    print_error(written.parameter, written.message);
    return kExitFailure;
  }
  std::printf("wrote %s: attention_out F32 %s (output dtype %s), softmax_lse F32 %s\n", result_path(args).c_str(),
              shape(out.shape).c_str(), std::string(dtype_name(p.out_dtype)).c_str(), shape(lse.shape).c_str());
  return kExitOk;
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
  if (args.entry_point == "ifa") c.args.entry_point = EntryPoint::kIncreFlashAttention;
  if (args.entry_point == "pfa") c.args.entry_point = EntryPoint::kPromptFlashAttention;
  if (args.expected) return write_expected(args, c);
  Options opt;
  opt.strict = args.strict;
  opt.threads = args.threads;
  opt.post_quant_rounding = post_quant_rounding(args);
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
  std::printf("wrote %s/outputs.safetensors: attention_out %s %s, softmax_lse F32 %s\n", args.out_dir.c_str(),
              std::string(dtype_name(out.attention_out.dtype)).c_str(), shape(out.attention_out.shape).c_str(),
              shape(out.softmax_lse.shape).c_str());
  return kExitOk;
}

}  // namespace fia::cli
