// KV antiquantization (FIA-SPEC 12) properties: a quantized cache means its dequantized values, and
// every way of storing it or passing its parameters is only a different address of the same
// numbers. Storage and parameter forms must give the cpu backend's output bit for bit; the
// scale and offset indexing is checked here independently of the reference (which shares the
// Problem's indexing with the kernels).
//
// Helpers shared by antiquant_values_test.cpp (sections (a), (c), (d): what the quantized values
// mean) and antiquant_storage_test.cpp (sections (b), (e)-(g): where they are stored).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/call_builder.hpp"
#include "support/random_spec.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {

inline constexpr int kCases = 60;

inline std::vector<std::int64_t> logical_shape(const TensorView& t) {
  std::vector<std::int64_t> s = t.shape;
  if (t.dtype == DType::I32) s.back() *= 8;
  return s;
}

inline Outputs run_cpu(const FiaArgs& a, const std::string& what) {
  Outputs o;
  const Status st = run_call(a, Backend::kCpu, 2, &o);
  EXPECT_TRUE(st.ok()) << what << ": " << st.to_string();
  return o;
}

/// "" when x and y hold the same bits, else where they first differ (element of `dtype`) and
/// how many elements differ.
inline std::string first_difference(const OwnedTensor& x, const OwnedTensor& y) {
  if (x.bytes == y.bytes) return "";
  if (x.bytes.size() != y.bytes.size())
    return "sizes " + std::to_string(x.bytes.size()) + " and " + std::to_string(y.bytes.size());
  const std::size_t es = dtype_size(x.dtype);
  std::int64_t first = -1, count = 0;
  for (std::int64_t e = 0; e < x.numel(); ++e) {
    const auto xb = x.bytes.begin() + static_cast<std::ptrdiff_t>(e * es);
    if (!std::equal(xb, xb + static_cast<std::ptrdiff_t>(es), y.bytes.begin() + static_cast<std::ptrdiff_t>(e * es))) {
      if (first < 0) first = e;
      ++count;
    }
  }
  std::ostringstream os;
  os << std::setprecision(9) << "first differing element " << first << " (" << kv_value(x.view(), first) << " vs "
     << kv_value(y.view(), first) << "), " << count << " of " << x.numel() << " differ";
  return os.str();
}

/// Runs two calls that store the same quantized KV differently; same output and LSE bits.
inline void expect_same_bits(const FiaArgs& a, const std::string& a_what, const FiaArgs& b, const std::string& b_what,
                      const CallSpec& spec) {
  const Outputs x = run_cpu(a, a_what), y = run_cpu(b, b_what);
  EXPECT_EQ(first_difference(x.attention_out, y.attention_out), "")
      << "attention_out, " << a_what << " vs " << b_what << ": " << describe(spec);
  EXPECT_EQ(first_difference(x.softmax_lse, y.softmax_lse), "")
      << "softmax_lse, " << a_what << " vs " << b_what << ": " << describe(spec);
}

/// Runs two calls that store the same quantized KV in formats whose products may sum in different
/// orders (the decode kernels read int4 rows in lane order on AVX-512, int8 rows in logical order:
/// cpu/decode_rows-inl.h, int4_in_lane_order): attention_out in float32 (Options::float32_out, before
/// its rounding to the query dtype) within 2e-5 + 2e-5 |y|, finite LSEs within 2e-5, infinite
/// ones equal.
inline void expect_close(const FiaArgs& a, const std::string& a_what, const FiaArgs& b, const std::string& b_what,
                         const CallSpec& spec) {
  Options o;
  o.backend = Backend::kCpu;
  o.threads = 2;
  o.float32_out = true;
  Outputs x, y;
  ASSERT_TRUE(fused_infer_attention_score(a, o, &x).ok()) << a_what << ": " << describe(spec);
  ASSERT_TRUE(fused_infer_attention_score(b, o, &y).ok()) << b_what << ": " << describe(spec);
  ASSERT_EQ(x.attention_out.numel(), y.attention_out.numel());
  for (std::int64_t e = 0; e < x.attention_out.numel(); ++e) {
    const float xv = x.attention_out.as<float>()[e], yv = y.attention_out.as<float>()[e];
    ASSERT_NEAR(xv, yv, 2e-5 + 2e-5 * std::fabs(yv)) << "element " << e << ", " << a_what << " vs " << b_what << ": "
                                                     << describe(spec);
  }
  for (std::int64_t e = 0; e < x.softmax_lse.numel(); ++e) {
    const float xv = x.softmax_lse.as<float>()[e], yv = y.softmax_lse.as<float>()[e];
    if (std::isinf(yv)) ASSERT_EQ(xv, yv) << "lse " << e << ": " << describe(spec);
    else ASSERT_NEAR(xv, yv, 2e-5) << "lse " << e << ", " << a_what << " vs " << b_what << ": " << describe(spec);
  }
}

/// A random BNSD int8/int4 call in `storage` with a random kind of antiquant parameters among
/// `kinds` (those the storage admits), masks / pse / sink / sparse modes drawn at random.
inline CallSpec quant_spec(std::uint64_t seed, KvStorage storage, KvQuant format,
                           std::vector<AntiquantKind> kinds = {}) {
  std::mt19937_64 rng(seed);
  CallSpec s = storage_spec(rng, storage);
  // F32 too: its output shows every rounding difference that fp16/bf16 outputs would mostly hide.
  s.dtype = seed % 3 == 2 ? DType::F32 : seed % 2 ? DType::BF16 : DType::F16;
  const std::vector<AntiquantKind> allowed = antiquant_kinds(s);
  if (kinds.empty()) kinds = allowed;
  std::vector<AntiquantKind> usable;
  for (AntiquantKind k : kinds)
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) usable.push_back(k);
  set_antiquant(s, format, usable[rng() % usable.size()], rng());
  return s;
}

inline KvQuant format_of(int i) { return i % 2 ? KvQuant::kInt4 : KvQuant::kInt8; }

}  // namespace fia::test
