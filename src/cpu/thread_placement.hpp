// Keeping the threads of one parallel loop on different CPUs (Linux; elsewhere nothing happens).
//
// Linux wakes a sleeping worker on the CPU of the thread that woke it when it judges the other
// CPUs busy, and an idle virtual CPU can count as busy to it. The worker then waits behind the
// calling thread, which is computing, until the load balancer moves it, milliseconds later: a
// whole decode call can run on one CPU while the other idles (Zen 4 VM, 2 threads: the worker
// took no task in up to 76 of 90 D1-like calls with a 5 ms pause after every third). Moving a
// thread off a CPU is a change of its affinity mask that excludes the CPU, and the mask is put
// back at once, so no thread stays pinned. Only oneTBB's worker threads are ever moved: never a
// thread that called the library, and never the thread that runs the loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include <tbb/task_arena.h>
#include <tbb/task_scheduler_observer.h>

namespace fia::detail {

/// The CPU the calling thread runs on, or -1 where the system does not say.
int current_cpu();

/// The kernel's id of the calling thread, or 0 where the system has none.
int current_thread_id();

/// The CPU that thread `tid` of this process runs or waits to run on when it is runnable; -1 when
/// it sleeps, is no thread of this process, or the system does not say.
int runnable_thread_cpu(int tid);

/// Moves thread `tid` (0: the calling thread) onto one of the CPUs its affinity mask allows
/// other than the `count` CPUs in `avoid` (entries < 0 are ignored), and restores the mask. One
/// move runs at a time in the process (two at once could restore each other's narrowed mask). A
/// change another thread makes to `tid`'s mask within the move's microseconds is lost. Returns
/// false, changing nothing, where the mask allows no other CPU, another move is under way, or the
/// system refuses.
bool move_thread_off(int tid, const int* avoid, int count);

/// The system calls LoopPlacement makes (tests replace them).
struct PlacementCalls {
  int (*current_cpu)();
  int (*runnable_thread_cpu)(int tid);
  bool (*move_thread_off)(int tid, const int* avoid, int count);
};

/// current_cpu, runnable_thread_cpu and move_thread_off above.
const PlacementCalls& system_placement_calls();

/// The oneTBB worker threads that entered an arena, by slot (slot 0 is reserved for the threads
/// that call into the arena), kept across calls so that a loop whose workers are late can move
/// one; and, for each thread, whether it is a oneTBB worker.
class ArenaThreads : public tbb::task_scheduler_observer {
 public:
  /// Observes `arena` (its max_concurrency() slots) from now until destruction.
  explicit ArenaThreads(tbb::task_arena& arena);
  ~ArenaThreads() override;
  int slots() const { return slots_; }
  /// Records thread `tid` as the oneTBB worker in `slot` (the observer does this on entry).
  void record_worker(int slot, int tid);
  /// The next recorded worker (slots 1 .. slots - 1 in turn, empty ones skipped), 0 if none.
  int next_worker();
  /// True on a thread that has entered an observed arena as a oneTBB worker.
  static bool on_worker_thread();
  /// Forgets thread `tid` in every ArenaThreads (a worker thread does this as it ends).
  static void forget(int tid);
  void on_scheduler_entry(bool is_worker) override;

 private:
  int slots_;
  std::unique_ptr<std::atomic<int>[]> tids_;
  std::atomic<unsigned> turn_{0};
};

/// The placement rules of one parallel loop, applied as each task starts. The thread that
/// constructs it runs the loop (its owner); then
/// * a oneTBB worker on the owner's CPU (the CPU the owner set the loop up on until the owner
///   starts a task, then the one its latest task started on), or on the CPU of a thread of the
///   loop in a lower slot, moves itself off every CPU the loop's other threads were seen on: a
///   worker woken onto the owner's CPU may run there before the owner starts its first task;
/// * in a loop of more than one task, when the owner starts its first or second task and no
///   worker has started one yet, it moves the next recorded worker off its own CPU if that worker
///   waits there to run: a worker queued behind the owner cannot run to move itself. By its first
///   task the loop has asked for its workers to be woken (its other tasks are spawned before the
///   first runs), so one queued there is found a task earlier; at the second, the next recorded
///   worker in turn (with one worker, the same one), which may not have been queued at the first.
///   At its first task the owner waits up to `worker_grace` for a worker to start before it looks:
///   workers still spinning from the call before start within a microsecond or two, and the
///   owner's first task_started, the look included (its /proc read about 4 us in a loop of reads),
///   had taken 17-35 us of back-to-back D1 calls while the worker ran (Emerald Rapids VM, 2
///   threads, cold KV: D1 0.97-0.99x the time with the wait).
/// Other threads (another caller's, sharing the arena) are left where they are.
class LoopPlacement {
 public:
  /// How long the owner's first task waits for a worker to start before it looks for one.
  static constexpr std::chrono::microseconds kWorkerGrace{5};
  /// For a loop of `tasks` tasks, run by the calling thread.
  LoopPlacement(ArenaThreads& threads, std::int64_t tasks, const PlacementCalls& calls = system_placement_calls(),
                std::chrono::nanoseconds worker_grace = kWorkerGrace);
  /// Called by the thread running `slot` (tbb::this_task_arena::current_thread_index()) at the
  /// start of each of its tasks.
  void task_started(int slot);

 private:
  ArenaThreads& threads_;
  const PlacementCalls& calls_;
  const char* const owner_;  // a thread_local's address on the owner
  std::unique_ptr<std::atomic<int>[]> cpus_;  // per slot, the CPU its last task started on
  std::atomic<int> owner_cpu_;  // where the owner set the loop up, then where its latest task started
  const bool several_;          // more than one task: a worker may be woken (the owner looks for it)
  const std::chrono::nanoseconds worker_grace_;
  std::atomic<bool> worker_started_{false};
  std::atomic<bool> no_room_{false};  // a worker's move found no other CPU: no more tries
  int owner_tasks_ = 0;                // touched by the owner only

  /// True once a worker has started a task, waiting up to `grace` for one (0: a look at the flag).
  bool worker_starts(std::chrono::nanoseconds grace) const;
};

}  // namespace fia::detail
