// Subcommands of the fia command-line tool.
#pragma once

#include <string>

namespace fia::cli {

/// Exit statuses of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   ///< I/O or internal failure
inline constexpr int kExitRejected = 2;  ///< the call was rejected: invalid input or unsupported feature

struct RunArgs {
  std::string case_dir;
  std::string out_dir;
  std::string backend = "cpu";
  int threads = 0;
  bool strict = false;
};

/// `fia run CASE_DIR --out OUT_DIR`: computes one case (CASE-FORMAT.md) and writes
/// OUT_DIR/outputs.safetensors. On a rejected call prints one `error: ` line, writes nothing and
/// returns kExitRejected.
int run_command(const RunArgs& args);

/// Prints "error: <parameter>: <message>" on stderr.
void print_error(const std::string& parameter, const std::string& message);

}  // namespace fia::cli
