// Benchmark workloads: FIA calls from shapes.json (random tensors, fixed seed) or a case folder.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "bench/machine_limits.hpp"
#include "bench/pages.hpp"
#include "fia/fia.hpp"

namespace fia::detail {
struct Problem;
}  // namespace fia::detail

namespace fia::bench {

/// One call's arguments and the tensors they view, in `blocks` on `pages`.
struct CallData {
  FiaArgs args;
  Pages pages = Pages::kHuge;
  std::deque<PageBlock> blocks;
};

/// A workload: the same call over `copies` independent sets of K/V buffers (decode rotates
/// through them so the KV a call reads is not resident in the last-level cache).
struct Workload {
  std::string name;
  std::string what;
  std::vector<std::unique_ptr<CallData>> copies;
  bool decode = false;          ///< memory-bound: judged in GB/s against the read bandwidth
  /// Bytes one call reads over the tokens the lengths cover: K + V (+ key_rope) in the stored
  /// dtype (int8 1 byte, int4 half a byte per element), antiquant scales / offsets, paged
  /// block-table entries. 0 when the library rejects the call before a Problem exists.
  double bytes_per_call = 0.0;
  /// 2 * N * sum_b(Sq_b * Skv_b) * (QK_D + rope + V_D), halved for causal.
  double flops_per_call = 0.0;
  std::string error;            ///< set when the workload cannot be built or run
  bool unsupported = false;     ///< the library rejects the call as not supported yet (kUnsupported)
  bool values_are_keys = false; ///< decode MLA (V := K): `value` is ignored, not read or rotated
  /// int8 full quantization (FIA-SPEC 13.1): integer products, judged against the int8
  /// multiply-add peak instead of the fp32 one
  bool int8_products = false;
  /// Of those, products that run on AMX-INT8 tiles (detail::full_quant_tiles as a plan made now
  /// would take them): judged against the AMX-INT8 peak instead of the byte quads'.
  bool int8_tiles = false;
  /// Of flops_per_call, those the kernels run as bf16 dot products (bf16 query and K/V on an
  /// AVX-512 CPU with them: Q·Kᵀ of wide items, in place or not, and their P·V where P is E
  /// rounded to bf16; cpu/bf16_dots-inl.h), by the items' shares of the cells, judged
  /// against the bf16 dot-product peak instead of the fp32 FMA one.
  double dot_flops_per_call = 0.0;
  /// Of flops_per_call, those the kernels run on AMX tiles (Q·Kᵀ and P·V of bf16 wide items that
  /// do not run in place, where the CPU has them: detail::amx_wide_keys, amx_wide_values,
  /// cpu/amx.hpp), by the items' shares of the cells, judged against the AMX bf16 peak instead of
  /// the fp32 FMA one (P·V in three pieces, TND's f32 P, counts once, as the products it computes).
  double tile_flops_per_call = 0.0;
};

/// Reads a shapes file (see ../shared/bench/shapes.json: name, what, params, tensors). Entries
/// whose name is not in `only` (when not empty) are skipped. Tensors are random with a fixed seed;
/// quantized K/V and their scales are drawn so that dequantized values stay within about +-1.5
/// (+-2 for int4 with offsets; see value_range in workload.cpp). A call the library rejects
/// becomes a workload with `error` (and `unsupported` for kUnsupported). The tensors lie on `pages`
/// (their cold copies too). Throws std::runtime_error on a malformed file.
std::vector<Workload> load_shapes(const std::string& path, const std::vector<std::string>& only,
                                  Pages pages = Pages::kHuge);

/// A workload from a case folder (CASE-FORMAT.md), its tensors copied onto `pages`.
Workload load_case_workload(const std::string& dir, Pages pages = Pages::kHuge);

/// The K and V tensors the cold rotation swaps (every tensor of the lists; K alone when V := K) of
/// every copy of `w`, copy `first` first and then in rotation order: what a read-bandwidth round
/// over the workload's own memory reads.
std::vector<ByteRange> kv_ranges(const Workload& w, std::size_t first);

/// Makes decode workloads cold: adds K/V copies (every tensor of the key and value lists, in their
/// stored dtype; antiquant scales and key_rope are shared) until they span `bytes` (at least two
/// copies), on the pages of the first. None when K and V hold no bytes.
void add_cold_copies(Workload& w, double bytes);

/// The bytes one call of validated problem `p` reads (Workload::bytes_per_call): K + V
/// (+ key_rope) over the tokens the lengths cover in the stored dtype (K alone when V := K, decode
/// MLA), the antiquant scales and offsets
/// (per-token: one F32 per token, per KV head in modes 3 and 5; otherwise the KV_N x D channel
/// tables in the query dtype) and the block-table entries of paged segments.
double bytes_read(const detail::Problem& p);

/// Fills bytes_per_call, flops_per_call and decode from a valid call (false: not a valid call).
bool describe_work(Workload& w);

}  // namespace fia::bench
