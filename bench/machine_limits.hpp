// The limits a kernel is measured against, measured in the same run (issue: ratios, not absolutes).
#pragma once

namespace fia::bench {

/// Read bandwidth in bytes per second: `threads` workers each summing their slice of a buffer
/// several times the last-level cache; the best of a few passes.
double measure_read_bandwidth(int threads);

/// fp32 fused multiply-add peak in FLOP/s (2 per lane per FMA): `threads` workers running
/// independent register-resident FMA chains on the kernels' instruction set; best of a few runs.
double measure_fma_peak(int threads);

/// Bytes of the last-level cache (sysconf, else 32 MiB).
long last_level_cache_bytes();

}  // namespace fia::bench
