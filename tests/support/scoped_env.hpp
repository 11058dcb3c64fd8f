// An environment variable set for a scope and given back its old value (or unset) at its end.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace fia::test {

/// Holds environment variable `name` for the scope: set(value) / unset() change it, the
/// destructor restores what it held at construction. Not thread-safe (setenv).
class ScopedEnv {
 public:
  explicit ScopedEnv(std::string name) : name_(std::move(name)) {
    if (const char* v = std::getenv(name_.c_str())) before_ = v;
  }
  ~ScopedEnv() {
    if (before_) setenv(name_.c_str(), before_->c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const std::string& value) const { setenv(name_.c_str(), value.c_str(), 1); }
  void unset() const { unsetenv(name_.c_str()); }

 private:
  std::string name_;
  std::optional<std::string> before_;
};

}  // namespace fia::test
