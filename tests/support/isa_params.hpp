// The instruction sets a kernel test runs on: every one this build compiles and this CPU supports
// and, for AVX-512 where the CPU has bf16 dot products (cpu/bf16_dots-inl.h), the same instruction
// set with them forbidden, and where it has AMX tiles (cpu/amx.hpp), with those, so that every way
// through the bf16 kernels is tested.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cpu/amx.hpp"
#include "cpu/attention_item.hpp"
#include "cpu/isa.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {

/// The suffix of a test parameter that runs an instruction set without bf16 dot products.
inline constexpr const char* kFp32Products = "_FP32_PRODUCTS";
/// The suffix of a test parameter that runs an instruction set with AMX tiles and bf16 dot
/// products.
inline constexpr const char* kAmxTiles = "_AMX_TILES";

/// Every compiled instruction set this CPU supports, and each AVX-512 one again with kFp32Products
/// where the CPU has bf16 dot products, and with kAmxTiles where it has AMX tiles.
inline std::vector<std::string> isa_params() {
  std::vector<std::string> v = detail::available_isas();
  for (const std::string& isa : detail::available_isas()) {
    if (isa.rfind("AVX3", 0) != 0) continue;
    if (detail::bf16_dots_supported()) v.push_back(isa + kFp32Products);
    if (detail::amx_bf16_supported()) v.push_back(isa + kAmxTiles);
  }
  return v;
}

/// True when the kernels take bf16 dot products here: the CPU has them, the setting asks for them
/// (detail::bf16_dots_enabled(); by default only where they are faster than fp32 FMAs) and the
/// dispatched instruction set is an AVX-512 one.
inline bool bf16_dots_run_here() {
  return detail::bf16_dots_enabled() && detail::kernel_isa_has_bf16_dots();
}

/// True when the kernels take AMX tiles here: the CPU has them, the setting asks for them
/// (detail::amx_enabled()) and the dispatched instruction set is an AVX-512 one.
inline bool amx_runs_here() { return detail::amx_enabled() && detail::kernel_isa_has_bf16_dots(); }

/// True when the kernels can take bf16 dot products here: the CPU has them and the dispatched
/// instruction set is an AVX-512 one (whether the setting asks for them or not).
inline bool bf16_dots_possible_here() {
  return detail::bf16_dots_supported() && detail::kernel_isa_has_bf16_dots();
}

/// Asks for (true) or forbids (false) AMX tiles while in scope (detail::set_amx); the default
/// comes back at the end of the scope.
class ScopedAmx {
 public:
  explicit ScopedAmx(bool on) { detail::set_amx(on); }
  ~ScopedAmx() { detail::reset_amx(); }
  ScopedAmx(const ScopedAmx&) = delete;
  ScopedAmx& operator=(const ScopedAmx&) = delete;
};

/// Asks for (true) or forbids (false) the bf16 dot products while in scope, whatever the CPU's
/// default (detail::set_bf16_dots); the default comes back at the end of the scope.
class ScopedBf16Dots {
 public:
  explicit ScopedBf16Dots(bool on) { detail::set_bf16_dots(on); }
  ~ScopedBf16Dots() { detail::reset_bf16_dots(); }
  ScopedBf16Dots(const ScopedBf16Dots&) = delete;
  ScopedBf16Dots& operator=(const ScopedBf16Dots&) = delete;
};

/// The outputs of `args` on the cpu backend (2 workers) with bf16 dot products asked for or
/// forbidden, and AMX tiles asked for (`amx`) or forbidden (the default settings again afterwards).
inline Outputs run_with_bf16_dots(const FiaArgs& args, bool dots, bool amx = false) {
  const ScopedBf16Dots setting(dots);
  const ScopedAmx tiles(amx);
  Outputs out;
  EXPECT_TRUE(run_call(args, Backend::kCpu, 2, &out).ok());
  return out;
}

/// A test over isa_params(): forces the instruction set, and asks for the bf16 dot products where
/// the CPU has them (forbids them for a kFp32Products parameter) and forbids AMX tiles (asks for
/// them for a kAmxTiles parameter), for the test's duration; so every way is tested whatever the
/// CPU's default.
class PerIsaAndProducts : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string p = GetParam();
    const auto fp32 = p.find(kFp32Products), amx = p.find(kAmxTiles);
    isa_ = p.substr(0, std::min(fp32, amx));
    detail::set_bf16_dots(fp32 == std::string::npos);
    detail::set_amx(amx != std::string::npos);
    ASSERT_TRUE(detail::force_isa(isa_)) << p;
  }
  void TearDown() override {
    detail::force_isa("");
    detail::reset_bf16_dots();
    detail::reset_amx();
  }
  /// The instruction set (the parameter without its suffix).
  const std::string& isa() const { return isa_; }

 private:
  std::string isa_;
};

}  // namespace fia::test
