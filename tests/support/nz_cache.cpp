#include "support/nz_cache.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace fia::test {

OwnedTensor to_nz(const TensorView& nd) {
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(nd.dtype)), d0 = 32 / es;
  const std::int64_t blocks = nd.shape[0], heads = nd.shape[1], bs = nd.shape[2], D = nd.shape[3];
  EXPECT_EQ(D % d0, 0) << "head dim " << D << " is not a multiple of D0 " << d0;
  OwnedTensor t(nd.dtype, {blocks, heads, D / d0, bs, d0});
  const auto* src = static_cast<const std::byte*>(nd.data);
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t s = 0; s < bs; ++s)
        for (std::int64_t d = 0; d < D; ++d) {
          const std::int64_t from = ((b * heads + h) * bs + s) * D + d;
          const std::int64_t to = (((b * heads + h) * (D / d0) + d / d0) * bs + s) * d0 + d % d0;
          std::memcpy(t.bytes.data() + to * es, src + from * es, static_cast<std::size_t>(es));
        }
  return t;
}

TestCall as_nz(const FiaArgs& nd) {
  TestCall nz;
  nz.args = nd;
  nz.args.key = {nz.keep(to_nz(nd.key[0]))};
  nz.args.value = {nz.keep(to_nz(nd.value[0]))};
  if (nd.key_rope.present()) nz.args.key_rope = nz.keep(to_nz(nd.key_rope));
  return nz;
}

}  // namespace fia::test
