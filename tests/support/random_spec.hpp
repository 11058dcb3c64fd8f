// Random valid calls over the whole feature space of the core and KV-storage issues.
#pragma once

#include <cstdint>

#include "support/call_builder.hpp"

namespace fia::test {

/// Which storage modes random_spec may pick.
struct SpecAxes {
  bool storage_modes = true;  ///< paged, tensor list, shared prefix, left padding
  std::int64_t max_q_seq = 40;
  std::int64_t max_kv_seq = 150;
};

/// A random valid call (default mode): layouts x dtypes x GQA ratios x Q_S 1 and > 1 x masks x
/// sparse modes x lengths (including 0 and fully masked rows) x sink x pse x LSE x rope x storage.
CallSpec random_spec(std::uint64_t seed, const SpecAxes& axes = {});

}  // namespace fia::test
