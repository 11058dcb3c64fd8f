// Target-independent sizes and helpers shared by the two int8 full-quant kernels
// (cpu/full_quant.cpp, FIA-SPEC 13.1; cpu/mla_full_quant.cpp, 13.3).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/item_common.hpp"
#include "plan/plan.hpp"
#include "problem/problem.hpp"

namespace fia::detail::fq {

inline constexpr std::int64_t kRows = 32;     // packed rows per item at most
inline constexpr std::int64_t kLanePad = 64;  // int32 lanes of the widest vector Highway may target
inline constexpr std::int64_t kKTile = 64;    // K rows converted at a time
inline constexpr std::int64_t kVTile = 64;    // V rows grouped at a time (a multiple of every group size)

constexpr std::int64_t up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }
inline constexpr std::int64_t kRowsPad = up(kRows, kLanePad);

/// The group of G small integers x[0..G) (int16 pairs or bytes), as cpu/full_quant_products-inl.h
/// reads it.
template <int G>
std::int32_t group_of(const std::int32_t* x) {
  std::uint32_t g = 0;
  for (int k = 0; k < G; ++k) g |= (static_cast<std::uint32_t>(x[k]) & (G == 2 ? 0xFFFFu : 0xFFu)) << (k * 32 / G);
  return static_cast<std::int32_t>(g);
}

/// Query row q (D int8 values) as its groups at dst[g * Rp] for g < Dg / G, zero past D (the
/// signed operand of the products). A byte quad is its 4 bytes as stored on a little-endian CPU:
/// one 4-byte copy per whole quad (P4 0.99x the time of packing byte by byte); pairs and a partial
/// last quad are packed value by value.
template <int G>
void query_groups(const std::int8_t* q, std::int64_t D, std::int64_t Dg, std::int64_t Rp, std::int32_t* dst) {
  std::int64_t g = 0;
  if constexpr (G == 4 && std::endian::native == std::endian::little)
    for (; g < D / 4; ++g) std::memcpy(dst + g * Rp, q + 4 * g, 4);
  for (; g < Dg / G; ++g) {
    std::int32_t x[G];
    for (int k = 0; k < G; ++k) x[k] = G * g + k < D ? q[G * g + k] : 0;
    dst[g * Rp] = group_of<G>(x);
  }
}

/// The K (or, `value`, V) rows of columns [c0, c0 + count) of the item's batch and KV head, in
/// order: fn(column - c0, int8 row).
template <class Fn>
void each_kv_row(const Problem& p, const WorkItem& it, bool value, std::int64_t c0, std::int64_t count, Fn fn) {
  for_each_run(p, it.b, it.h, c0, count, value ? KvParts::kValues : KvParts::kKeys, [&](std::int64_t c, const KvRun& run) {
    for (std::int64_t t = 0; t < run.count; ++t)
      fn(c + t, static_cast<const std::int8_t*>(value ? run.value : run.key) +
                    t * (value ? run.value_stride : run.key_stride));
  });
}

/// Writes packed row r of the item from its normalised values `o` (null: a fully masked row, 0 or
/// quantize(0), LSE left +inf), and its LSE ln(l) + m when asked.
inline void write_item_row(const Problem& p, const WorkItem& it, std::int64_t r, const float* o, float m, float l,
                           const OutputRows& dst) {
  const std::int64_t n = it.query_head(p.group, r), i = it.query_row(r);
  auto* orow = static_cast<std::byte*>(const_cast<void*>(dst.out.base)) +
               dst.out.offset(it.b, n, i) * static_cast<std::int64_t>(dtype_size(p.out_dtype));
  write_output_row(p, n, o, orow);
  if (o && p.lse) static_cast<float*>(const_cast<void*>(dst.lse.base))[dst.lse.offset(it.b, n, i)] = std::log(l) + m;
}

/// The schedule of a full-quant call: self-contained items of up to kRows packed rows (query rows
/// x query heads of one KV head) over the whole visible KV range of their rows (the chunk order is
/// the semantics); `dims` (head dims read per packed row and key) weighs the work that decides
/// whether the call runs on one thread; each worker gets `floats_per_thread` floats of scratch.
/// Defined in cpu/full_quant.cpp.
CpuPlan full_quant_plan(const Problem& p, int threads, std::int64_t dims, std::size_t floats_per_thread);

}  // namespace fia::detail::fq
