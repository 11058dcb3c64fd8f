// Splitting a test call's keys in two (merge and partial-attention tests, FIA-SPEC 17).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "fia/fia.hpp"

namespace fia::test {

/// The two halves of a call: keys [0, k) and [k, n) of every batch (per batch: the first k of
/// its actual keys, and the rest). Non-token layouts slice the key/value views (strided views
/// into the whole call's tensors, and the columns of a (.., Q_S, KV_S) mask); TND gathers the
/// tokens into new tensors kept in `store`. `act_kv`: the whole call's per-batch key lengths.
struct Halves {
  FiaArgs a, b;
};
Halves split_keys(const FiaArgs& whole, const std::vector<std::int64_t>& act_kv, std::int64_t k,
                  std::deque<OwnedTensor>& store);

}  // namespace fia::test
