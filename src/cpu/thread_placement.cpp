#include "cpu/thread_placement.hpp"

#include <hwy/cache_control.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

#ifdef __linux__
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace fia::detail {

namespace {

/// Every ArenaThreads alive, so that a worker thread that ends is forgotten by all of them before
/// its id can name another thread. Never destroyed: threads may end after static destruction.
struct Registry {
  std::mutex mu;
  std::vector<ArenaThreads*> all;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

/// On a oneTBB worker thread, its id once it has entered an observed arena.
struct WorkerMark {
  int tid = 0;
  ~WorkerMark() {
    if (tid != 0) ArenaThreads::forget(tid);
  }
};
thread_local WorkerMark t_worker;
thread_local char t_here = 0;  // its address tells the threads apart without a system call

}  // namespace

#ifdef __linux__
int current_cpu() { return sched_getcpu(); }

int current_thread_id() { return static_cast<int>(syscall(SYS_gettid)); }

int runnable_thread_cpu(int tid) {
  if (tid <= 0) return -1;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  std::FILE* f = std::fopen(path, "r");  // only this process's threads are listed there
  if (f == nullptr) return -1;
  char line[1024];
  const bool read = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  if (!read) return -1;
  // "tid (name) state ..." with the name possibly holding spaces and parentheses: fields from the
  // last ')'. The state is field 3, the CPU field 39.
  const char* rest = nullptr;
  for (const char* c = line; *c != '\0'; ++c)
    if (*c == ')') rest = c;
  if (rest == nullptr) return -1;
  char state = 0;
  int cpu = -1;
  int field = 2;
  for (const char* c = rest + 1; *c != '\0' && field < 39; ++c) {
    if (*c != ' ') continue;
    ++field;
    if (field == 3) state = c[1];
    if (field == 39) std::sscanf(c + 1, "%d", &cpu);
  }
  return state == 'R' ? cpu : -1;
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
  // A superset of `rest`: refused only if the thread ended or a cpuset shrank meanwhile.
  return sched_setaffinity(tid, sizeof allowed, &allowed) == 0;
}
#else
int current_cpu() { return -1; }
int current_thread_id() { return 0; }
int runnable_thread_cpu(int) { return -1; }
bool move_thread_off(int, const int*, int) { return false; }
#endif

const PlacementCalls& system_placement_calls() {
  static const PlacementCalls calls{current_cpu, runnable_thread_cpu, move_thread_off};
  return calls;
}

ArenaThreads::ArenaThreads(tbb::task_arena& arena)
    : tbb::task_scheduler_observer(arena),
      slots_(arena.max_concurrency()),
      tids_(new std::atomic<int>[static_cast<unsigned>(slots_)]) {
  for (int i = 0; i < slots_; ++i) tids_[i].store(0, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().all.push_back(this);
  }
  observe(true);
}

ArenaThreads::~ArenaThreads() {
  observe(false);
  std::lock_guard<std::mutex> lock(registry().mu);
  auto& all = registry().all;
  all.erase(std::remove(all.begin(), all.end(), this), all.end());
}

void ArenaThreads::forget(int tid) {
  std::lock_guard<std::mutex> lock(registry().mu);
  for (ArenaThreads* a : registry().all)
    for (int i = 0; i < a->slots_; ++i) {
      int expected = tid;
      a->tids_[i].compare_exchange_strong(expected, 0, std::memory_order_relaxed);
    }
}

void ArenaThreads::record_worker(int slot, int tid) {
  if (slot >= 1 && slot < slots_) tids_[slot].store(tid, std::memory_order_relaxed);
}

int ArenaThreads::next_worker() {
  for (int tries = 1; tries < slots_; ++tries) {
    const unsigned n = turn_.fetch_add(1, std::memory_order_relaxed);
    const int tid = tids_[1 + n % static_cast<unsigned>(slots_ - 1)].load(std::memory_order_relaxed);
    if (tid != 0) return tid;
  }
  return 0;
}

bool ArenaThreads::on_worker_thread() { return t_worker.tid != 0; }

void ArenaThreads::on_scheduler_entry(bool is_worker) {
  if (!is_worker) return;
  if (t_worker.tid == 0) t_worker.tid = current_thread_id();
  record_worker(tbb::this_task_arena::current_thread_index(), t_worker.tid);
}

LoopPlacement::LoopPlacement(ArenaThreads& threads, std::int64_t tasks, const PlacementCalls& calls,
                             std::chrono::nanoseconds worker_grace)
    : threads_(threads),
      calls_(calls),
      owner_(&t_here),
      cpus_(new std::atomic<int>[static_cast<unsigned>(threads.slots())]),
      owner_cpu_(calls.current_cpu()),
      several_(tasks > 1),
      worker_grace_(worker_grace) {
  for (int i = 0; i < threads.slots(); ++i) cpus_[i].store(-1, std::memory_order_relaxed);
}

void LoopPlacement::task_started(int slot) {
  const int n = threads_.slots();
  if (slot < 0 || slot >= n || no_room_.load(std::memory_order_relaxed)) return;
  const int cpu = calls_.current_cpu();
  if (cpu < 0) return;
  cpus_[slot].store(cpu, std::memory_order_relaxed);
  if (&t_here == owner_) {
    owner_cpu_.store(cpu, std::memory_order_relaxed);
    if (several_ && ++owner_tasks_ <= 2 &&
        !worker_starts(owner_tasks_ == 1 ? worker_grace_ : std::chrono::nanoseconds{})) {
      const int worker = threads_.next_worker();
      if (worker != 0 && worker != t_worker.tid && calls_.runnable_thread_cpu(worker) == cpu)
        calls_.move_thread_off(worker, &cpu, 1);
    }
    return;
  }
  if (!ArenaThreads::on_worker_thread()) return;
  if (!worker_started_.load(std::memory_order_relaxed)) worker_started_.store(true, std::memory_order_relaxed);
  bool shared = owner_cpu_.load(std::memory_order_relaxed) == cpu;
  for (int s = 0; s < slot && !shared; ++s) shared = cpus_[s].load(std::memory_order_relaxed) == cpu;
  if (!shared) return;
  std::vector<int> others(static_cast<std::size_t>(n) + 1);
  for (int s = 0; s < n; ++s) others[static_cast<std::size_t>(s)] = s == slot ? -1 : cpus_[s].load(std::memory_order_relaxed);
  others[static_cast<std::size_t>(n)] = owner_cpu_.load(std::memory_order_relaxed);
  if (calls_.move_thread_off(0, others.data(), n + 1)) {
    cpus_[slot].store(calls_.current_cpu(), std::memory_order_relaxed);
  } else {
    no_room_.store(true, std::memory_order_relaxed);
  }
}

bool LoopPlacement::worker_starts(std::chrono::nanoseconds grace) const {
  const auto until = std::chrono::steady_clock::now() + grace;
  while (!worker_started_.load(std::memory_order_relaxed)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    hwy::Pause();  // x86: leaves the core's issue slots to an SMT sibling
  }
  return true;
}

}  // namespace fia::detail
