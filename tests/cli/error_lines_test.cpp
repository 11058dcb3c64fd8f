// `fia run` error lines on hostile case folders: one escaped line naming the parameter or the
// file, exit status 2, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fia/io/case_dir.hpp"
#include "fia/io/safetensors.hpp"
#include "support/call_builder.hpp"
#include "support/cli_runner.hpp"

namespace fia::test {
namespace {

namespace fs = std::filesystem;

/// A valid case folder under a fresh temp dir; returns the dir (the case is DIR/case).
std::string valid_case(const std::string& tag) {
  CallSpec spec;
  spec.layout = "BSH";
  spec.num_heads = 2;
  spec.kv_seq = 4;
  TestCall call = build_call(spec, 7);
  const std::string dir = temp_dir(tag);
  EXPECT_TRUE(io::save_case(dir + "/case", call.args).ok());
  return dir;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// Rewrites DIR/case/inputs.safetensors with `edit` applied to its header text.
template <class Edit>
void edit_header(const std::string& dir, Edit edit) {
  const std::string path = dir + "/case/inputs.safetensors";
  std::vector<unsigned char> image;
  ASSERT_TRUE(io::read_file(path, &image));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | image[i];
  std::string header(reinterpret_cast<const char*>(image.data() + 8), n);
  edit(header);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  out += header;
  out.append(reinterpret_cast<const char*>(image.data() + 8 + n), image.size() - 8 - n);
  write_text(path, out);
}

void expect_one_error_line(const CliResult& r, const std::string& line) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err, line + "\n");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\0'), 0);
}

TEST(FiaRunErrors, DeeplyNestedParamsValueIsAnErrorNotACrash) {
  const std::string dir = valid_case("deep-params");
  const std::size_t depth = 100000;  // 200 KB of brackets: once exit 139 (stack overflow)
  write_text(dir + "/case/params.json",
             R"({"num_heads": 2, "scale": )" + std::string(depth, '[') + std::string(depth, ']') + "}");
  expect_one_error_line(run_fia({"run", dir + "/case", "--out", dir + "/out"}),
                        "error: scale: nested deeper than 64 levels");
  EXPECT_FALSE(fs::exists(dir + "/out"));
  fs::remove_all(dir);
}

TEST(FiaRunErrors, DeeplyNestedSafetensorsDtypeIsAnErrorNotACrash) {
  const std::string dir = valid_case("deep-header");
  edit_header(dir, [](std::string& h) {
    const std::string from = R"("dtype":"F16")";
    const auto at = h.find(from);
    ASSERT_NE(at, std::string::npos) << h;
    h.replace(at, from.size(), R"("dtype":)" + std::string(100000, '[') + std::string(100000, ']'));
  });
  // The header's entries are sorted by name: "key" comes first.
  expect_one_error_line(run_fia({"run", dir + "/case", "--out", dir + "/out"}),
                        "error: inputs.safetensors: the header entry 'key': nested deeper than 64 levels");
  fs::remove_all(dir);
}

TEST(FiaRunErrors, NulBytesInEchoedStringsAreEscaped) {
  const std::string dir = valid_case("nul");
  write_text(dir + "/case/params.json", R"({"num_heads": 2, "input_layout": "BS\u0000H"})");
  const CliResult r = run_fia({"run", dir + "/case", "--out", dir + "/out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error: input_layout: unsupported layout 'BS\\x00H' (expected one of BSH, ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\0'), 0);

  write_text(dir + "/case/params.json", R"({"num_heads": 2})");
  edit_header(dir, [](std::string& h) { h.replace(h.find(R"("query")"), 7, R"("qu\u0000\nery")"); });
  expect_one_error_line(run_fia({"run", dir + "/case", "--out", dir + "/out"}),
                        "error: inputs.safetensors: unknown tensor name 'qu\\x00\\x0aery' (expected a torch_npu "
                        "input name, or key.N / value.N)");
  fs::remove_all(dir);
}

TEST(FiaRunErrors, NonFiniteScaleNamesTheKey) {
  const std::string dir = valid_case("nonfinite");
  write_text(dir + "/case/params.json", R"({"num_heads": 2, "scale": 1e400})");
  expect_one_error_line(run_fia({"run", dir + "/case", "--out", dir + "/out"}),
                        "error: scale: 1e400 is not a finite number");
  write_text(dir + "/case/params.json", R"({"num_heads": 2, "scale": NaN})");
  expect_one_error_line(run_fia({"run", dir + "/case", "--out", dir + "/out"}),
                        "error: scale: not valid JSON at line 1, column 27: JSON has no NaN or Infinity");
  fs::remove_all(dir);
}

TEST(FiaRunErrors, HeaderPaddedWithOtherBytesThanSpacesIsRejected) {
  const std::string dir = valid_case("padding");
  edit_header(dir, [](std::string& h) {
    h = h.substr(0, h.find_last_not_of(' ') + 1);
    h += std::string("\0\xff", 2);
  });
  const CliResult r = run_fia({"run", dir + "/case", "--out", dir + "/out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("error: inputs.safetensors: the header holds a NUL byte at file offset ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("; only spaces (0x20) may pad it\n"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fia::test
