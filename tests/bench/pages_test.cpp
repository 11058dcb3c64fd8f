// The bench's tensors and probe buffer lie on the pages asked for (huge by default, as engines put
// their KV caches; small with --pages small), zeroed and aligned, and a case folder's tensors are
// copied there without changing the call. Nothing here is timed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/pages.hpp"
#include "bench/workload.hpp"
#include "fia/io/case_dir.hpp"
#include "support/call_builder.hpp"
#include "support/cli_runner.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

/// The VmFlags line of the mapping of this process holding `p` (Linux), else "".
std::string vm_flags(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(f, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= at && at < hi;
    else if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

/// True when the mapping holding `p` carries VmFlags flag `flag` ("hg": huge pages advised, "nh":
/// advised against).
bool has_flag(const void* p, const std::string& flag) { return vm_flags(p).find(" " + flag) != std::string::npos; }

bool linux_smaps() { return std::filesystem::exists("/proc/self/smaps"); }

TEST(BenchPages, BlocksAreZeroedAlignedAndOnThePagesAskedFor) {
  for (const bench::Pages pages : {bench::Pages::kHuge, bench::Pages::kSmall}) {
    for (const std::size_t bytes : {std::size_t{0}, std::size_t{1000}, 2 * kMiB - 1, 2 * kMiB, 3 * kMiB + 5}) {
      SCOPED_TRACE(std::to_string(bytes) + (pages == bench::Pages::kHuge ? " huge" : " small"));
      bench::PageBlock b(bytes, pages);
      ASSERT_NE(b.data(), nullptr);
      EXPECT_EQ(b.bytes(), bytes);
      const auto at = reinterpret_cast<std::uintptr_t>(b.data());
      EXPECT_EQ(at % 64, 0u);
      const auto* c = static_cast<const unsigned char*>(b.data());
      EXPECT_TRUE(std::all_of(c, c + bytes, [](unsigned char x) { return x == 0; }));
      std::memset(b.data(), 0x5a, bytes);  // all of it is writable
      if (bytes < 2 * kMiB || !linux_smaps()) continue;
      EXPECT_EQ(at % (2 * kMiB), 0u);
      EXPECT_TRUE(has_flag(b.data(), pages == bench::Pages::kHuge ? "hg" : "nh")) << vm_flags(b.data());
    }
  }
}

TEST(BenchPages, HugePageUseCountsTheBlocksAskedForWhileTheyLive) {
  const std::size_t before = bench::huge_page_use().advised;
  {
    bench::PageBlock huge(3 * kMiB, bench::Pages::kHuge);
    bench::PageBlock small(3 * kMiB, bench::Pages::kSmall);
    bench::PageBlock little(1000, bench::Pages::kHuge);
    bench::PageBlock moved(std::move(huge));
    if (linux_smaps()) {
      EXPECT_EQ(bench::huge_page_use().advised, before + 4 * kMiB);  // whole 2 MiB pages, counted once
    } else {
      EXPECT_EQ(bench::huge_page_use().advised, before);
    }
  }
  EXPECT_EQ(bench::huge_page_use().advised, before);
}

TEST(BenchPages, ShapesAndTheirColdCopiesLieOnThePagesAskedFor) {
  if (!linux_smaps()) GTEST_SKIP() << "no /proc/self/smaps";
  for (const bench::Pages pages : {bench::Pages::kHuge, bench::Pages::kSmall}) {
    auto w = bench::load_shapes(FIA_SOURCE_DIR "/bench/shapes.json", {"D1"}, pages);
    ASSERT_EQ(w.size(), 1u);
    ASSERT_TRUE(w[0].error.empty()) << w[0].error;
    bench::add_cold_copies(w[0], 2.5 * w[0].bytes_per_call);
    ASSERT_GE(w[0].copies.size(), 3u);
    for (const auto& c : w[0].copies)
      for (const TensorView* t : {&c->args.key[0], &c->args.value[0]})
        EXPECT_TRUE(has_flag(t->data, pages == bench::Pages::kHuge ? "hg" : "nh")) << vm_flags(t->data);
  }
}

TEST(BenchPages, CaseFolderTensorsAreCopiedOntoThePagesWithoutChangingTheCall) {
  CallSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.kv_seq = 8200;  // K and V past 2 MiB each
  spec.qk_dim = 64;
  spec.lse = true;
  const TestCall call = build_call(spec, 11);
  const std::string dir = temp_dir("bench_pages");
  ASSERT_TRUE(io::save_case(dir + "/case", call.args).ok());
  Outputs want;
  ASSERT_TRUE(run_call(call.args, Backend::kCpu, 2, &want).ok());
  for (const bench::Pages pages : {bench::Pages::kHuge, bench::Pages::kSmall}) {
    const bench::Workload w = bench::load_case_workload(dir + "/case", pages);
    ASSERT_TRUE(w.error.empty()) << w.error;
    ASSERT_EQ(w.copies.size(), 1u);
    const FiaArgs& a = w.copies[0]->args;
    if (linux_smaps()) {
      EXPECT_TRUE(has_flag(a.key[0].data, pages == bench::Pages::kHuge ? "hg" : "nh"));
    }
    Outputs got;
    ASSERT_TRUE(run_call(a, Backend::kCpu, 2, &got).ok());
    EXPECT_EQ(got.attention_out.bytes, want.attention_out.bytes);
    EXPECT_EQ(got.softmax_lse.bytes, want.softmax_lse.bytes);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fia::test
