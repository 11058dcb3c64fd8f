// The fia tool's own options: --version, and the ranges numeric options name when out of range.
#include <gtest/gtest.h>

#include "support/cli_runner.hpp"

namespace fia::test {
namespace {

TEST(FiaUsage, VersionPrintsTheProjectVersion) {
  const CliResult r = run_fia({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string("fia ") + FIA_VERSION + "\n");
  EXPECT_EQ(r.err, "");
}

TEST(FiaUsage, OutOfRangeNumbersNameASensibleRange) {
  // --block-size 0 once printed DBL_MAX with its 309 digits as the upper bound.
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"generate", "--model", "m", "--tokenizer", "t", "--block-size", "0"},
       "error: --block-size: must be in [1, 65536], got 0 (see --help)\n"},
      {{"generate", "--model", "m", "--tokenizer", "t", "--steps", "-1"},
       "error: --steps: must be in [0, 1048576], got -1 (see --help)\n"},
      {{"generate", "--model", "m", "--tokenizer", "t", "--temperature", "-0.5"},
       "error: --temperature: must be in [0, 100], got -0.5 (see --help)\n"},
      {{"generate", "--model", "m", "--tokenizer", "t", "--threads", "-1"},
       "error: --threads: must be in [0, 1024], got -1 (see --help)\n"},
      {{"run", "c", "--out", "o", "--threads", "2000"},
       "error: --threads: must be in [0, 1024], got 2000 (see --help)\n"},
      {{"bench", "--probe-rounds", "0"}, "error: --probe-rounds: must be in [1, 1000], got 0 (see --help)\n"},
  };
  for (const auto& [args, err] : cases) {
    const CliResult r = run_fia(args);
    EXPECT_EQ(r.exit_code, 2) << err;
    EXPECT_EQ(r.err, err);
  }
}

}  // namespace
}  // namespace fia::test
