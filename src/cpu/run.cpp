#include "cpu/run.hpp"

#include <algorithm>
#include <cstdint>

#include <omp.h>

namespace fia::detail {

void cpu_run(const Problem& p, const CpuPlan& plan, const OutputRows& dst, void* workspace, int threads) {
  if (plan.items.empty()) return;
  auto* base = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(workspace) + 63) & ~std::uintptr_t{63});
  const int workers = std::clamp(threads, 1, plan.threads);
  const auto count = static_cast<std::int64_t>(plan.items.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(workers)
  for (std::int64_t w = 0; w < count; ++w) {
    float* scratch = base + static_cast<std::size_t>(omp_get_thread_num()) * plan.floats_per_thread;
    compute_item(p, plan.tile, plan.items[w], dst, scratch);
  }
}

}  // namespace fia::detail
