// How many workers the cpu backend uses by default.
#pragma once

namespace fia::detail {

/// FIA_NUM_THREADS, else OMP_NUM_THREADS (what users of CPU kernels usually set), else the
/// number of CPUs this process may run on.
int default_threads();

}  // namespace fia::detail
