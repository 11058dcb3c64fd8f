// Cases written by others (../shared/cases, CASE-FORMAT.md) pass through `fia run`: valid cases in
// default mode judged by FIA-SPEC 21.1 criterion A, invalid cases in strict mode.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "fia/io/safetensors.hpp"
#include "support/cli_runner.hpp"
#include "support/criterion.hpp"

namespace fia::test {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> case_dirs(const std::string& family) {
  std::vector<std::string> v;
  const fs::path root = fs::path(FIA_SHARED_DIR) / "cases" / family;
  if (!fs::is_directory(root)) return v;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

class SharedValidCase : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedValidCase, MatchesExpected) {
  const std::string dir = GetParam();
  const std::string out = temp_dir("shared");
  const CliResult r = run_fia({"run", dir, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  io::TensorFile got, want;
  ASSERT_TRUE(io::read_safetensors(out + "/outputs.safetensors", &got).ok());
  ASSERT_TRUE(io::read_safetensors(dir + "/expected.safetensors", &want).ok());
  const OwnedTensor& a = got.tensors.at("attention_out");
  const OwnedTensor& e = want.tensors.at("attention_out");
  EXPECT_EQ(std::string(dtype_name(a.dtype)), want.metadata.at("out_dtype"));
  ASSERT_EQ(a.shape, e.shape);
  const Verdict v = criterion_a(a, to_doubles(e));
  EXPECT_TRUE(v.pass) << v.detail << " (" << want.metadata["about"] << ")";
  const OwnedTensor& l = got.tensors.at("softmax_lse");
  const OwnedTensor& le = want.tensors.at("softmax_lse");
  ASSERT_EQ(l.shape, le.shape);
  const Verdict lv = lse_match(l, to_doubles(le));
  EXPECT_TRUE(lv.pass) << lv.detail;
  fs::remove_all(out);
}

class SharedInvalidCase : public ::testing::TestWithParam<std::string> {};

TEST_P(SharedInvalidCase, RejectedInStrictMode) {
  const std::string dir = GetParam();
  std::ifstream f(dir + "/expected_error.txt");
  std::string names;
  std::getline(f, names);
  const std::string out = temp_dir("shared-invalid");
  const CliResult r = run_fia({"run", dir, "--out", out + "/o", "--strict"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(fs::exists(out + "/o/outputs.safetensors"));
  ASSERT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  bool named = false;
  std::stringstream ss(names);
  for (std::string n; std::getline(ss, n, '|');) named = named || r.err.find(n) != std::string::npos;
  EXPECT_TRUE(named) << "expected one of '" << names << "' in: " << r.err;
  fs::remove_all(out);
}

std::vector<std::string> valid_cases() {
  std::vector<std::string> v = case_dirs("core");
  for (const auto& s : case_dirs("storage")) v.push_back(s);
  for (const auto& s : case_dirs("quant")) v.push_back(s);
  return v;
}

std::string case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = fs::path(info.param).filename().string();
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Shared, SharedValidCase, ::testing::ValuesIn(valid_cases()), case_name);
std::vector<std::string> invalid_cases() {
  std::vector<std::string> v = case_dirs("invalid");
  for (const auto& s : case_dirs("invalid-quant")) v.push_back(s);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shared, SharedInvalidCase, ::testing::ValuesIn(invalid_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SharedValidCase);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SharedInvalidCase);

TEST(SharedCases, PresentWhenTheSharedFolderIs) {
  if (!fs::is_directory(FIA_SHARED_DIR)) GTEST_SKIP() << "no shared folder at " << FIA_SHARED_DIR;
  EXPECT_FALSE(valid_cases().empty());
  EXPECT_FALSE(case_dirs("invalid").empty());
  EXPECT_FALSE(case_dirs("invalid-quant").empty());
  // Every quant sample case is computed (MatchesExpected): count the kinds that must be there.
  int antiquant = 0, full_quant = 0, mla_nz = 0;
  for (const auto& d : case_dirs("quant")) {
    io::TensorFile in;
    ASSERT_TRUE(io::read_safetensors(d + "/inputs.safetensors", &in).ok()) << d;
    const DType k = in.tensors.count("key") ? in.tensors.at("key").dtype : in.tensors.at("key.0").dtype;
    const bool int8_query = in.tensors.at("query").dtype == DType::I8;
    if ((k == DType::I8 || k == DType::I32) && !int8_query) ++antiquant;
    if (int8_query && !in.tensors.count("query_rope")) ++full_quant;
    if (int8_query && in.tensors.count("query_rope") && in.tensors.at("key").shape.size() == 5) ++mla_nz;
  }
  EXPECT_GE(antiquant, 10);
  EXPECT_GE(full_quant, 3);  // int8 full quantization (FIA-SPEC 13.1)
  EXPECT_GE(mla_nz, 7);      // MLA full quant (13.3) over NZ caches (9.1)
}

}  // namespace
}  // namespace fia::test
