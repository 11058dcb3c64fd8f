// `fia bench` on a case folder: every workload is judged against the medians of --probe-rounds
// rounds of each machine-limit probe, and --json carries them with their count and the pages the
// tensors lie on (--pages).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cpu/amx.hpp"
#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "fia/io/case_dir.hpp"
#include "support/call_builder.hpp"
#include "support/cli_runner.hpp"
#include "support/scoped_env.hpp"

namespace fia::test {
namespace {

namespace fs = std::filesystem;

TEST(FiaBench, ProbeRoundsSetTheRoundsEachWorkloadIsJudgedBy) {
  CallSpec spec;
  spec.layout = "BNSD";
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.kv_seq = 300;
  spec.qk_dim = 64;
  const TestCall call = build_call(spec, 5);
  const std::string dir = temp_dir("bench");
  ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
  for (const int rounds : {1, 3}) {
    const std::string json = dir + "/bench" + std::to_string(rounds) + ".json";
    const CliResult r = run_fia({"bench", "--case", dir + "/case", "--threads", "2", "--repeat", "4", "--probe-rounds",
                                 std::to_string(rounds), "--json", json});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("medians of " + std::to_string(rounds) + " probe rounds"), std::string::npos) << r.out;
    std::ifstream f(json);
    const nlohmann::json doc = nlohmann::json::parse(f);
    ASSERT_EQ(doc["results"].size(), 1u);
    const nlohmann::json& w = doc["results"][0];
    EXPECT_EQ(w["repeat"], 4);
    EXPECT_EQ(w["read_bandwidth_GBps"]["rounds"], rounds);
    EXPECT_EQ(w["fma_peak_GFLOPs"]["rounds"], rounds);
    EXPECT_GT(w["read_bandwidth_GBps"]["median"].get<double>(), 0.0);
    EXPECT_EQ(doc["read_bandwidth_GBps"]["rounds"], rounds);
  }
  fs::remove_all(dir);
}

TEST(FiaBench, PagesNameThePagesOfTheTensorsAndOthersAreRejected) {
  CallSpec spec;
  spec.kv_seq = 40;
  const std::string dir = temp_dir("bench_pages_cli");
  ASSERT_TRUE(io::save_case(dir + "/case", build_call(spec, 6).args).ok());
  for (const std::string pages : {"huge", "small"}) {
    const std::string json = dir + "/" + pages + ".json";
    const CliResult r = run_fia({"bench", "--case", dir + "/case", "--threads", "1", "--repeat", "2", "--probe-rounds",
                                 "1", "--pages", pages, "--json", json});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("tensors on " + pages + " pages"), std::string::npos) << r.out;
    std::ifstream f(json);
    const nlohmann::json doc = nlohmann::json::parse(f);
    EXPECT_EQ(doc["pages"], pages);
    EXPECT_GE(doc["huge_pages_MiB"]["asked"].get<double>(), 0.0);
  }
  const CliResult bad = run_fia({"bench", "--case", dir + "/case", "--pages", "tiny"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--pages"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

// The run says whether the kernels take bf16 dot products (FIA_BF16_DOTS, else where the CPU runs
// them faster than fp32 FMAs: cpu/isa.hpp), on its first line and as `bf16_dots` in --json.
TEST(FiaBench, SaysWhetherTheKernelsTakeBf16DotProducts) {
  CallSpec spec;
  spec.kv_seq = 40;
  const std::string dir = temp_dir("bench_dots_cli");
  ASSERT_TRUE(io::save_case(dir + "/case", build_call(spec, 7).args).ok());
  const ScopedEnv dots_env("FIA_BF16_DOTS");
  for (const std::string env : {"0", "1"}) {
    dots_env.set(env);
    const std::string json = dir + "/dots" + env + ".json";
    const CliResult r = run_fia({"bench", "--case", dir + "/case", "--threads", "1", "--repeat", "2", "--probe-rounds",
                                 "1", "--json", json});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const bool taken = env == "1" && detail::bf16_dots_supported();
    const std::string said = !detail::bf16_dots_supported() ? "none on this CPU" : taken ? "taken" : "not taken";
    EXPECT_NE(r.out.find("bf16 dot products: " + said), std::string::npos) << r.out;
    std::ifstream f(json);
    EXPECT_EQ(nlohmann::json::parse(f)["bf16_dots"], taken) << env;
  }
  fs::remove_all(dir);
}

// The run says whether the kernels take AMX tiles (FIA_AMX, else wherever the CPU and Linux allow
// them: cpu/amx.hpp), on its first line and as `amx_tiles` in --json; a bad FIA_AMX is rejected,
// naming it.
TEST(FiaBench, SaysWhetherTheKernelsTakeAmxTiles) {
  CallSpec spec;
  spec.kv_seq = 40;
  const std::string dir = temp_dir("bench_amx_cli");
  ASSERT_TRUE(io::save_case(dir + "/case", build_call(spec, 7).args).ok());
  const ScopedEnv amx_env("FIA_AMX");
  for (const std::string env : {"0", "1"}) {
    amx_env.set(env);
    const std::string json = dir + "/amx" + env + ".json";
    const CliResult r = run_fia({"bench", "--case", dir + "/case", "--threads", "1", "--repeat", "2", "--probe-rounds",
                                 "1", "--json", json});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const bool possible = detail::amx_bf16_supported() && detail::kernel_isa_has_bf16_dots();
    const bool taken = env == "1" && possible;
    const std::string said = !detail::amx_bf16_in_cpu() ? "none on this CPU"
                             : taken                    ? "taken"
                             : env == "0" && detail::amx_bf16_supported() ? "forbidden by FIA_AMX=0"
                                                        : "not";
    EXPECT_NE(r.out.find("AMX tiles: " + said), std::string::npos) << r.out;
    std::ifstream f(json);
    EXPECT_EQ(nlohmann::json::parse(f)["amx_tiles"], taken) << env;
  }
  amx_env.set("on");
  const CliResult bad = run_fia({"bench", "--case", dir + "/case", "--threads", "1", "--repeat", "1"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("FIA_AMX"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fia::test
