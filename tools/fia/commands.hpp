// Subcommands of the fia command-line tool.
#pragma once

#include <cstdint>
#include <string>

namespace fia::cli {

/// Exit statuses of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   ///< I/O or internal failure
inline constexpr int kExitRejected = 2;  ///< the call was rejected: invalid input or unsupported feature

struct RunArgs {
  std::string case_dir;
  std::string out_dir;
  std::string backend;  ///< cpu or reference; empty = FIA_BACKEND, else cpu
  int threads = 0;
  bool strict = false;
  std::string entry_point = "fia";  ///< fia, ifa or pfa: the operator whose numerics apply (FIA-SPEC 25.3)
  std::string post_quant_rounding = "device";  ///< device or golden: the int8 output formula (FIA-SPEC 14.1)
  bool expected = false;  ///< write the reference's exact answer as OUT_DIR/expected.safetensors
};

/// `fia run CASE_DIR --out OUT_DIR`: computes one case (CASE-FORMAT.md) and writes
/// OUT_DIR/outputs.safetensors; with `expected`, the float64 reference's answer before the final
/// cast, as OUT_DIR/expected.safetensors in the format of the shared sample cases. On a rejected
/// call prints one `error: ` line, writes nothing and returns kExitRejected.
int run_command(const RunArgs& args);

struct GenerateArgs {
  std::string model;
  std::string tokenizer;
  std::string prompt;
  std::string batch_prompts;
  int steps = 256;
  float temperature = 0.0f;
  float top_p = 0.9f;
  std::uint64_t seed = 42;
  std::string kv_dtype = "fp32";
  int block_size = 16;
  std::string backend;  ///< cpu or reference; empty = FIA_BACKEND, else cpu
  int threads = 0;
  bool print_ids = false;
};

/// `fia generate --model M.bin --tokenizer T.bin`: runs a llama2.c model with every attention
/// call done by FIA (prefill, then paged decode) and prints the text, or the token ids, on stdout
/// and the speed and attention share on stderr. A bad model, tokenizer or request prints one
/// `error: ` line and returns kExitRejected.
int generate_command(const GenerateArgs& args);

struct BenchArgs {
  std::string shapes = "bench/shapes.json";
  std::string only;  ///< comma-separated names, empty = all
  std::string case_dir;
  std::string json;
  std::string isa;
  int threads = 0;
  int repeat = 0;  ///< 0 = 30 for decode, 5 for prefill
  int probe_rounds = 12;  ///< rounds of each machine-limit probe per workload
  std::string pages = "huge";  ///< "huge" or "small": the pages of the tensors and probe buffer
};

/// `fia bench`: measures the machine's read bandwidth and fp32 FMA peak, then times each workload
/// (median of repeated calls; decode with KV buffers rotated so they are not cache-resident) and
/// prints GB/s (decode) or GFLOP/s (prefill) and the fraction of the matching limit. Returns
/// kExitOk unless a workload failed for another reason than an unsupported feature.
int bench_command(const BenchArgs& args);

struct CompareArgs {
  std::string got;       ///< outputs.safetensors to judge
  std::string expected;  ///< exact answer: attention_out (any float dtype) [+ softmax_lse]
};

/// `fia compare GOT EXPECTED`: judges attention_out (and softmax_lse) by FIA-SPEC 21.1
/// criterion A, with the tolerances of GOT's dtype. kExitOk when it passes, kExitFailure when it
/// does not, kExitRejected when a file is unreadable or the shapes differ.
int compare_command(const CompareArgs& args);

/// Resolves an empty --backend from FIA_BACKEND (default cpu); false (after printing the error)
/// when FIA_BACKEND names no backend.
bool resolve_backend(std::string* backend);

/// Prints "error: <parameter>: <message>" on stderr, one line: control bytes (NUL, newline, ...)
/// are written as \xNN and very long text is cut.
void print_error(const std::string& parameter, const std::string& message);

}  // namespace fia::cli
