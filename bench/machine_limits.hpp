// The limits a kernel is measured against, measured in the same run (issue: ratios, not absolutes).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "bench/pages.hpp"

namespace fia::bench {

/// A probe over several rounds: the median is the limit workloads are judged against (the best
/// round overstates what a shared machine sustains); min and max show the spread.
struct Probe {
  double median = 0.0, min = 0.0, max = 0.0;
  int rounds = 0;
};

/// The median, min and max of `samples` (the upper median for an even count); all 0 when empty.
Probe summarize(std::vector<double> samples);

/// Bytes of memory a read-bandwidth round reads (starting on a 4-byte boundary).
struct ByteRange {
  const void* data = nullptr;
  std::size_t bytes = 0;
};

/// One round of the read-bandwidth probe over `ranges`, in order: each of `threads` workers sums
/// its slice of every range (a multiple of 4 KiB; the few KiB past the last whole slice are not
/// read), every cache line prefetched into L2 4 KiB ahead as the decode kernels prefetch their
/// rows. Returns the bytes read per second (0 when no range holds a slice per worker).
double read_bandwidth_round(int threads, const std::vector<ByteRange>& ranges);

/// The bytes one read_bandwidth_round over `ranges` on `threads` workers reads: per range, a
/// slice per worker of a whole number of 4 KiB.
std::size_t round_bytes(int threads, const std::vector<ByteRange>& ranges);

/// The read-bandwidth probe of workloads that bring no memory of their own to read (prefill):
/// read_bandwidth_round over a buffer 8x the last-level cache (at least 512 MiB), allocated and
/// paged in once on `pages` (those of the workloads' tensors), so that rounds can be taken between
/// the calls of every workload.
class BandwidthProbe {
 public:
  explicit BandwidthProbe(int threads, Pages pages = Pages::kHuge);
  /// One pass over the buffer: its read bandwidth in bytes per second.
  double round();

 private:
  struct Buffer;
  std::shared_ptr<Buffer> buffer_;
};

/// One round of the fp32 fused multiply-add peak in FLOP/s (2 per lane per FMA): `threads`
/// workers running independent register-resident FMA chains on the kernels' instruction set,
/// about 35 ms.
double fma_peak_round(int threads);

/// One round of the int8 multiply-add peak in operations/s (2 per multiply-add): `threads` workers
/// running independent register-resident chains of the int8 full-quant kernels' integer products
/// on the kernels' instruction set (byte-quad dot products where the kernels use them, else 16-bit
/// pairs), about as long as fma_peak_round. Int8 full-quant workloads are judged against it: their
/// products are not fp32 multiply-adds, and with VNNI one instruction does 4x as many.
double int8_peak_round(int threads);

/// One round of the bf16 dot-product peak in FLOP/s (2 per multiply-add): `threads` workers
/// running independent register-resident chains of vdpbf16ps (AVX512_BF16, 32 multiply-adds each),
/// about as long as fma_peak_round; 0 where the kernels take no bf16 dot products (another CPU or
/// instruction set, or forbidden: detail::bf16_dots_enabled()). Workloads whose products run on
/// them judge those FLOPs against it (Workload::dot_flops_per_call).
double bf16_dot_peak_round(int threads);

/// One round of the AMX bf16 peak in FLOP/s: `threads` workers running tdpbf16ps on
/// register-resident tiles (detail::amx_bf16_products), about as long as fma_peak_round; 0 where
/// the kernels take no AMX tiles (another CPU, or forbidden: detail::amx_enabled()). Workloads
/// whose Q·Kᵀ runs on them judge those FLOPs against it (Workload::tile_flops_per_call).
double amx_bf16_peak_round(int threads);

/// One round of the AMX-INT8 peak in operations/s (2 per multiply-add): `threads` workers running
/// tdpbssd on register-resident tiles (detail::amx_int8_products), about as long as
/// fma_peak_round; 0 where the CPU has no AMX-INT8 or FIA_AMX=0 forbids the tiles. Int8 full-quant
/// workloads whose products take the tiles (Workload::int8_tiles) are judged against it instead of
/// int8_peak_round.
double amx_int8_peak_round(int threads);

/// Bytes of the last-level cache (Linux: sysfs, then sysconf; macOS: sysctl hw.l3cachesize, else
/// at least 32 MiB from hw.l2cachesize; else 32 MiB).
long last_level_cache_bytes();

}  // namespace fia::bench
