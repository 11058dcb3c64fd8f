// `fia run`: a round trip through a case folder, the error contract, and .npy inputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "fia/io/case_dir.hpp"
#include "fia/io/safetensors.hpp"
#include "support/call_builder.hpp"
#include "support/cli_runner.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

namespace fs = std::filesystem;

TEST(FiaRun, RoundTripMatchesTheApiBitForBit) {
  for (std::uint64_t seed : {11, 12, 13, 14, 15, 16}) {
    const CallSpec spec = random_spec(seed);
    TestCall call = build_call(spec, seed);
    const std::string dir = temp_dir("case");
    ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
    for (const std::string backend : {"cpu", "reference"}) {
      const CliResult r = run_fia({"run", dir + "/case", "--out", dir + "/out", "--backend", backend, "--threads", "2"});
      ASSERT_EQ(r.exit_code, 0) << r.err << "\n" << describe(spec);
      io::TensorFile f;
      ASSERT_TRUE(io::read_safetensors(dir + "/out/outputs.safetensors", &f).ok());
      Outputs api;
      ASSERT_TRUE(run_call(call.args, backend == "cpu" ? Backend::kCpu : Backend::kReference, 2, &api).ok());
      EXPECT_EQ(f.tensors.at("attention_out").shape, api.attention_out.shape);
      EXPECT_EQ(f.tensors.at("attention_out").dtype, api.attention_out.dtype);
      EXPECT_EQ(f.tensors.at("attention_out").bytes, api.attention_out.bytes) << backend << " " << describe(spec);
      EXPECT_EQ(f.tensors.at("softmax_lse").bytes, api.softmax_lse.bytes) << backend << " " << describe(spec);
    }
    fs::remove_all(dir);
  }
}

// --entry-point ifa computes what the API computes for an IncreFlashAttention call (25.3), which
// differs from the FIA call on the same case.
TEST(FiaRun, EntryPointSelectsThePathNumerics) {
  CallSpec spec;
  spec.layout = "BSND";
  spec.num_heads = 4;
  spec.kv_seq = 700;
  spec.qk_dim = 64;
  spec.value_range = 16.0f;
  spec.scale = 1e-3;
  TestCall call = build_call(spec, 3);
  const std::string dir = temp_dir("entry");
  ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
  std::map<std::string, std::vector<std::byte>> got;
  for (const std::string entry : {"fia", "ifa", "pfa"}) {
    const CliResult r = run_fia({"run", dir + "/case", "--out", dir + "/" + entry, "--entry-point", entry});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    io::TensorFile f;
    ASSERT_TRUE(io::read_safetensors(dir + "/" + entry + "/outputs.safetensors", &f).ok());
    got[entry] = f.tensors.at("attention_out").bytes;
  }
  call.args.entry_point = EntryPoint::kIncreFlashAttention;
  Outputs ifa;
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 0, &ifa).ok());
  EXPECT_EQ(got["ifa"], ifa.attention_out.bytes);
  EXPECT_NE(got["ifa"], got["fia"]);
  EXPECT_EQ(got["pfa"], got["fia"]);  // BSND: PFA rounds as FIA
  const CliResult bad = run_fia({"run", dir + "/case", "--out", dir + "/x", "--entry-point", "mla"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--entry-point"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

TEST(FiaRun, RejectedCallExitsTwoWithOneErrorLineAndWritesNothing) {
  CallSpec spec;
  spec.layout = "BNSD";
  spec.num_heads = 6;
  spec.num_kv_heads = 4;
  spec.kv_seq = 4;
  TestCall call = build_call(spec, 1);
  const std::string dir = temp_dir("bad");
  ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
  const CliResult r = run_fia({"run", dir + "/case", "--out", dir + "/out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: num_key_value_heads: num_heads (6) must be a multiple of num_key_value_heads (4)\n");
  EXPECT_FALSE(fs::exists(dir + "/out"));
  fs::remove_all(dir);
}

TEST(FiaRun, MalformedFilesAreRejectedCleanly) {
  CallSpec spec;
  TestCall call = build_call(spec, 2);
  const std::string dir = temp_dir("malformed");
  ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
  fs::resize_file(dir + "/case/inputs.safetensors", fs::file_size(dir + "/case/inputs.safetensors") - 3);
  CliResult r = run_fia({"run", dir + "/case", "--out", dir + "/out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error: inputs.safetensors: truncated", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/out"));
  std::ofstream(dir + "/case/params.json") << "{\"num_heads\": 1, \"num_head\": 2}";
  r = run_fia({"run", dir + "/case", "--out", dir + "/out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: num_head: unknown parameter\n");
  r = run_fia({"run", dir + "/missing", "--out", dir + "/out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: CASE_DIR"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(FiaCompare, JudgesAgainstTheExactAnswer) {
  CallSpec spec = random_spec(21);
  spec.lse = true;
  TestCall call = build_call(spec, 21);
  const std::string dir = temp_dir("compare");
  ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
  ASSERT_EQ(run_fia({"run", dir + "/case", "--out", dir + "/out"}).exit_code, 0);
  detail::ReferenceResult exact;
  ASSERT_TRUE(reference_exact(call.args, &exact).ok());
  Plan pl;
  ASSERT_TRUE(plan(call.args, Options{}, &pl).ok());
  auto write_expected = [&](double bump) {
    OwnedTensor out(DType::F32, pl.attention_out_shape()), lse(DType::F32, pl.softmax_lse_shape());
    for (std::size_t i = 0; i < exact.out.size(); ++i) out.as<float>()[i] = static_cast<float>(exact.out[i] + bump);
    for (std::size_t i = 0; i < exact.lse.size(); ++i) lse.as<float>()[i] = static_cast<float>(exact.lse[i]);
    ASSERT_TRUE(io::write_safetensors(dir + "/expected.safetensors", {{"attention_out", &out}, {"softmax_lse", &lse}}).ok());
  };
  write_expected(0.0);
  CliResult r = run_fia({"compare", dir + "/out/outputs.safetensors", dir + "/expected.safetensors"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << describe(spec);
  EXPECT_NE(r.out.find("attention_out: PASS"), std::string::npos) << r.out;
  write_expected(0.5);
  r = run_fia({"compare", dir + "/out/outputs.safetensors", dir + "/expected.safetensors"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("attention_out: FAIL"), std::string::npos) << r.out;
  r = run_fia({"compare", dir + "/out/outputs.safetensors", dir + "/missing.safetensors"});
  EXPECT_EQ(r.exit_code, 2);
  fs::remove_all(dir);
}

TEST(FiaRun, ExpectedWritesTheReferencesExactAnswer) {
  CallSpec spec = random_spec(22);
  spec.lse = true;
  TestCall call = build_call(spec, 22);
  const std::string dir = temp_dir("expected");
  ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
  CliResult r = run_fia({"run", dir + "/case", "--out", dir + "/out", "--expected"});
  ASSERT_EQ(r.exit_code, 0) << r.err << describe(spec);
  EXPECT_FALSE(fs::exists(dir + "/out/outputs.safetensors"));
  io::TensorFile f;
  ASSERT_TRUE(io::read_safetensors(dir + "/out/expected.safetensors", &f).ok());
  detail::ReferenceResult exact;
  ASSERT_TRUE(reference_exact(call.args, &exact).ok());
  const OwnedTensor& out = f.tensors.at("attention_out");
  const OwnedTensor& lse = f.tensors.at("softmax_lse");
  ASSERT_EQ(out.dtype, DType::F32);
  ASSERT_EQ(out.numel(), static_cast<std::int64_t>(exact.out.size()));
  for (std::size_t i = 0; i < exact.out.size(); ++i)
    ASSERT_EQ(out.as<float>()[i], static_cast<float>(exact.out[i])) << i;
  ASSERT_EQ(lse.numel(), static_cast<std::int64_t>(exact.lse.size()));
  for (std::size_t i = 0; i < exact.lse.size(); ++i)
    ASSERT_EQ(lse.as<float>()[i], static_cast<float>(exact.lse[i])) << i;
  EXPECT_EQ(f.metadata.at("out_dtype"), dtype_name(call.args.query.dtype));
  EXPECT_EQ(f.metadata.at("lse_flag"), "true");
  // The reference writes it: --backend does not combine with --expected.
  r = run_fia({"run", dir + "/case", "--out", dir + "/out", "--expected", "--backend", "cpu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: --backend excludes --expected (see --help)\n");
  // A rejected call removes a stale answer.
  std::ofstream(dir + "/case/params.json") << "{\"num_heads\": 0}";
  EXPECT_EQ(run_fia({"run", dir + "/case", "--out", dir + "/out", "--expected"}).exit_code, 2);
  EXPECT_FALSE(fs::exists(dir + "/out/expected.safetensors"));
  fs::remove_all(dir);
}

TEST(FiaRun, ExampleCasePassesAgainstItsShippedAnswer) {
  // The README's steps: run the example case, compare with the expected.safetensors it ships.
  const std::string example = std::string(FIA_SOURCE_DIR) + "/examples/cases/gqa_decode";
  const std::string dir = temp_dir("example");
  for (const std::string backend : {"cpu", "reference"}) {
    ASSERT_EQ(run_fia({"run", example, "--out", dir, "--backend", backend}).exit_code, 0) << backend;
    const CliResult r = run_fia({"compare", dir + "/outputs.safetensors", example + "/expected.safetensors"});
    EXPECT_EQ(r.exit_code, 0) << backend << "\n" << r.out << r.err;
    EXPECT_EQ(r.out.rfind("attention_out: PASS 100.0000% of 1024 elements", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("\nsoftmax_lse: PASS\n"), std::string::npos) << r.out;
  }
  fs::remove_all(dir);
}

TEST(FiaRun, UsageErrorsAreOneErrorLine) {
  for (const auto& args : {std::vector<std::string>{"run", "x"},
                                              std::vector<std::string>{"run", "x", "--out", "y", "--threads", "-1"},
                                              std::vector<std::string>{"run", "x", "--out", "y", "--backend", "gpu"}}) {
    const CliResult r = run_fia(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(FiaRun, RejectionRemovesAStaleResult) {
  CallSpec spec;
  TestCall call = build_call(spec, 5);
  const std::string dir = temp_dir("stale");
  ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
  ASSERT_EQ(run_fia({"run", dir + "/case", "--out", dir + "/out"}).exit_code, 0);
  ASSERT_TRUE(fs::exists(dir + "/out/outputs.safetensors"));
  std::ofstream(dir + "/case/params.json") << "{\"num_heads\": 0}";
  EXPECT_EQ(run_fia({"run", dir + "/case", "--out", dir + "/out"}).exit_code, 2);
  EXPECT_FALSE(fs::exists(dir + "/out/outputs.safetensors"));
  fs::remove_all(dir);
}

TEST(FiaRun, ReadsNpyInputs) {
  // query as query.npy (F16), key/value in inputs.safetensors.
  CallSpec spec;
  spec.layout = "BSH";
  spec.num_heads = 2;
  spec.kv_seq = 5;
  spec.lse = true;
  TestCall call = build_call(spec, 3);
  const std::string dir = temp_dir("npy");
  FiaArgs without_query = call.args;
  ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
  // Rewrite inputs.safetensors without the query and add query.npy.
  io::TensorFile f;
  ASSERT_TRUE(io::read_safetensors(dir + "/case/inputs.safetensors", &f).ok());
  const OwnedTensor q = f.tensors.at("query");
  f.tensors.erase("query");
  std::vector<std::pair<std::string, const OwnedTensor*>> rest;
  for (const auto& [n, t] : f.tensors) rest.emplace_back(n, &t);
  ASSERT_TRUE(io::write_safetensors(dir + "/case/inputs.safetensors", rest).ok());
  std::string header = "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 1, " + std::to_string(q.shape[2]) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream npy(dir + "/case/query.npy", std::ios::binary);
  const unsigned char pre[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size()), 0};
  npy.write(reinterpret_cast<const char*>(pre), sizeof pre);
  npy << header;
  npy.write(reinterpret_cast<const char*>(q.bytes.data()), static_cast<std::streamsize>(q.bytes.size()));
  npy.close();
  CliResult r = run_fia({"run", dir + "/case", "--out", dir + "/out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  io::TensorFile out;
  ASSERT_TRUE(io::read_safetensors(dir + "/out/outputs.safetensors", &out).ok());
  Outputs api;
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 0, &api).ok());
  EXPECT_EQ(out.tensors.at("attention_out").bytes, api.attention_out.bytes);
  // The same tensor twice (safetensors and .npy) is an error naming it.
  rest.emplace_back("query", &q);
  ASSERT_TRUE(io::write_safetensors(dir + "/case/inputs.safetensors", rest).ok());
  r = run_fia({"run", dir + "/case", "--out", dir + "/out2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error: query:", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(dir + "/out2"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fia::test
