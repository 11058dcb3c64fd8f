// Paged KV caches for tests (FIA-SPEC 9.1): the contiguous form of a paged call.
#pragma once

#include "support/call_builder.hpp"

namespace fia::test {

/// The BNSD call `paged` (paged key, value and key_rope caches shaped (block_num, block_size, H)
/// or (block_num, N, block_size, D)) with its caches gathered into contiguous (B, N, S, D) tensors,
/// S = the block table's width times block_size, and no block table: the same logical KV stored
/// another way. Tokens past a batch's length are zero. Its other views still point into paged's
/// tensors.
TestCall as_contiguous(const FiaArgs& paged);

}  // namespace fia::test
