#include "support/split_keys.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "args/layout.hpp"

namespace fia::test {

Halves split_keys(const FiaArgs& whole, const std::vector<std::int64_t>& act_kv, std::int64_t k,
                  std::deque<OwnedTensor>& store) {
  detail::LayoutPair lp;
  EXPECT_TRUE(detail::parse_layout(whole.input_layout, &lp));
  Halves h{whole, whole};
  std::vector<std::int64_t> la, lb;
  for (auto len : act_kv) {
    la.push_back(std::min(len, k));
    lb.push_back(std::max<std::int64_t>(len - k, 0));
  }
  if (!detail::is_token_layout(lp.in)) {
    const int s_axis = detail::axis_positions(lp.in).s;
    for (int part = 0; part < 2; ++part) {
      FiaArgs& args = part == 0 ? h.a : h.b;
      for (auto* list : {&args.key, &args.value}) {
        TensorView& t = (*list)[0];
        std::vector<std::int64_t> strides(t.rank());
        for (std::size_t i = 0; i < t.rank(); ++i) strides[i] = t.stride(i);
        const std::int64_t n = t.shape[static_cast<std::size_t>(s_axis)];
        if (part == 1)
          t.data = static_cast<const char*>(t.data) + k * strides[static_cast<std::size_t>(s_axis)] * dtype_size(t.dtype);
        t.shape[static_cast<std::size_t>(s_axis)] = part == 0 ? k : n - k;
        t.strides = strides;
      }
      if (args.atten_mask.present()) {  // a (.., Q_S, KV_S) mask: slice its columns too
        TensorView& m = args.atten_mask;
        std::vector<std::int64_t> strides(m.rank());
        for (std::size_t i = 0; i < m.rank(); ++i) strides[i] = m.stride(i);
        if (part == 1) m.data = static_cast<const char*>(m.data) + k * dtype_size(m.dtype);
        m.shape.back() = part == 0 ? k : m.shape.back() - k;
        m.strides = strides;
      }
      args.actual_seq_lengths_kv = part == 0 ? la : lb;
    }
    return h;
  }
  // TND: key/value (T_kv, KV_N, D), batch b owning tokens [cum[b-1], cum[b]).
  for (int part = 0; part < 2; ++part) {
    FiaArgs& args = part == 0 ? h.a : h.b;
    const auto& lens = part == 0 ? la : lb;
    for (auto* list : {&args.key, &args.value}) {
      const TensorView& t = (*list)[0];
      const std::size_t row = static_cast<std::size_t>(t.shape[1] * t.shape[2]) * dtype_size(t.dtype);
      OwnedTensor out(t.dtype, {std::accumulate(lens.begin(), lens.end(), std::int64_t{0}), t.shape[1], t.shape[2]});
      std::int64_t src = 0, dst = 0;
      for (std::size_t b = 0; b < act_kv.size(); ++b) {
        const std::int64_t first = src + (part == 0 ? 0 : la[b]);
        std::memcpy(out.bytes.data() + dst * row, static_cast<const std::byte*>(t.data) + first * row, lens[b] * row);
        src += act_kv[b];
        dst += lens[b];
      }
      store.push_back(std::move(out));
      (*list)[0] = store.back().view();
    }
    std::vector<std::int64_t> cum(lens.size());
    std::partial_sum(lens.begin(), lens.end(), cum.begin());
    args.actual_seq_lengths_kv = cum;
  }
  return h;
}

}  // namespace fia::test
