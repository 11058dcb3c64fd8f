// libFuzzer target: the whole public path on small calls. Decodes the input into an FIA call
// (fuzz/call_decoder.hpp), plans it for the cpu and the reference backend and, when valid, runs
// both. Findings (each aborts, so libFuzzer saves the input):
//   - a crash, or an AddressSanitizer / UndefinedBehaviorSanitizer report;
//   - the two backends disagree about validity, or a rejection names no parameter;
//   - where both run: a NaN on one side where the other is finite;
//   - for calls with ordinary values (FuzzCall::ordinary): attention_out outside FIA-SPEC 21.1
//     criterion A of the reference by more than the P cast explains (p_cast_allowance), or
//     softmax_lse not matching it.
// One input in four also sets the partial-attention options (docs/numerics.md "Partial
// attention"): float32_out, and a softmax_max of softmax_lse's shape (now and then a wrong shape or
// dtype) whose rows hold -inf, values among the scores, or values far above them; its values and
// choices come from a hash of the input. Such calls are not judged by criterion A (a reference far
// above the scores leaves E subnormal, where the backends' roundings differ), only by the checks
// above.
// FIA_FUZZ_EXTREME=1 admits NaN / inf / huge values (DecodeMode::extreme); FIA_FUZZ_VERBOSE=1
// prints every decoded call.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "call_decoder.hpp"
#include "check/criterion.hpp"

namespace {

using namespace fia;

fuzz::DecodeMode g_mode;

[[noreturn]] void finding(const std::string& what, const fuzz::FuzzCall& fc) {
  std::fprintf(stderr, "\nFINDING: %s\ncall: %s\n", what.c_str(), fc.trace.c_str());
  std::abort();
}

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
}

/// Runs a valid plan into fresh outputs (softmax_lse is {1} when the flag is off).
Outputs run_plan(const Plan& plan, const fuzz::FuzzCall& fc) {
  Outputs o;
  o.attention_out = OwnedTensor(plan.attention_out_dtype(), plan.attention_out_shape());
  o.softmax_lse = OwnedTensor(DType::F32, plan.softmax_lse_shape());
  std::vector<std::byte> workspace(plan.workspace_bytes());
  const Status st = run(plan, o.attention_out.mutable_view(), o.softmax_lse.mutable_view(), workspace.data(),
                        workspace.size());
  if (!st.ok()) finding("run failed after a successful plan: " + st.to_string(), fc);
  return o;
}

/// A NaN in `got` where `want` holds a finite number, or the other way round.
void expect_same_nans(const char* name, const std::vector<double>& got, const std::vector<double>& want,
                      const fuzz::FuzzCall& fc) {
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if ((std::isnan(got[i]) && std::isfinite(want[i])) || (std::isnan(want[i]) && std::isfinite(got[i])))
      finding(std::string(name) + "[" + std::to_string(i) + "]: cpu " + std::to_string(got[i]) + ", reference " +
                  std::to_string(want[i]),
              fc);
  }
}

/// What the P cast (docs/numerics.md step 5) lets the two backends differ by: cpu and reference
/// round E = exp(S - m) to the query dtype from f32 and f64 values, so each term's P may land one
/// ulp apart (relative 2^-7 in bf16, 2^-10 in fp16; for f32, E's own error from f32 scores stays
/// below 2^-10 at these magnitudes), which moves an output by up to that share of
/// sum_j p_j |v_j| <= max |V|. Doubled for margin.
double p_cast_allowance(DType out, double value_bound) {
  return 2.0 * (out == DType::BF16 ? 0x1p-7 : 0x1p-10) * value_bound;
}

/// Criterion A's per-element test with `allowance` added to the tolerance, on every element.
bool within(const OwnedTensor& got, const std::vector<double>& want, double allowance) {
  const bool bf16 = got.dtype == DType::BF16;
  const double rtol = bf16 ? 0x1p-7 : 0.005, atol = bf16 ? 1e-4 : 2.5e-5;
  const std::vector<double> g = check::to_doubles(got);
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(std::fabs(g[i] - want[i]) <= atol + rtol * std::fabs(want[i]) + allowance)) return false;
  return true;
}

/// FNV-1a of the input: the partial-attention choices, independent of the decoder's reading.
std::uint64_t input_hash(const std::uint8_t* data, std::size_t size) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

/// splitmix64: the next of a sequence of 64-bit values from `state`.
std::uint64_t next(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Sets float32_out and softmax_max on one input in four (see the top of the file); the tensor
/// goes into the call's storage. Returns false when the call was left as decoded.
bool add_partial_options(fuzz::FuzzCall& fc, std::uint64_t h) {
  if (h % 4 != 0) return false;
  std::uint64_t state = h;
  fc.options.float32_out = next(state) % 2 == 0;
  Plan probe;
  if (!plan(fc.call.args, Options{}, &probe).ok() || !probe.softmax_lse_flag()) return true;
  std::vector<std::int64_t> shape = probe.softmax_lse_shape();
  DType dtype = DType::F32;
  const std::uint64_t wrong = next(state) % 16;
  if (wrong == 0) shape.back() += 1;
  if (wrong == 1) dtype = DType::F16;
  OwnedTensor t(dtype, shape);
  for (std::int64_t i = 0; i < t.numel() && dtype == DType::F32; ++i) {
    const std::uint64_t v = next(state);
    const double u = static_cast<double>(v >> 11) * 0x1p-53;
    t.as<float>()[i] = v % 5 == 0 ? -INFINITY : v % 5 == 1 ? static_cast<float>(1e3 + 1e30 * u)
                                                          : static_cast<float>(-20.0 + 40.0 * u);
  }
  fc.options.softmax_max = fc.call.keep(std::move(t));
  fc.trace += std::string(" float32_out=") + (fc.options.float32_out ? "1" : "0") + " softmax_max " +
              dtype_name(dtype).data() + (wrong == 0 ? " (wrong shape)" : "");
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_mode.extreme = env_on("FIA_FUZZ_EXTREME");
  g_mode.verbose = env_on("FIA_FUZZ_VERBOSE");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::FuzzCall fc = fuzz::decode_call(data, size, g_mode);
  if (add_partial_options(fc, input_hash(data, size))) fc.ordinary = false;
  if (g_mode.verbose) std::fprintf(stderr, "call: %s\n", fc.trace.c_str());
  Options o = fc.options;
  o.backend = Backend::kCpu;
  Plan cpu_plan, ref_plan;
  const Status cs = plan(fc.call.args, o, &cpu_plan);
  o.backend = Backend::kReference;
  const Status rs = plan(fc.call.args, o, &ref_plan);
  if (cs.code != rs.code || cs.parameter != rs.parameter)
    finding("the backends disagree: cpu '" + cs.to_string() + "', reference '" + rs.to_string() + "'", fc);
  if (!cs.ok()) {
    if (cs.parameter.empty() || cs.message.empty()) finding("a rejection without parameter or message: " + cs.to_string(), fc);
    if (g_mode.verbose) std::fprintf(stderr, "rejected: %s\n", cs.to_string().c_str());
    return 0;
  }
  const Outputs cpu = run_plan(cpu_plan, fc), ref = run_plan(ref_plan, fc);
  const std::vector<double> got = check::to_doubles(cpu.attention_out), want = check::to_doubles(ref.attention_out);
  expect_same_nans("attention_out", got, want, fc);
  const std::vector<double> got_lse = check::to_doubles(cpu.softmax_lse), want_lse = check::to_doubles(ref.softmax_lse);
  expect_same_nans("softmax_lse", got_lse, want_lse, fc);
  if (!fc.ordinary) return 0;
  // Criterion A judges by a 99.5 % share, made for large outputs: on a call of a few hundred
  // elements that cancel to near 0, one P term rounded the other way already fails it. Elements
  // it fails must still be within the P cast's allowance.
  const check::Verdict v = check::criterion_a(cpu.attention_out, want);
  if (!v.pass && !within(cpu.attention_out, want, p_cast_allowance(cpu.attention_out.dtype, fc.value_bound)))
    finding("attention_out fails criterion A, beyond what the P cast explains: " + v.detail, fc);
  if (cpu_plan.softmax_lse_flag()) {
    const check::Verdict l = check::lse_match(cpu.softmax_lse, want_lse);
    if (!l.pass) finding("softmax_lse differs: " + l.detail, fc);
  }
  return 0;
}
