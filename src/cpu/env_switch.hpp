// A yes/no setting of the cpu kernels read from an environment variable (FIA_BF16_DOTS, FIA_AMX):
// unset or empty keeps the default, 0 turns it off, 1 on, any other value is an error that plan()
// reports; tests and benchmarks may set it and reset it.
#pragma once

#include <atomic>
#include <cstdlib>
#include <string>

namespace fia::detail {

class EnvSwitch {
 public:
  explicit EnvSwitch(const char* variable) : variable_(variable), setting_(from_env(variable)) {}

  /// The setting: `by_default` unless the environment or set() chose.
  bool on(bool by_default) const {
    const int s = setting_.load(std::memory_order_relaxed);
    return s < 0 ? by_default : s == 1;
  }
  /// False when the variable, as last read (at start-up or by reset()), is neither unset, empty,
  /// 0 nor 1.
  bool valid() const { return setting_.load(std::memory_order_relaxed) != kInvalid; }
  /// Overrides the default and the environment.
  void set(bool on) { setting_.store(on ? 1 : 0); }
  /// Reads the environment variable again.
  void reset() { setting_.store(from_env(variable_)); }

 private:
  static constexpr int kDefault = -1, kInvalid = -2;
  static int from_env(const char* variable) {
    const char* env = std::getenv(variable);
    if (env == nullptr || *env == '\0') return kDefault;
    const std::string v(env);
    return v == "0" ? 0 : v == "1" ? 1 : kInvalid;
  }
  const char* variable_;
  std::atomic<int> setting_;
};

}  // namespace fia::detail
