// transpose_into (cpu/transpose-inl.h), which builds the Q panel of every wide item and turns its
// P·V accumulators back into rows, is an exact transpose on every compiled instruction set: for
// every size around its 8 x 8 blocks (x86) and the vector width (elsewhere), with strides wider
// than the rows, and without writing outside the transposed elements.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/transpose_test.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cstdint>
#include <vector>

#include "cpu/transpose-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {

void TransposeForTest(const float* src, std::int64_t ld_src, std::int64_t rows, std::int64_t cols, float* dst,
                      std::int64_t ld_dst) {
  transpose_into(hn::ScalableTag<float>(), src, ld_src, rows, cols, dst, ld_dst);
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "cpu/isa.hpp"

namespace fia::detail {
HWY_EXPORT(TransposeForTest);
}  // namespace fia::detail

namespace {

/// dst (ld_dst = rows + 3, cols + 1 rows of it, prefilled with -1) after transposing rows x cols
/// of src (ld_src = cols + 5): every element in place, the padding and the extra row untouched.
void expect_transposed(const std::string& isa, std::int64_t rows, std::int64_t cols) {
  const std::int64_t ld_src = cols + 5, ld_dst = rows + 3;
  std::vector<float> src(static_cast<std::size_t>(rows * ld_src));
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.5f;
  std::vector<float> dst(static_cast<std::size_t>((cols + 1) * ld_dst), -1.0f);
  HWY_DYNAMIC_DISPATCH(fia::detail::TransposeForTest)(src.data(), ld_src, rows, cols, dst.data(), ld_dst);
  int shown = 0;
  for (std::int64_t x = 0; x <= cols; ++x)
    for (std::int64_t r = 0; r < ld_dst; ++r) {
      const float want = x < cols && r < rows ? src[static_cast<std::size_t>(r * ld_src + x)] : -1.0f;
      const float got = dst[static_cast<std::size_t>(x * ld_dst + r)];
      if (got != want && shown++ < 3)
        ADD_FAILURE() << isa << " " << rows << "x" << cols << ": dst[" << x << "][" << r << "] = " << got << ", want " << want;
    }
}

TEST(Transpose, ExactAroundEveryBlockOnEveryIsa) {
  for (const std::string& isa : fia::detail::available_isas()) {
    ASSERT_TRUE(fia::detail::force_isa(isa));
    for (std::int64_t rows = 0; rows <= 34; ++rows)
      for (std::int64_t cols = 0; cols <= 34; ++cols) expect_transposed(isa, rows, cols);
    // The wide items' shapes: 64 packed rows of head dim 64, 128 and 576 (MLA), 16 in-place rows.
    for (const auto& [rows, cols] : {std::pair<std::int64_t, std::int64_t>{64, 64}, {64, 128}, {16, 576}, {60, 72}, {128, 64}})
      expect_transposed(isa, rows, cols);
  }
  fia::detail::force_isa("");
}

}  // namespace
#endif  // HWY_ONCE
