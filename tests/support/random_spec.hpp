// Random valid calls over the whole feature space of the core and KV-storage issues.
#pragma once

#include <cstdint>
#include <random>

#include "support/call_builder.hpp"

namespace fia::test {

/// Which storage modes random_spec may pick.
struct SpecAxes {
  bool storage_modes = true;  ///< paged, tensor list, shared prefix, left padding
  std::int64_t max_q_seq = 40;
  std::int64_t max_kv_seq = 150;
};

/// A random valid call (default mode): layouts x dtypes x GQA ratios x Q_S 1 and > 1 x masks x
/// sparse modes x lengths (including 0 and fully masked rows) x sink x pse x LSE x rope x storage.
CallSpec random_spec(std::uint64_t seed, const SpecAxes& axes = {});

/// A random BNSD call in `storage` for the storage property tests: B 2-4, GQA, head dims 16-64,
/// Q_S 1 or up to 20, uneven KV lengths, random block sizes and cache layouts, masks / pse /
/// sink / sparse modes drawn at random, LSE on; the dtype is left at its default. Draws from `rng`.
CallSpec storage_spec(std::mt19937_64& rng, KvStorage storage);
/// The same from `seed`, with an fp16 or bf16 query.
CallSpec storage_spec(std::uint64_t seed, KvStorage storage);

}  // namespace fia::test
