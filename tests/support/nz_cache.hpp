// NZ paged caches for tests (FIA-SPEC 3.2, 9.1): the (block_num, N, block_size, D) caches of a
// call rewritten as (block_num, N, D/D0, block_size, D0), D0 = 32 bytes of elements.
#pragma once

#include "support/call_builder.hpp"

namespace fia::test {

/// (block_num, N, block_size, D), contiguous -> NZ (block_num, N, D/D0, block_size, D0).
OwnedTensor to_nz(const TensorView& nd);

/// The call `nd` (paged with (block_num, N, block_size, D) caches) with its key, value and
/// key_rope caches in the NZ layout; its other views still point into nd's tensors.
TestCall as_nz(const FiaArgs& nd);

}  // namespace fia::test
