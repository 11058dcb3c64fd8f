// `fia generate`: exact run.c stdout, ids, batches, statistics and the error contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/model_files.hpp"
#include "support/cli_runner.hpp"

namespace fia::test {
namespace {

namespace fs = std::filesystem;

#define REQUIRE_MODELS() \
  if (!have_models()) GTEST_SKIP() << "no model files in " << models_dir()

/// `fia generate` on stories260K, with one FIA thread unless `extra` says otherwise (the calls are
/// tiny, and ctest runs suites side by side).
std::vector<std::string> generate_args(std::vector<std::string> extra) {
  std::vector<std::string> a = {"generate", "--model", model_path(), "--tokenizer", tokenizer_path()};
  if (std::find(extra.begin(), extra.end(), "--threads") == extra.end()) a.insert(a.end(), {"--threads", "1"});
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(FiaGenerate, PrintsExactlyWhatRunCPrints) {
  REQUIRE_MODELS();
  CliResult r = run_fia(generate_args({}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(models_dir() + "/stories260K_greedy_t0_n256.txt"));
  EXPECT_NE(r.err.find(" tokens/s (256 sampled tokens in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("% of the time ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" in 1280 FIA calls: 5 prefill, 1275 decode; cpu backend, fp32 KV cache of 16 blocks of 16 "
                       "tokens)"),
            std::string::npos)
      << r.err;

  r = run_fia(generate_args({"--print-ids"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(models_dir() + "/stories260K_greedy_t0_n256.ids"));

  r = run_fia(generate_args({"--prompt", "Zoo", "--steps", "60", "--temperature", "0", "--threads", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(models_dir() + "/stories260K_prompt_Zoo_t0_n60.txt"));
}

TEST(FiaGenerate, SeededSamplingPrintsWhatRunCPrints) {
  REQUIRE_MODELS();
  if (std::system("command -v md5sum >/dev/null 2>&1") != 0) GTEST_SKIP() << "no md5sum";
  // LICENSE_NOTE.md: run.c's default sampling (temperature 1, top-p 0.9) with seed 42, 256 steps.
  const CliResult r = run_fia(generate_args({"--temperature", "1", "--top-p", "0.9", "--seed", "42"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string dir = temp_dir("sampled");
  std::ofstream(dir + "/stdout", std::ios::binary) << r.out;
  const int rc = std::system(("md5sum " + dir + "/stdout > " + dir + "/md5").c_str());
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(read_file(dir + "/md5").substr(0, 32), "8e6e99ed83fc476e1a33bc0940ecffa1") << r.out;
  fs::remove_all(dir);
}

TEST(FiaGenerate, BackendsKvDtypesAndBlockSizesAreOptions) {
  REQUIRE_MODELS();
  const std::string want = read_file(models_dir() + "/stories260K_prompt_Zoo_t0_n60.ids");
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--backend", "reference"},
                                                {"--kv-dtype", "fp16"},
                                                {"--kv-dtype", "bf16"},
                                                {"--block-size", "5"}}) {
    std::vector<std::string> a = {"--prompt", "Zoo", "--steps", "60", "--print-ids"};
    a.insert(a.end(), extra.begin(), extra.end());
    const CliResult r = run_fia(generate_args(a));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, want) << extra[0] << " " << extra[1];
  }
}

TEST(FiaGenerate, BatchPromptsPrintEachSequenceAsItWouldAlone) {
  REQUIRE_MODELS();
  const std::string dir = temp_dir("batch");
  const std::vector<std::string> prompts = {"Zoo", "", "The cat sat on the mat"};
  std::ofstream(dir + "/prompts.txt") << prompts[0] << "\n" << prompts[1] << "\n" << prompts[2] << "\n";
  const CliResult batch =
      run_fia(generate_args({"--batch-prompts", dir + "/prompts.txt", "--steps", "40", "--print-ids"}));
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  std::string want;
  for (std::size_t k = 0; k < prompts.size(); ++k) {
    const CliResult alone = run_fia(generate_args({"--prompt", prompts[k], "--steps", "40", "--print-ids"}));
    ASSERT_EQ(alone.exit_code, 0) << alone.err;
    want += "--- prompt " + std::to_string(k + 1) + ": \"" + prompts[k] + "\" ---\n" + alone.out;
  }
  EXPECT_EQ(batch.out, want);
  EXPECT_NE(batch.err.find("prefill: 3 prompt(s), 15 tokens"), std::string::npos) << batch.err;
  EXPECT_NE(batch.err.find("15 prefill"), std::string::npos) << batch.err;

  const CliResult text = run_fia(generate_args({"--batch-prompts", dir + "/prompts.txt", "--steps", "60"}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::string zoo = read_file(models_dir() + "/stories260K_prompt_Zoo_t0_n60.txt");
  EXPECT_EQ(text.out.rfind("--- prompt 1: \"Zoo\" ---\n" + zoo + "--- prompt 2: \"\" ---\nOnce upon a time", 0), 0u)
      << text.out;
  fs::remove_all(dir);
}

TEST(FiaGenerate, BadFilesAndRequestsExitTwoWithOneErrorLine) {
  REQUIRE_MODELS();
  const std::string dir = temp_dir("gen-bad");
  const std::string model = read_file(model_path());
  std::ofstream(dir + "/short.bin", std::ios::binary) << model.substr(0, model.size() / 2);
  struct Case {
    std::vector<std::string> args;
    std::string err_prefix;
  };
  const std::vector<Case> cases = {
      {{"generate", "--model", dir + "/absent.bin", "--tokenizer", tokenizer_path()},
       "error: --model: cannot open " + dir + "/absent.bin"},
      {{"generate", "--model", dir + "/short.bin", "--tokenizer", tokenizer_path()},
       "error: --model: " + dir + "/short.bin is truncated: its header"},
      {{"generate", "--model", tokenizer_path(), "--tokenizer", tokenizer_path()},
       "error: --model: " + tokenizer_path() + " is not a llama2.c checkpoint: "},
      {{"generate", "--model", model_path(), "--tokenizer", model_path()},
       "error: --tokenizer: " + model_path() + " is not a llama2.c tokenizer: "},
      {generate_args({"--steps", "600"}),
       "error: --steps: steps (prompt included) must lie in [1, the model's seq_len 512]"},
      {generate_args({"--prompt", "Once upon a time", "--steps", "3"}), "error: --prompt: prompt 1 is 5 tokens"},
      {generate_args({"--batch-prompts", dir + "/absent.txt"}), "error: --batch-prompts: cannot open"},
  };
  for (const Case& c : cases) {
    const CliResult r = run_fia(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.err_prefix << "\n" << r.err;
    EXPECT_EQ(r.err.rfind(c.err_prefix, 0), 0u) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.out, "");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fia::test
