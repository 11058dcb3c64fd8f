#include "cpu/isa.hpp"

#include <hwy/targets.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace fia::detail {

namespace {

/// The Highway target bit of a compiled target named `name`, or 0.
std::int64_t target_of(const std::string& name) {
  for (std::int64_t bits = HWY_TARGETS; bits != 0; bits &= bits - 1) {
    const std::int64_t t = bits & ~(bits - 1);
    if (name == hwy::TargetName(t)) return t;
  }
  return 0;
}

}  // namespace

bool apply_isa_cap_from_env() {
  static std::once_flag once;
  static bool ok = true;
  std::call_once(once, [] {
    const char* env = std::getenv("FIA_ISA");
    if (env == nullptr || *env == '\0') return;
    const std::int64_t cap = target_of(env);
    if (cap == 0) {
      ok = false;
      return;
    }
    // Lower bits are better targets: disable every target better than the cap.
    hwy::DisableTargets(cap - 1);
  });
  return ok;
}

std::vector<std::string> available_isas() {
  // Computed once, before any force_isa() narrows what Highway reports as supported.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (std::int64_t t : hwy::SupportedAndGeneratedTargets()) v.emplace_back(hwy::TargetName(t));
    return v;
  }();
  return names;
}

bool force_isa(const std::string& name) {
  if (name.empty()) {
    hwy::SetSupportedTargetsForTest(0);
    return true;
  }
  const auto isas = available_isas();
  if (std::find(isas.begin(), isas.end(), name) == isas.end()) return false;
  hwy::SetSupportedTargetsForTest(target_of(name));
  return true;
}

}  // namespace fia::detail
