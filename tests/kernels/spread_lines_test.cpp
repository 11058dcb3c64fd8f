// SpreadLines (cpu/item_common.hpp), the prefetches a decode product step (Q·Kᵀ over a group of
// tokens, an AVX2 P·V pass) spreads over its loop: it
// covers exactly the cache lines a byte range touches, however the range is aligned, and hands
// them out over the loop's steps, a share per step, none twice and none left once the steps are
// taken (rest() taking what fewer steps left).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "cpu/item_common.hpp"

namespace fia::detail {
namespace {

/// The 64-byte lines that bytes [row, row + bytes) touch, counted byte by byte.
std::set<std::uintptr_t> lines_touched(const char* row, std::int64_t bytes) {
  std::set<std::uintptr_t> lines;
  for (std::int64_t b = 0; b < bytes; ++b) lines.insert(reinterpret_cast<std::uintptr_t>(row + b) / 64);
  return lines;
}

/// The lines handed out by `steps` calls of step() after over(steps), then rest(), in order;
/// per_step_taken[i] = the lines step i handed out.
std::vector<std::uintptr_t> hand_out(SpreadLines s, std::int64_t steps, std::int64_t taken_steps,
                                     std::vector<std::int64_t>* per_step_taken) {
  std::vector<std::uintptr_t> lines;
  s.over(steps);
  for (std::int64_t i = 0; i < taken_steps; ++i) {
    const char* before = s.next;
    const std::int64_t left = s.left;
    s.step();
    per_step_taken->push_back(left - s.left);
    for (const char* a = before; a < s.next; a += 64) lines.push_back(reinterpret_cast<std::uintptr_t>(a) / 64);
  }
  const char* before = s.next;
  s.rest();
  EXPECT_EQ(s.left, 0);
  for (const char* a = before; a < s.next; a += 64) lines.push_back(reinterpret_cast<std::uintptr_t>(a) / 64);
  return lines;
}

TEST(SpreadLines, CoversTheLinesARangeTouchesAtEveryAlignment) {
  alignas(64) static char buffer[64 * 40];
  for (std::int64_t offset = 0; offset < 128; ++offset) {
    for (const std::int64_t bytes : {1, 2, 63, 64, 65, 127, 128, 256, 768, 1024, 1000}) {
      const char* row = buffer + offset;
      const SpreadLines s = SpreadLines::of(row, bytes);
      const std::set<std::uintptr_t> want = lines_touched(row, bytes);
      ASSERT_EQ(s.left, static_cast<std::int64_t>(want.size())) << "offset " << offset << ", bytes " << bytes;
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.next) % 64, 0u);
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.next) / 64, *want.begin());
    }
  }
}

TEST(SpreadLines, NothingForAnEmptyRange) {
  alignas(64) static char buffer[64];
  EXPECT_EQ(SpreadLines::of(buffer + 3, 0).left, 0);
  EXPECT_EQ(SpreadLines::of(buffer + 3, -5).left, 0);
  SpreadLines none;
  none.over(8);
  none.step();
  none.rest();
  EXPECT_EQ(none.left, 0);
}

/// Checks that `steps` steps hand out the lines of [row, row + bytes) once each, a share a step.
void expect_shares(const char* row, std::int64_t bytes, std::int64_t steps) {
  const std::set<std::uintptr_t> want = lines_touched(row, bytes);
  const auto lines = static_cast<std::int64_t>(want.size());
  std::vector<std::int64_t> taken;
  const std::vector<std::uintptr_t> got = hand_out(SpreadLines::of(row, bytes), steps, steps, &taken);
  ASSERT_EQ(got, std::vector<std::uintptr_t>(want.begin(), want.end())) << bytes << " bytes, " << steps << " steps";
  // Every step takes its share (the same for all, the last ones fewer where the lines run out),
  // so that no step is left with the burst; the steps take them all, rest() none.
  const std::int64_t share = steps > 0 ? (lines + steps - 1) / steps : lines;
  std::int64_t left = lines;
  for (const std::int64_t t : taken) {
    EXPECT_EQ(t, std::min(share, left)) << bytes << " bytes, " << steps << " steps";
    left -= t;
  }
  if (steps > 0) {
    EXPECT_EQ(left, 0) << bytes << " bytes, " << steps << " steps";
  }
}

TEST(SpreadLines, HandsEachLineOutOnceAShareAStep) {
  alignas(64) static char buffer[64 * 40];
  for (const std::int64_t offset : {0, 16, 63})
    for (const std::int64_t bytes : {1, 100, 256, 768, 1024, 1040})
      for (const std::int64_t steps : {0, 1, 2, 3, 8, 16, 64}) expect_shares(buffer + offset, bytes, steps);
}

TEST(SpreadLines, RestTakesWhatFewerStepsLeft) {
  alignas(64) static char buffer[64 * 40];
  const char* row = buffer + 40;
  const std::set<std::uintptr_t> want = lines_touched(row, 1024);
  std::vector<std::int64_t> taken;
  const std::vector<std::uintptr_t> got = hand_out(SpreadLines::of(row, 1024), 8, 3, &taken);
  EXPECT_EQ(got, std::vector<std::uintptr_t>(want.begin(), want.end()));
  EXPECT_EQ(taken, (std::vector<std::int64_t>{3, 3, 3}));  // 17 lines over 8 steps: 3 a step, 8 left
}

}  // namespace
}  // namespace fia::detail
