#include "cpu/threads.hpp"

#ifdef __linux__
#include <sched.h>
#endif

#include <cstdlib>
#include <string>
#include <thread>

namespace fia::detail {

namespace {
int from_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);  // OMP_NUM_THREADS may be a list: take the first
  return end != v && n > 0 && n <= 1024 ? static_cast<int>(n) : 0;
}
}  // namespace

int default_threads() {
  if (int n = from_env("FIA_NUM_THREADS")) return n;
  if (int n = from_env("OMP_NUM_THREADS")) return n;
#ifdef __linux__
  // The CPUs this process may run on (taskset, cgroups' cpusets), not all the machine's.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  // Elsewhere (macOS has no affinity masks) every hardware thread.
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace fia::detail
