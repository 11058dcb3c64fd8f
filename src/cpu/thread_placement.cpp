#include "cpu/thread_placement.hpp"

#include <mutex>

#ifdef __linux__
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace fia::detail {

#ifdef __linux__
int current_cpu() { return sched_getcpu(); }

int current_thread_id() {
  thread_local const int tid = static_cast<int>(syscall(SYS_gettid));
  return tid;
}

bool move_thread_off(int tid, const int* avoid, int count) {
  static std::mutex one_at_a_time;
  std::unique_lock<std::mutex> lock(one_at_a_time, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  cpu_set_t allowed;
  if (sched_getaffinity(tid, sizeof allowed, &allowed) != 0) return false;
  cpu_set_t rest = allowed;
  for (int i = 0; i < count; ++i)
    if (avoid[i] >= 0 && avoid[i] < CPU_SETSIZE) CPU_CLR(avoid[i], &rest);
  if (CPU_COUNT(&rest) == 0 || CPU_EQUAL(&rest, &allowed)) return false;
  if (sched_setaffinity(tid, sizeof rest, &rest) != 0) return false;
  sched_setaffinity(tid, sizeof allowed, &allowed);  // a superset of `rest`: cannot fail
  return true;
}
#else
int current_cpu() { return -1; }
int current_thread_id() { return 0; }
bool move_thread_off(int, const int*, int) { return false; }
#endif

ArenaThreads::ArenaThreads(int slots) : slots_(slots), tids_(new std::atomic<int>[static_cast<unsigned>(slots)]) {
  for (int i = 0; i < slots; ++i) tids_[i].store(0, std::memory_order_relaxed);
}

void ArenaThreads::record(int slot) {
  if (slot < 0 || slot >= slots_) return;
  const int tid = current_thread_id();
  if (tids_[slot].load(std::memory_order_relaxed) != tid) tids_[slot].store(tid, std::memory_order_relaxed);
}

int ArenaThreads::next_worker() {
  if (slots_ < 2) return 0;
  const unsigned n = turn_.fetch_add(1, std::memory_order_relaxed);
  return tids_[1 + n % static_cast<unsigned>(slots_ - 1)].load(std::memory_order_relaxed);
}

LoopPlacement::LoopPlacement(ArenaThreads& threads)
    : threads_(threads), cpus_(new std::atomic<int>[static_cast<unsigned>(threads.slots())]) {
  for (int i = 0; i < threads.slots(); ++i) cpus_[i].store(-1, std::memory_order_relaxed);
}

void LoopPlacement::task_started(int slot) {
  const int n = threads_.slots();
  if (slot < 0 || slot >= n) return;
  const int cpu = current_cpu();
  if (cpu < 0) return;
  cpus_[slot].store(cpu, std::memory_order_relaxed);
  if (slot == 0) {
    if (++caller_tasks_ == 2 && !worker_started_.load(std::memory_order_relaxed)) {
      const int tid = threads_.next_worker();
      if (tid != 0) move_thread_off(tid, &cpu, 1);
    }
    return;
  }
  threads_.record(slot);
  if (!worker_started_.load(std::memory_order_relaxed)) worker_started_.store(true, std::memory_order_relaxed);
  bool shared = false;
  for (int s = 0; s < slot && !shared; ++s) shared = cpus_[s].load(std::memory_order_relaxed) == cpu;
  if (!shared) return;
  std::unique_ptr<int[]> others(new int[static_cast<unsigned>(n)]);
  for (int s = 0; s < n; ++s) others[s] = s == slot ? -1 : cpus_[s].load(std::memory_order_relaxed);
  if (move_thread_off(0, others.get(), n)) cpus_[slot].store(current_cpu(), std::memory_order_relaxed);
}

}  // namespace fia::detail
