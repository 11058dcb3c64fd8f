// Threads of one parallel loop moved off each other's CPUs (cpu/thread_placement.hpp): the rules
// with the system calls replaced (which thread moves whom, and when), then the system calls
// themselves on Linux (the moves happen, land on another allowed CPU and keep every mask).
#include <gtest/gtest.h>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/thread_placement.hpp"

#ifdef __linux__
#include <sched.h>
#endif

namespace fia::detail {
namespace {

/// Replacement system calls: every thread is on kCpu, the threads in `queued` wait to run there,
/// and each move is recorded with the thread that made it.
constexpr int kCpu = 3;
struct Move {
  std::thread::id by;
  int tid;
  std::vector<int> avoid;
};
std::mutex g_mu;
std::vector<Move> g_moves;
std::vector<int> g_queued;
bool g_move_result = true;

int fake_cpu() { return kCpu; }
int fake_runnable_cpu(int tid) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (int q : g_queued)
    if (q == tid) return kCpu;
  return -1;
}
bool fake_move(int tid, const int* avoid, int count) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_moves.push_back({std::this_thread::get_id(), tid, std::vector<int>(avoid, avoid + count)});
  return g_move_result;
}
const PlacementCalls kFake{fake_cpu, fake_runnable_cpu, fake_move};
constexpr std::int64_t kTasks = 8;

class LoopPlacementRules : public ::testing::Test {
 protected:
  void SetUp() override {
    std::lock_guard<std::mutex> lock(g_mu);
    g_moves.clear();
    g_queued.clear();
    g_move_result = true;
  }
  std::vector<Move> moves() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_moves;
  }
  tbb::task_arena arena{2};
  ArenaThreads threads{arena};
};

/// Runs fn on a thread that is (to the rules) a oneTBB worker.
void as_worker(ArenaThreads& threads, const std::function<void()>& fn) {
  std::thread([&] {
    threads.on_scheduler_entry(true);
    fn();
  }).join();
}

TEST_F(LoopPlacementRules, TheOwnerMovesAWorkerQueuedOnItsCpuAtItsFirstTask) {
  threads.record_worker(1, 4242);
  g_queued = {4242};
  LoopPlacement loop(threads, kTasks, kFake);
  EXPECT_TRUE(moves().empty());  // nothing before a task starts
  loop.task_started(0);
  const std::vector<Move> made = moves();
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].tid, 4242);
  EXPECT_EQ(made[0].avoid, std::vector<int>{kCpu});
}

TEST_F(LoopPlacementRules, TheOwnerLooksAgainAtItsSecondTaskAndNoLater) {
  threads.record_worker(1, 4242);
  LoopPlacement loop(threads, kTasks, kFake);
  loop.task_started(0);  // the worker not yet queued on the owner's CPU
  EXPECT_TRUE(moves().empty());
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_queued = {4242};
  }
  loop.task_started(0);
  const std::vector<Move> made = moves();
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].tid, 4242);
  EXPECT_EQ(made[0].avoid, std::vector<int>{kCpu});
  loop.task_started(0);
  EXPECT_EQ(moves().size(), 1u);
}

// Workers still spinning from the call before start within microseconds: the owner's first task
// waits for one (up to the grace) instead of reading the queued worker's state.
TEST_F(LoopPlacementRules, TheOwnersFirstTaskWaitsForAWorkerToStartBeforeItLooks) {
  threads.record_worker(1, 4242);
  g_queued = {4242};  // were the owner to look, it would move 4242
  LoopPlacement loop(threads, kTasks, kFake, std::chrono::minutes(1));
  constexpr auto kLate = std::chrono::milliseconds(20);
  const auto t0 = std::chrono::steady_clock::now();
  std::thread worker([&] {
    std::this_thread::sleep_for(kLate);
    threads.on_scheduler_entry(true);
    loop.task_started(1);
  });
  loop.task_started(0);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, kLate) << "the owner returned before the worker started";
  worker.join();
  for (const Move& m : moves()) EXPECT_NE(m.tid, 4242) << "the owner looked though a worker started";
}

TEST_F(LoopPlacementRules, WithNoWorkerStartingTheOwnerLooksAfterTheGrace) {
  threads.record_worker(1, 4242);
  g_queued = {4242};
  constexpr auto kGrace = std::chrono::milliseconds(30);
  LoopPlacement loop(threads, kTasks, kFake, kGrace);
  const auto t0 = std::chrono::steady_clock::now();
  loop.task_started(0);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, kGrace);
  const std::vector<Move> made = moves();
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].tid, 4242);
}

// A loop of one task spawns none and wakes no worker: nothing to look for.
TEST_F(LoopPlacementRules, TheOwnerOfALoopOfOneTaskDoesNotLook) {
  threads.record_worker(1, 4242);
  g_queued = {4242};
  LoopPlacement loop(threads, 1, kFake);
  loop.task_started(0);
  EXPECT_TRUE(moves().empty());
}

TEST_F(LoopPlacementRules, AnOwnerThatIsAWorkerNeverMovesItself) {
  as_worker(threads, [&] {
    const int me = current_thread_id();
    threads.record_worker(1, me);
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_queued = {me};
    }
    LoopPlacement loop(threads, kTasks, kFake);
    loop.task_started(1);
    loop.task_started(1);
  });
  EXPECT_TRUE(moves().empty());
}

TEST_F(LoopPlacementRules, TheOwnerLeavesWorkersThatWaitElsewhereOrStarted) {
  threads.record_worker(1, 4242);
  {
    LoopPlacement loop(threads, kTasks, kFake);  // not queued on the owner's CPU
    loop.task_started(0);
    loop.task_started(0);
  }
  g_queued = {4242};
  {
    LoopPlacement loop(threads, kTasks, kFake);  // a worker has started a task already
    as_worker(threads, [&] { loop.task_started(1); });
    const auto before = moves().size();
    loop.task_started(0);
    loop.task_started(0);
    EXPECT_EQ(moves().size(), before);
  }
  {
    ArenaThreads none(arena);  // no worker recorded
    LoopPlacement loop(none, kTasks, kFake);
    const auto before = moves().size();
    loop.task_started(0);
    loop.task_started(0);
    EXPECT_EQ(moves().size(), before);
  }
  for (const Move& m : moves()) EXPECT_NE(m.by, std::this_thread::get_id()) << "the owner moved something";
}

TEST_F(LoopPlacementRules, AWorkerThatEndsIsForgotten) {
  int tid = 0;
  as_worker(threads, [&] {
    tid = current_thread_id();
    threads.record_worker(1, tid);
    EXPECT_EQ(threads.next_worker(), tid);
  });
  EXPECT_EQ(threads.next_worker(), 0) << "thread " << tid << " ended, its id may name another";
}

/// Starts a task of `loop` in slot 1 on a worker thread and expects that worker to have moved
/// itself, once, off the owner's CPU (kCpu) among others.
void expect_worker_moves_off_owner(ArenaThreads& threads, LoopPlacement& loop, const std::vector<Move>& before) {
  std::thread::id worker;
  as_worker(threads, [&] {
    worker = std::this_thread::get_id();
    loop.task_started(1);
  });
  std::lock_guard<std::mutex> lock(g_mu);
  ASSERT_EQ(g_moves.size(), before.size() + 1);
  const Move& made = g_moves.back();
  EXPECT_EQ(made.by, worker);
  EXPECT_EQ(made.tid, 0);  // itself
  bool avoids_owner = false;
  for (int c : made.avoid) avoids_owner |= c == kCpu;
  EXPECT_TRUE(avoids_owner) << ::testing::PrintToString(made.avoid);
}

TEST_F(LoopPlacementRules, AWorkerOnTheOwnersCpuMovesItselfOffTheLoopsCpus) {
  LoopPlacement loop(threads, kTasks, kFake);
  loop.task_started(0);
  expect_worker_moves_off_owner(threads, loop, moves());
}

// Woken onto the owner's CPU, a worker may run there before the owner has started a task: the
// owner's CPU is known from the loop's construction.
TEST_F(LoopPlacementRules, AWorkerThatStartsBeforeTheOwnerMovesOffTheOwnersCpu) {
  LoopPlacement loop(threads, kTasks, kFake);
  expect_worker_moves_off_owner(threads, loop, moves());
}

TEST_F(LoopPlacementRules, OtherThreadsAndTheOwnerNeverMove) {
  LoopPlacement loop(threads, kTasks, kFake);
  loop.task_started(0);
  std::thread([&] { loop.task_started(1); }).join();  // another caller's thread in slot 1
  loop.task_started(0);
  EXPECT_TRUE(moves().empty());
}

TEST_F(LoopPlacementRules, AWorkerThatFindsNoRoomStopsTheLoopsTries) {
  g_move_result = false;
  LoopPlacement loop(threads, kTasks, kFake);
  loop.task_started(0);
  as_worker(threads, [&] {
    loop.task_started(1);
    loop.task_started(1);
  });
  EXPECT_EQ(moves().size(), 1u);
}

// Two threads calling into one arena at once: whatever slots they take, only oneTBB's workers
// move themselves, and the owners move only recorded workers, never a caller, though the callers
// wait to run on the owners' CPU as far as the rules can tell.
TEST_F(LoopPlacementRules, CallersSharingAnArenaAreNeverMoved) {
  if (tbb::this_task_arena::max_concurrency() < 2) GTEST_SKIP() << "one CPU: oneTBB starts no worker";
  tbb::task_arena shared(3);  // two callers and a worker
  ArenaThreads observed(shared);
  std::atomic<int> caller_tids[2] = {0, 0};
  std::vector<std::thread::id> callers(2);
  // Rounds until the worker has taken part (and so moved itself) at least once.
  for (int round = 0; round < 20 && moves().empty(); ++round) {
    std::vector<std::thread> threads_of_callers;
    for (int c = 0; c < 2; ++c)
      threads_of_callers.emplace_back([&, c] {
        callers[static_cast<std::size_t>(c)] = std::this_thread::get_id();
        caller_tids[c] = current_thread_id();
        {
          std::lock_guard<std::mutex> lock(g_mu);
          g_queued.push_back(caller_tids[c]);
        }
        for (int call = 0; call < 10; ++call)
          shared.execute([&] {
            LoopPlacement loop(observed, kTasks, kFake);
            tbb::parallel_for(
                tbb::blocked_range<int>(0, 8, 1),
                [&](const tbb::blocked_range<int>&) {
                  loop.task_started(tbb::this_task_arena::current_thread_index());
                  std::this_thread::sleep_for(std::chrono::microseconds(200));
                },
                tbb::simple_partitioner());
          });
      });
    for (auto& t : threads_of_callers) t.join();
    for (const Move& m : moves()) {
      const bool by_caller = m.by == callers[0] || m.by == callers[1];
      EXPECT_FALSE(m.tid == 0 && by_caller) << "a caller moved itself";
      EXPECT_NE(m.tid, caller_tids[0].load());
      EXPECT_NE(m.tid, caller_tids[1].load());
    }
  }
  EXPECT_FALSE(moves().empty()) << "the worker, on the owners' CPU, never moved";
}

#ifdef __linux__
cpu_set_t mask_of(int tid) {
  cpu_set_t s;
  CPU_ZERO(&s);
  EXPECT_EQ(sched_getaffinity(tid, sizeof s, &s), 0);
  return s;
}

bool same_mask(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b) != 0; }

int allowed_cpus() {
  const cpu_set_t all = mask_of(0);
  return CPU_COUNT(&all);
}

/// Puts the calling thread's affinity mask back when the test ends, however it ends.
struct MaskGuard {
  cpu_set_t saved = mask_of(0);
  ~MaskGuard() { sched_setaffinity(0, sizeof saved, &saved); }
};

/// A thread that runs `first`, then spins (or sleeps, when `sleep`) until told to stop.
struct Spinner {
  std::atomic<int> tid{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
  explicit Spinner(bool sleep = false)
      : thread([this, sleep] {
          tid.store(current_thread_id());
          if (sleep) {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [this] { return stop.load(); });
          }
          while (!stop.load()) {
          }
        }) {
    while (tid.load() == 0) std::this_thread::yield();
  }
  ~Spinner() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop.store(true);
    }
    cv.notify_all();
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
  if (allowed_cpus() < 2) GTEST_SKIP() << "needs two CPUs in the affinity mask";
  const MaskGuard guard;
  // It runs again on the other CPU before the scheduler would move it back, except now and then
  // on a loaded machine (once in a ctest -j2 run): a few tries, each of which must move it.
  bool moved = false;
  for (int attempt = 0; attempt < 5 && !moved; ++attempt) {
    const int cpu = current_cpu();
    ASSERT_TRUE(move_thread_off(0, &cpu, 1));
    moved = current_cpu() != cpu;
    EXPECT_TRUE(same_mask(mask_of(0), guard.saved));
  }
  EXPECT_TRUE(moved);
}

TEST(ThreadPlacement, MovesAnotherThreadOffItsCpuAndKeepsItsMask) {
  if (allowed_cpus() < 2) GTEST_SKIP() << "needs two CPUs in the affinity mask";
  const MaskGuard guard;
  Spinner other;
  const int from = current_cpu();
  // Both on one CPU, this thread pinned there so that the CPU stays busy: an idle one would pull
  // the moved thread back as soon as it could.
  // The load balancer may move it first (to the idle CPU), so the setup is tried a few times.
  pin(0, from);
  bool queued = false;
  for (int attempt = 0; attempt < 20 && !queued; ++attempt) {
    pin(other.tid, from);
    ASSERT_EQ(sched_setaffinity(other.tid, sizeof guard.saved, &guard.saved), 0);
    queued = runnable_thread_cpu(other.tid) == from;
  }
  if (!queued) GTEST_SKIP() << "the load balancer moved the other thread every time";
  EXPECT_TRUE(move_thread_off(other.tid, &from, 1));
  EXPECT_NE(runnable_thread_cpu(other.tid), from);
  EXPECT_TRUE(same_mask(mask_of(other.tid), guard.saved));
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

// On two CPUs a move that reads a mask another move narrowed finds nothing to do, so the race the
// lock prevents needs three.
TEST(ThreadPlacement, ConcurrentMovesLeaveTheMaskWhole) {
  if (allowed_cpus() < 3) GTEST_SKIP() << "needs three CPUs in the affinity mask";
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

TEST(ThreadPlacement, RunnableThreadCpuSaysWhereARunnableThreadOfThisProcessIs) {
  const MaskGuard guard;
  const int cpu = current_cpu();
  {
    Spinner running;
    pin(running.tid, cpu);
    EXPECT_EQ(runnable_thread_cpu(running.tid), cpu);
  }
  {
    Spinner sleeping(true);
    bool asleep = false;  // sleeping once it has reached the wait
    for (int i = 0; i < 1000 && !asleep; ++i) {
      asleep = runnable_thread_cpu(sleeping.tid) == -1;
      if (!asleep) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(asleep);
  }
  int ended = 0;
  std::thread([&] { ended = current_thread_id(); }).join();
  EXPECT_EQ(runnable_thread_cpu(ended), -1);  // no longer a thread of this process
  EXPECT_EQ(runnable_thread_cpu(0), -1);
}
#endif  // __linux__

}  // namespace
}  // namespace fia::detail
