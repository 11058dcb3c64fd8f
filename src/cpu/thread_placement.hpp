// Keeping the threads of one parallel loop on different CPUs (Linux; elsewhere nothing happens).
//
// Linux wakes a sleeping worker on the CPU of the thread that woke it when it judges the other
// CPUs busy, and an idle virtual CPU can count as busy to it. The worker then waits behind the
// calling thread, which is computing, until the load balancer moves it, milliseconds later: a
// whole decode call can run on one CPU while the other idles (Zen 4 VM, 2 threads: the worker
// took no task in 20-50 of 90 back-to-back D1-like calls with a 5 ms pause every third). Moving a
// thread off a CPU is a change of its affinity mask that excludes the CPU, and the mask is put
// back at once, so no thread stays pinned; the calling thread itself is never moved.
#pragma once

#include <atomic>
#include <memory>

namespace fia::detail {

/// The CPU the calling thread runs on, or -1 where the system does not say.
int current_cpu();

/// The kernel's id of the calling thread, or 0 where the system has none.
int current_thread_id();

/// Moves thread `tid` (0: the calling thread) onto one of the CPUs its affinity mask allows
/// other than the `count` CPUs in `avoid` (entries < 0 are ignored), and restores the mask. One
/// move runs at a time in the process (two at once could restore each other's narrowed mask).
/// Returns false, changing nothing, where the mask allows no other CPU, another move is under
/// way, or the system refuses.
bool move_thread_off(int tid, const int* avoid, int count);

/// The threads that last ran each slot of a oneTBB arena (slot 0: the calling thread, 1 and up:
/// workers), kept across calls so that a loop whose workers are late can move them.
class ArenaThreads {
 public:
  explicit ArenaThreads(int slots);
  int slots() const { return slots_; }
  /// Records the calling thread as the one running `slot`.
  void record(int slot);
  /// The next worker slot's thread (slots 1 .. slots - 1 in turn), 0 if none ran yet.
  int next_worker();

 private:
  int slots_;
  std::unique_ptr<std::atomic<int>[]> tids_;
  std::atomic<unsigned> turn_{0};
};

/// The placement rules of one parallel loop, applied as each task starts:
/// * a worker that finds itself on the CPU of a thread of the loop with a lower slot (the calling
///   thread's first) moves itself off every CPU the loop's other threads were seen on;
/// * when the calling thread starts its second task and no worker has started one yet, it moves
///   one worker thread (in turn) off its own CPU: a worker queued behind it cannot run to move
///   itself.
class LoopPlacement {
 public:
  explicit LoopPlacement(ArenaThreads& threads);
  /// Called by the thread running `slot` (tbb::this_task_arena::current_thread_index()) at the
  /// start of each of its tasks.
  void task_started(int slot);

 private:
  ArenaThreads& threads_;
  std::unique_ptr<std::atomic<int>[]> cpus_;  // per slot, the CPU its last task started on
  std::atomic<bool> worker_started_{false};
  int caller_tasks_ = 0;  // touched by slot 0 only
};

}  // namespace fia::detail
