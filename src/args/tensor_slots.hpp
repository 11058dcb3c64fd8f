// The single-tensor inputs of FiaArgs by torch_npu name (all but the key/value lists).
#pragma once

#include <array>
#include <string_view>
#include <utility>

#include "fia/args.hpp"

namespace fia::detail {

/// (name, member) for every single-tensor input of FiaArgs, in FIA-SPEC 2.1 order; works on const
/// and mutable arguments.
template <class Args>
auto tensor_slots(Args& a) {
  using Slot = std::pair<std::string_view, decltype(&a.query)>;
  return std::array<Slot, 24>{{
      {"query", &a.query},
      {"pse_shift", &a.pse_shift},
      {"atten_mask", &a.atten_mask},
      {"dequant_scale1", &a.dequant_scale1},
      {"quant_scale1", &a.quant_scale1},
      {"dequant_scale2", &a.dequant_scale2},
      {"quant_scale2", &a.quant_scale2},
      {"quant_offset2", &a.quant_offset2},
      {"antiquant_scale", &a.antiquant_scale},
      {"antiquant_offset", &a.antiquant_offset},
      {"block_table", &a.block_table},
      {"query_padding_size", &a.query_padding_size},
      {"kv_padding_size", &a.kv_padding_size},
      {"key_antiquant_scale", &a.key_antiquant_scale},
      {"key_antiquant_offset", &a.key_antiquant_offset},
      {"value_antiquant_scale", &a.value_antiquant_scale},
      {"value_antiquant_offset", &a.value_antiquant_offset},
      {"key_shared_prefix", &a.key_shared_prefix},
      {"value_shared_prefix", &a.value_shared_prefix},
      {"query_rope", &a.query_rope},
      {"key_rope", &a.key_rope},
      {"key_rope_antiquant_scale", &a.key_rope_antiquant_scale},
      {"dequant_scale_query", &a.dequant_scale_query},
      {"learnable_sink", &a.learnable_sink},
  }};
}

/// The member holding single-tensor input `name`, or nullptr.
template <class Args>
auto tensor_slot(Args& a, std::string_view name) -> decltype(&a.query) {
  for (const auto& [n, slot] : tensor_slots(a))
    if (n == name) return slot;
  return nullptr;
}

}  // namespace fia::detail
