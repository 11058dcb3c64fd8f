#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/machine_limits.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <unistd.h>
#ifdef __APPLE__
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/machine_limits.hpp"
#include "cpu/amx.hpp"
#include "cpu/full_quant.hpp"
#include "cpu/isa.hpp"
#include "cpu/full_quant_products-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fia::bench::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Bytes ahead of the sum that SumWords prefetches, as the decode kernels prefetch contiguous K
/// and V rows (kPrefetchBytes in src/cpu/decode_rows-inl.h).
constexpr std::size_t kPrefetchAhead = 4096;

/// Sum of n 32-bit words (n a multiple of 4 vectors), four independent accumulators, every cache
/// line prefetched into L2 kPrefetchAhead bytes ahead as the decode kernels do: the probe measures
/// the best read rate the kernels' own technique gets. The plain loop read about 10 % less than
/// with the prefetches (Zen 4 VM, 2 threads: 26.4-29.0 GB/s against 30.0-31.9), and D4 read 101 %
/// of a roofline made with it. Integer adds: K and V read as floats may be NaN or subnormal.
std::uint32_t SumWords(const std::uint32_t* HWY_RESTRICT p, std::size_t n) {
  const hn::ScalableTag<std::uint32_t> d;
  const std::size_t L = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  for (std::size_t i = 0; i + 4 * L <= n; i += 4 * L) {
    const char* ahead = reinterpret_cast<const char*>(p + i) + kPrefetchAhead;
    for (std::size_t o = 0; o < 4 * L * sizeof(std::uint32_t); o += 64) __builtin_prefetch(ahead + o, 0, 2);
    a0 = hn::Add(a0, hn::LoadU(d, p + i));
    a1 = hn::Add(a1, hn::LoadU(d, p + i + L));
    a2 = hn::Add(a2, hn::LoadU(d, p + i + 2 * L));
    a3 = hn::Add(a3, hn::LoadU(d, p + i + 3 * L));
  }
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

/// Runs `iters` rounds of 10 independent FMA chains; returns the FLOPs done (and a value that
/// keeps the chains alive).
double FmaChains(std::int64_t iters, float seed, float* sink) {
  const hn::ScalableTag<float> d;
  const auto m = hn::Set(d, 0.999999f), c = hn::Set(d, 1e-7f);
  auto a0 = hn::Set(d, seed), a1 = hn::Add(a0, c), a2 = hn::Add(a1, c), a3 = hn::Add(a2, c), a4 = hn::Add(a3, c);
  auto a5 = hn::Add(a4, c), a6 = hn::Add(a5, c), a7 = hn::Add(a6, c), a8 = hn::Add(a7, c), a9 = hn::Add(a8, c);
  for (std::int64_t i = 0; i < iters; ++i) {
    a0 = hn::MulAdd(a0, m, c);
    a1 = hn::MulAdd(a1, m, c);
    a2 = hn::MulAdd(a2, m, c);
    a3 = hn::MulAdd(a3, m, c);
    a4 = hn::MulAdd(a4, m, c);
    a5 = hn::MulAdd(a5, m, c);
    a6 = hn::MulAdd(a6, m, c);
    a7 = hn::MulAdd(a7, m, c);
    a8 = hn::MulAdd(a8, m, c);
    a9 = hn::MulAdd(a9, m, c);
  }
  const auto s = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                         hn::Add(hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)), hn::Add(a8, a9)));
  *sink = hn::GetLane(s);
  return 2.0 * 10.0 * static_cast<double>(hn::Lanes(d)) * static_cast<double>(iters);
}

/// Ten independent chains of `iters` integer multiply-adds as the int8 full-quant kernels do them
/// (cpu/full_quant_products-inl.h): byte quads (u8 x s8: vpdpbusd, usdot) where the kernels take
/// them on this CPU, else 16-bit pairs. Returns the int8 operations done (2 per multiply-add).
#if HWY_TARGET == HWY_SCALAR
double IntDotChains(std::int64_t iters, std::int32_t seed, std::int32_t* sink) {
  std::uint32_t a[10];  // wrapping, as the vector lanes do
  for (int k = 0; k < 10; ++k) a[k] = static_cast<std::uint32_t>(seed + k);
  for (std::int64_t i = 0; i < iters; ++i)
    for (int k = 0; k < 10; ++k)  // a pair of 16-bit products of the accumulator's halves
      a[k] += static_cast<std::uint32_t>(static_cast<std::int16_t>(a[k] & 0xFFFF) * 3 +
                                         static_cast<std::int16_t>(a[k] >> 16) * 5);
  std::uint32_t s = 0;
  for (int k = 0; k < 10; ++k) s += a[k];
  *sink = static_cast<std::int32_t>(s);
  return 2.0 * 2.0 * 10.0 * static_cast<double>(iters);
}
#else
template <int G>
double IntDotChainsOf(std::int64_t iters, std::int32_t seed, std::int32_t* sink) {
  namespace fq = fia::detail::HWY_NAMESPACE;
  const fq::DI di;
  const auto s = hn::Set(di, 0x01010101);
  auto a0 = hn::Set(di, seed), a1 = hn::Add(a0, s), a2 = hn::Add(a1, s), a3 = hn::Add(a2, s), a4 = hn::Add(a3, s);
  auto a5 = hn::Add(a4, s), a6 = hn::Add(a5, s), a7 = hn::Add(a6, s), a8 = hn::Add(a7, s), a9 = hn::Add(a8, s);
  auto b0 = hn::Zero(di), b1 = b0, b2 = b0, b3 = b0, b4 = b0, b5 = b0, b6 = b0, b7 = b0, b8 = b0, b9 = b0;
  for (std::int64_t i = 0; i < iters; ++i) {
    // Each chain multiplies its own accumulator: no product the compiler may share between chains
    // or hoist out of the loop.
    a0 = fq::dot<G>(di, a0, a0, s, b0);
    a1 = fq::dot<G>(di, a1, a1, s, b1);
    a2 = fq::dot<G>(di, a2, a2, s, b2);
    a3 = fq::dot<G>(di, a3, a3, s, b3);
    a4 = fq::dot<G>(di, a4, a4, s, b4);
    a5 = fq::dot<G>(di, a5, a5, s, b5);
    a6 = fq::dot<G>(di, a6, a6, s, b6);
    a7 = fq::dot<G>(di, a7, a7, s, b7);
    a8 = fq::dot<G>(di, a8, a8, s, b8);
    a9 = fq::dot<G>(di, a9, a9, s, b9);
  }
  const auto a = hn::Add(hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))),
                         hn::Add(a8, a9));
  const auto b = hn::Add(hn::Add(hn::Add(hn::Add(b0, b1), hn::Add(b2, b3)), hn::Add(hn::Add(b4, b5), hn::Add(b6, b7))),
                         hn::Add(b8, b9));
  *sink = hn::GetLane(hn::Add(a, b));
  return 2.0 * G * 10.0 * static_cast<double>(hn::Lanes(di)) * static_cast<double>(iters);
}

double IntDotChains(std::int64_t iters, std::int32_t seed, std::int32_t* sink) {
#if FIA_FULL_QUANT_QUADS
  static const bool byte_dots = detail::cpu_has_byte_dots(HWY_TARGET != HWY_AVX2);
  if (byte_dots && detail::byte_quads_allowed()) return IntDotChainsOf<4>(iters, seed, sink);
#endif
  return IntDotChainsOf<2>(iters, seed, sink);
}
#endif

/// Ten independent chains of bf16 dot products (vdpbf16ps, 32 multiply-adds each; inline
/// assembly as in cpu/bf16_dots-inl.h) on AVX-512 targets; returns their FLOPs, 0 elsewhere.
double Bf16DotChains(std::int64_t iters, float seed, float* sink) {
#if HWY_ARCH_X86_64 && (HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3_ZEN4 || \
                        HWY_TARGET == HWY_AVX3_SPR)
  const __m512i x = _mm512_set1_epi32(0x3F803F80), y = _mm512_set1_epi32(0x3F003F00);  // bf16 pairs (1, 1), (0.5, 0.5)
  // Named accumulators: an array of them kept in memory between the statements ran 2.4x slower.
  __m512 a0 = _mm512_set1_ps(seed), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0;
  for (std::int64_t i = 0; i < iters; ++i) {
#define FIA_DOT(a) asm volatile("vdpbf16ps %2, %1, %0" : "+v"(a) : "v"(x), "v"(y));
    FIA_DOT(a0) FIA_DOT(a1) FIA_DOT(a2) FIA_DOT(a3) FIA_DOT(a4) FIA_DOT(a5) FIA_DOT(a6) FIA_DOT(a7) FIA_DOT(a8) FIA_DOT(a9)
#undef FIA_DOT
  }
  const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                 _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)),
                                               _mm512_add_ps(a8, a9)));
  *sink = _mm512_reduce_add_ps(s);
  return 2.0 * 32.0 * 10.0 * static_cast<double>(iters);
#else
  (void)iters;
  *sink = seed;
  return 0.0;
#endif
}

}  // namespace fia::bench::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fia::bench {

HWY_EXPORT(SumWords);
HWY_EXPORT(FmaChains);
HWY_EXPORT(IntDotChains);
HWY_EXPORT(Bf16DotChains);

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

long last_level_cache_bytes() {
  // The kernel's view first (sysconf reports the host's cache in some VMs).
  for (int index = 4; index >= 0; --index) {
    std::ifstream size("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    long kib = 0;
    char unit = 0;
    if (size >> kib >> unit && unit == 'K' && kib > 0) return kib << 10;
  }
  long l3 = 0, l2 = 0;
#if defined(_SC_LEVEL3_CACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)  // glibc
  l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#elif defined(__APPLE__)
  auto by_name = [](const char* name) {
    std::int64_t v = 0;
    std::size_t size = sizeof v;
    return sysctlbyname(name, &v, &size, nullptr, 0) == 0 ? static_cast<long>(v) : 0L;
  };
  l3 = by_name("hw.l3cachesize");  // 0 on Apple silicon, which has no L3
  l2 = by_name("hw.l2cachesize");
#endif
  if (l3 > 0) return l3;
  return l2 > 0 ? std::max(l2, 32L << 20) : 32L << 20;
}

namespace {
/// Runs fn(t) on `threads` threads at once and returns the seconds they took together: from the
/// moment the last of them has started (each waits for the others) to the moment the last one
/// ends. Starting a thread on this kind of VM takes up to milliseconds (an idle vCPU wakes
/// slowly), which a round of a few milliseconds (a decode workload's K/V copies: 128 MiB) would
/// otherwise count as time spent reading.
template <class Fn>
double timed_on_threads(int threads, Fn fn) {
  std::atomic<int> started{0};
  std::atomic<Clock::rep> begin{0};
  std::vector<Clock::time_point> ends(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      if (started.fetch_add(1) + 1 == threads) begin.store(Clock::now().time_since_epoch().count());
      while (started.load() < threads) std::this_thread::yield();
      fn(t);
      ends[static_cast<std::size_t>(t)] = Clock::now();
    });
  for (auto& th : pool) th.join();
  const Clock::time_point t0{Clock::duration{begin.load()}};
  return std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) - t0).count();
}
}  // namespace

Probe summarize(std::vector<double> samples) {
  Probe p;
  if (samples.empty()) return p;
  std::sort(samples.begin(), samples.end());
  p.rounds = static_cast<int>(samples.size());
  p.median = samples[samples.size() / 2];
  p.min = samples.front();
  p.max = samples.back();
  return p;
}

/// Bytes per slice of a range that read_bandwidth_round hands one worker: a multiple of 4
/// vectors of any target (SVE vectors are up to 256 bytes).
constexpr std::size_t kSliceGranule = 4096;

namespace {
std::size_t slice_bytes(const ByteRange& r, std::size_t workers) {
  return r.bytes / workers / kSliceGranule * kSliceGranule;
}
}  // namespace

std::size_t round_bytes(int threads, const std::vector<ByteRange>& ranges) {
  const auto workers = static_cast<std::size_t>(std::max(threads, 1));
  std::size_t total = 0;
  for (const ByteRange& r : ranges) total += slice_bytes(r, workers) * workers;
  return total;
}

double read_bandwidth_round(int threads, const std::vector<ByteRange>& ranges) {
  const int n = std::max(threads, 1);
  const auto workers = static_cast<std::size_t>(n);
  const std::size_t total = round_bytes(n, ranges);
  if (total == 0) return 0.0;
  std::vector<std::uint32_t> sums(workers);
  const double s = timed_on_threads(n, [&](int t) {
    std::uint32_t sum = 0;
    for (const ByteRange& r : ranges) {
      const std::size_t slice = slice_bytes(r, workers);
      const auto* words = reinterpret_cast<const std::uint32_t*>(static_cast<const char*>(r.data) + t * slice);
      sum += HWY_DYNAMIC_DISPATCH(SumWords)(words, slice / sizeof(std::uint32_t));
    }
    sums[static_cast<std::size_t>(t)] = sum;
  });
  volatile std::uint32_t keep = sums[0];
  (void)keep;
  return static_cast<double>(total) / s;
}

struct BandwidthProbe::Buffer {
  Buffer(std::size_t bytes, Pages pages) : block(bytes, pages) {}
  PageBlock block;
  int threads = 1;
};

BandwidthProbe::BandwidthProbe(int threads, Pages pages)
    : buffer_(std::make_shared<Buffer>(
          std::max<std::size_t>(512u << 20, 8 * static_cast<std::size_t>(last_level_cache_bytes())), pages)) {
  Buffer& b = *buffer_;
  b.threads = std::max(threads, 1);
  auto* data = static_cast<std::uint32_t*>(b.block.data());
  const std::size_t n = b.block.bytes() / sizeof(std::uint32_t), slice = n / static_cast<std::size_t>(b.threads);
  timed_on_threads(b.threads, [&](int t) { std::fill(data + t * slice, data + (t + 1) * slice, 1u); });
}

double BandwidthProbe::round() {
  const Buffer& b = *buffer_;
  return read_bandwidth_round(b.threads, {ByteRange{b.block.data(), b.block.bytes()}});
}

namespace {

/// One round of `chains(iters, worker, &sink)` on `threads` workers at once: the operations all
/// of them did per second.
template <class Sink, class Chains>
double peak_round(int threads, Chains chains) {
  constexpr std::int64_t kIters = 20'000'000;
  const int n = std::max(threads, 1);
  std::vector<Sink> sinks(static_cast<std::size_t>(n));
  std::vector<double> ops(static_cast<std::size_t>(n));
  const double s = timed_on_threads(n, [&](int t) { ops[t] = chains(kIters, t, &sinks[t]); });
  volatile Sink keep = sinks[0];
  (void)keep;
  double total = 0.0;
  for (double o : ops) total += o;
  return total / s;
}

}  // namespace

double fma_peak_round(int threads) {
  return peak_round<float>(threads, [](std::int64_t iters, int t, float* sink) {
    return HWY_DYNAMIC_DISPATCH(FmaChains)(iters, 1.0f + static_cast<float>(t), sink);
  });
}

double int8_peak_round(int threads) {
  return peak_round<std::int32_t>(threads, [](std::int64_t iters, int t, std::int32_t* sink) {
    return HWY_DYNAMIC_DISPATCH(IntDotChains)(iters, t, sink);
  });
}

double bf16_dot_peak_round(int threads) {
  if (!detail::bf16_dots_enabled()) return 0.0;
  return peak_round<float>(threads, [](std::int64_t iters, int t, float* sink) {
    return HWY_DYNAMIC_DISPATCH(Bf16DotChains)(iters, 1.0f + static_cast<float>(t), sink);
  });
}

double amx_int8_peak_round(int threads) {
  if (!detail::amx_setting_on() || !detail::amx_int8_supported()) return 0.0;
  return peak_round<std::int32_t>(threads, [](std::int64_t iters, int, std::int32_t* sink) {
    *sink = 0;
    return detail::amx_int8_products(iters / 32);
  });
}

double amx_bf16_peak_round(int threads) {
  if (!detail::amx_enabled()) return 0.0;
  return peak_round<float>(threads, [](std::int64_t iters, int, float* sink) {
    *sink = 0.0f;
    return detail::amx_bf16_products(iters / 32);  // about as long as the FMA round
  });
}

}  // namespace fia::bench
#endif  // HWY_ONCE
