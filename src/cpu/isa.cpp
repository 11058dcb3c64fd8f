#include "cpu/isa.hpp"

#include "cpu/amx.hpp"
#include "cpu/attention_item.hpp"
#include "cpu/full_quant.hpp"
#include "cpu/env_switch.hpp"
#include "problem/problem.hpp"

#include <hwy/targets.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

EnvSwitch& bf16_dots_switch() {
  static EnvSwitch s("FIA_BF16_DOTS");
  return s;
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
bool cpu_vendor_is(const char (&name)[13]) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return false;
  char vendor[12];
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return std::memcmp(vendor, name, 12) == 0;
}
#endif

}  // namespace

bool bf16_dots_supported() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  static const bool supported = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) == 0) return false;
    return (a & (1u << 5)) != 0;  // CPUID.(EAX=7, ECX=1):EAX bit 5, AVX512_BF16
  }();
  return supported;
#else
  return false;
#endif
}

bool bf16_dots_faster() {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
  static const bool faster = bf16_dots_supported() && cpu_vendor_is("AuthenticAMD");
  return faster;
#else
  return false;
#endif
}

bool bf16_dots_enabled() { return bf16_dots_supported() && bf16_dots_switch().on(bf16_dots_faster()); }

bool bf16_dots_setting_valid() { return bf16_dots_switch().valid(); }

void set_bf16_dots(bool on) { bf16_dots_switch().set(on); }

void reset_bf16_dots() { bf16_dots_switch().reset(); }

void read_kernel_settings(Problem* p) {
  const bool dot_kernels = kernel_isa_has_bf16_dots();
  p->bf16_dots = bf16_dots_enabled() && dot_kernels;
  p->amx = p->full_quant.on ? amx_setting_on() && kernel_isa_takes_int8_tiles() && amx_int8_supported()
                            : bf16_key_rows(*p) && dot_kernels && amx_enabled();
}

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
