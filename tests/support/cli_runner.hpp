// Running the fia binary from tests.
#pragma once

#include <string>
#include <vector>

namespace fia::test {

struct CliResult {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

/// Runs the fia binary built with the tests (FIA_BINARY) with `args`, capturing both streams.
CliResult run_fia(const std::vector<std::string>& args);

/// A fresh empty directory under the system temp dir.
std::string temp_dir(const std::string& tag);

}  // namespace fia::test
