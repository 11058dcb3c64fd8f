// Threads of one parallel loop moved off each other's CPUs (cpu/thread_placement.hpp): the moves
// happen, land on another allowed CPU and leave every affinity mask as it was.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu/thread_placement.hpp"

#ifdef __linux__
#include <sched.h>

namespace fia::detail {
namespace {

cpu_set_t mask_of(int tid) {
  cpu_set_t s;
  CPU_ZERO(&s);
  EXPECT_EQ(sched_getaffinity(tid, sizeof s, &s), 0);
  return s;
}

bool same_mask(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b) != 0; }

/// The CPU thread `tid` of this process last ran on, or is queued on (/proc's "processor").
int cpu_of(int tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(f, line);
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 39; ++i) rest >> field;  // fields 3 .. 39; 39 is the processor
  return std::stoi(field);
}

/// Two CPUs this process may run on, or skips the test.
#define REQUIRE_TWO_CPUS()                                                              \
  do {                                                                                  \
    const cpu_set_t all = mask_of(0);                                                   \
    if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "needs two CPUs in the affinity mask";     \
  } while (0)

/// A thread that runs `first`, then spins until told to stop.
struct Spinner {
  std::atomic<int> tid{0};
  std::atomic<bool> stop{false};
  std::thread thread;
  explicit Spinner(std::function<void()> first = [] {})
      : thread([this, first] {
          first();
          tid.store(current_thread_id());
          while (!stop.load()) {
          }
        }) {
    while (tid.load() == 0) std::this_thread::yield();
  }
  ~Spinner() {
    stop.store(true);
    thread.join();
  }
};

/// Pins thread `tid` to `cpu` alone.
void pin(int tid, int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(tid, sizeof one, &one), 0);
}

TEST(ThreadPlacement, MovesTheCallingThreadOffItsCpuAndKeepsItsMask) {
  REQUIRE_TWO_CPUS();
  const cpu_set_t before = mask_of(0);
  const int cpu = current_cpu();
  ASSERT_TRUE(move_thread_off(0, &cpu, 1));
  EXPECT_NE(current_cpu(), cpu);
  EXPECT_TRUE(CPU_ISSET(current_cpu(), &before));
  EXPECT_TRUE(same_mask(mask_of(0), before));
}

TEST(ThreadPlacement, MovesAnotherThreadOffItsCpu) {
  REQUIRE_TWO_CPUS();
  const cpu_set_t all = mask_of(0);
  Spinner other;
  const int from = current_cpu();
  // Both on one CPU, this thread pinned there so that the CPU stays busy: an idle one would pull
  // the moved thread back as soon as it could.
  pin(0, from);
  pin(other.tid, from);
  ASSERT_EQ(sched_setaffinity(other.tid, sizeof all, &all), 0);
  EXPECT_TRUE(move_thread_off(other.tid, &from, 1));
  EXPECT_NE(cpu_of(other.tid), from);
  EXPECT_TRUE(same_mask(mask_of(other.tid), all));
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
}

TEST(ThreadPlacement, RefusesWhereTheMaskAllowsNoOtherCpu) {
  const cpu_set_t before = mask_of(0);
  std::vector<int> avoid{-1};
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &before)) avoid.push_back(c);
  EXPECT_FALSE(move_thread_off(0, avoid.data(), static_cast<int>(avoid.size())));
  EXPECT_TRUE(same_mask(mask_of(0), before));
  const int none = -1;  // nothing to avoid: nothing to do
  EXPECT_FALSE(move_thread_off(0, &none, 1));
  EXPECT_TRUE(same_mask(mask_of(0), before));
}

TEST(ThreadPlacement, ConcurrentMovesLeaveTheMaskWhole) {
  REQUIRE_TWO_CPUS();
  const cpu_set_t all = mask_of(0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) cpus.push_back(c);
  Spinner target;
  std::vector<std::thread> movers;
  for (int t = 0; t < 4; ++t)
    movers.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) move_thread_off(target.tid, &cpus[(t + i) % cpus.size()], 1);
    });
  for (auto& m : movers) m.join();
  EXPECT_TRUE(same_mask(mask_of(target.tid), all));
}

TEST(LoopPlacement, AWorkerOnTheCallersCpuMovesItself) {
  REQUIRE_TWO_CPUS();
  const cpu_set_t before = mask_of(0);
  ArenaThreads threads(2);
  LoopPlacement loop(threads);
  // One thread in both roles: the caller's task records its CPU, the worker's finds it there.
  const int cpu = current_cpu();
  loop.task_started(0);
  loop.task_started(1);
  EXPECT_NE(current_cpu(), cpu);
  EXPECT_TRUE(same_mask(mask_of(0), before));
  EXPECT_EQ(threads.next_worker(), current_thread_id());
}

TEST(LoopPlacement, TheCallerMovesAWorkerQueuedBehindIt) {
  REQUIRE_TWO_CPUS();
  const cpu_set_t all = mask_of(0);
  ArenaThreads threads(2);
  Spinner worker([&] { threads.record(1); });  // slot 1's thread, as after an earlier call
  const int cpu = current_cpu();
  pin(0, cpu);
  // The worker queued on this thread's CPU with every CPU allowed, as Linux leaves a woken
  // worker; the load balancer may move it first, so the setup is tried a few times.
  bool queued = false;
  for (int attempt = 0; attempt < 10 && !queued; ++attempt) {
    pin(worker.tid, cpu);
    ASSERT_EQ(sched_setaffinity(worker.tid, sizeof all, &all), 0);
    queued = cpu_of(worker.tid) == cpu;
  }
  if (queued) {
    LoopPlacement loop(threads);
    loop.task_started(0);
    EXPECT_EQ(cpu_of(worker.tid), cpu) << "moved before the caller's second task";
    loop.task_started(0);
    EXPECT_NE(cpu_of(worker.tid), cpu);
    EXPECT_TRUE(same_mask(mask_of(worker.tid), all));
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  if (!queued) GTEST_SKIP() << "the load balancer moved the worker every time";
}

}  // namespace
}  // namespace fia::detail
#endif  // __linux__
