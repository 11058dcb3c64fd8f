#include "cpu/amx.hpp"

#include "cpu/env_switch.hpp"
#include "cpu/item_common.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define FIA_AMX_ASM 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace fia::detail {

namespace {

EnvSwitch& amx_switch() {
  static EnvSwitch s("FIA_AMX");
  return s;
}

#ifdef FIA_AMX_ASM

bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  const bool tiles = (d & (1u << 24)) != 0, bf16 = (d & (1u << 22)) != 0;  // AMX-TILE, AMX-BF16
  if (!tiles || !bf16 || __get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 27)) == 0) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  asm("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & (3u << 17)) == (3u << 17);  // XTILECFG and XTILEDATA saved by the OS
}

/// AMX-INT8 (CPUID.(7,0):EDX bit 25) besides amx_bf16_in_cpu().
bool cpu_has_amx_int8() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return amx_bf16_in_cpu() && __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (d & (1u << 25)) != 0;
}

/// Linux grants tile data to a process that asks (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
bool process_may_use_tiles() {
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}

/// Palette 1 with tiles 0-7 of 16 rows x 64 bytes: 0-3 the sums (C: 16 x 16 f32), 4-5 the A
/// operands (K: 16 tokens x 16 pairs of dims; P: 16 rows x 16 pairs of tokens), 6-7 the B ones
/// (the query: 16 pairs of dims x 16 rows; V: 16 pairs of tokens x 16 dims).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

/// How many AmxTileSession objects the calling thread holds.
thread_local int tile_sessions = 0;

// Tile numbers are part of the instructions, so each operation names its tile in the template.
template <int T>
inline void tile_zero() {
  static_assert(T >= 0 && T < 4);
  if constexpr (T == 0) asm volatile("tilezero %%tmm0" ::: "memory");
  if constexpr (T == 1) asm volatile("tilezero %%tmm1" ::: "memory");
  if constexpr (T == 2) asm volatile("tilezero %%tmm2" ::: "memory");
  if constexpr (T == 3) asm volatile("tilezero %%tmm3" ::: "memory");
}

template <int T>
inline void tile_load(const void* base, std::int64_t stride) {
  static_assert(T >= 0 && T < 8);
  if constexpr (T == 0) asm volatile("tileloadd (%0,%1,1), %%tmm0" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 1) asm volatile("tileloadd (%0,%1,1), %%tmm1" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 2) asm volatile("tileloadd (%0,%1,1), %%tmm2" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 3) asm volatile("tileloadd (%0,%1,1), %%tmm3" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 4) asm volatile("tileloadd (%0,%1,1), %%tmm4" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 5) asm volatile("tileloadd (%0,%1,1), %%tmm5" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 6) asm volatile("tileloadd (%0,%1,1), %%tmm6" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 7) asm volatile("tileloadd (%0,%1,1), %%tmm7" : : "r"(base), "r"(stride) : "memory");
}

template <int T>
inline void tile_store(void* base, std::int64_t stride) {
  static_assert(T >= 0 && T < 4);
  if constexpr (T == 0) asm volatile("tilestored %%tmm0, (%0,%1,1)" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 1) asm volatile("tilestored %%tmm1, (%0,%1,1)" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 2) asm volatile("tilestored %%tmm2, (%0,%1,1)" : : "r"(base), "r"(stride) : "memory");
  if constexpr (T == 3) asm volatile("tilestored %%tmm3, (%0,%1,1)" : : "r"(base), "r"(stride) : "memory");
}

/// The products a tile multiply takes: bf16 pairs into f32 sums (tdpbf16ps), or signed int8
/// quads into int32 sums (tdpbssd). Either reads 16 rows of 64 bytes per operand tile.
enum class Dots { kBf16, kInt8 };

/// Sums tile 2i + j += A tile 4 + i (K, or P) times B tile 6 + j (the query, or V).
template <int I, int J, Dots D>
inline void tile_dot() {
  if constexpr (D == Dots::kBf16) {
    if constexpr (I == 0 && J == 0) asm volatile("tdpbf16ps %%tmm6, %%tmm4, %%tmm0" ::: "memory");
    if constexpr (I == 0 && J == 1) asm volatile("tdpbf16ps %%tmm7, %%tmm4, %%tmm1" ::: "memory");
    if constexpr (I == 1 && J == 0) asm volatile("tdpbf16ps %%tmm6, %%tmm5, %%tmm2" ::: "memory");
    if constexpr (I == 1 && J == 1) asm volatile("tdpbf16ps %%tmm7, %%tmm5, %%tmm3" ::: "memory");
  } else {
    if constexpr (I == 0 && J == 0) asm volatile("tdpbssd %%tmm6, %%tmm4, %%tmm0" ::: "memory");
    if constexpr (I == 0 && J == 1) asm volatile("tdpbssd %%tmm7, %%tmm4, %%tmm1" ::: "memory");
    if constexpr (I == 1 && J == 0) asm volatile("tdpbssd %%tmm6, %%tmm5, %%tmm2" ::: "memory");
    if constexpr (I == 1 && J == 1) asm volatile("tdpbssd %%tmm7, %%tmm5, %%tmm3" ::: "memory");
  }
}

// A block of NI x NJ sum tiles (NI, NJ 1 or 2): sum tile 2i + j covers rows 16 i and columns 16 j
// of the block, at c + 16 i * ld + 16 j (f32, ld floats per row); it takes A tile 4 + i times B
// tile 6 + j.
template <int NI, int NJ>
inline void block_zero() {
  tile_zero<0>();
  if constexpr (NJ == 2) tile_zero<1>();
  if constexpr (NI == 2) tile_zero<2>();
  if constexpr (NI == 2 && NJ == 2) tile_zero<3>();
}

template <int NI, int NJ>
inline void block_load(const float* c, std::int64_t ld) {
  tile_load<0>(c, ld * 4);
  if constexpr (NJ == 2) tile_load<1>(c + 16, ld * 4);
  if constexpr (NI == 2) tile_load<2>(c + 16 * ld, ld * 4);
  if constexpr (NI == 2 && NJ == 2) tile_load<3>(c + 16 * ld + 16, ld * 4);
}

template <int NI, int NJ>
inline void block_store(float* c, std::int64_t ld) {
  tile_store<0>(c, ld * 4);
  if constexpr (NJ == 2) tile_store<1>(c + 16, ld * 4);
  if constexpr (NI == 2) tile_store<2>(c + 16 * ld, ld * 4);
  if constexpr (NI == 2 && NJ == 2) tile_store<3>(c + 16 * ld + 16, ld * 4);
}

template <int NI, int NJ, Dots D>
inline void block_dots() {
  tile_dot<0, 0, D>();
  if constexpr (NJ == 2) tile_dot<0, 1, D>();
  if constexpr (NI == 2) tile_dot<1, 0, D>();
  if constexpr (NI == 2 && NJ == 2) tile_dot<1, 1, D>();
}

/// Whose rows amx_key_sums prefetches: with `on`, those of the 32 tokens after the block being
/// summed, of the run's `count` tokens and then of the parts' next rows.
struct KeysAhead {
  bool on = false;
  std::int64_t count = 0;
};

/// Prefetches into L2 the cache line(s) of the 64 bytes at `offset` of token t's row of part k
/// (t past the run: of its next rows; none past those). Always inlined (HWY_INLINE, as the
/// prefetch helpers of cpu/item_common.hpp): GCC dropped the calls of the function otherwise (it
/// has no effect but the prefetch), and with them every prefetch.
HWY_INLINE void prefetch_key_line(const AmxKeyPart& k, std::int64_t t, std::int64_t count, std::int64_t offset) {
  if (t < count) {
    prefetch_row(static_cast<const char*>(k.rows) + t * k.row_bytes + offset, 64);
  } else if (k.next != nullptr && t - count < k.next_count) {
    prefetch_row(static_cast<const char*>(k.next) + (t - count) * k.next_row_bytes + offset, 64);
  }
}

/// The sums of NT x 16 tokens from t0 against NR x 16 query rows from r0, over every part's pairs
/// in order, stored at out + t * ldo + r. With pf.on, each chunk of a part prefetches its share
/// of that part's 64-byte pieces of the 32 rows after the block, in address order: the rows'
/// pieces one after the other, 32 of them per chunk.
template <int NT, int NR, Dots D>
void sums_block(const std::uint32_t* qp, std::int64_t ldq, const AmxKeyPart (&parts)[2], std::int64_t t0,
                std::int64_t r0, const KeysAhead& pf, float* out, std::int64_t ldo) {
  block_zero<NT, NR>();
  for (const AmxKeyPart& k : parts)
    for (std::int64_t c = 0; c < k.pairs; c += 16) {
      if (pf.on) {
        const std::int64_t per_row = k.pairs / 16;  // pieces per row
        for (std::int64_t i = c / 16 * 32; i < (c / 16 + 1) * 32; ++i)
          prefetch_key_line(k, t0 + 16 * NT + i / per_row, pf.count, i % per_row * 64);
      }
      const char* a = static_cast<const char*>(k.rows) + t0 * k.row_bytes + c * 4;
      const std::uint32_t* b = qp + (k.first + c) * ldq + r0;
      tile_load<4>(a, k.row_bytes);
      if constexpr (NT == 2) tile_load<5>(a + 16 * k.row_bytes, k.row_bytes);
      tile_load<6>(b, ldq * 4);
      if constexpr (NR == 2) tile_load<7>(b + 16, ldq * 4);
      block_dots<NT, NR, D>();
    }
  block_store<NT, NR>(out + t0 * ldo + r0, ldo);
}

/// sums_block over every query row for the NT x 16 tokens from t0.
template <int NT, Dots D>
void token_block(const std::uint32_t* qp, std::int64_t ldq, std::int64_t rows, const AmxKeyPart (&parts)[2],
                 std::int64_t t0, const KeysAhead& pf, float* out, std::int64_t ldo) {
  std::int64_t r0 = 0;
  for (; r0 + 32 <= rows; r0 += 32) sums_block<NT, 2, D>(qp, ldq, parts, t0, r0, r0 == 0 ? pf : KeysAhead{}, out, ldo);
  if (r0 < rows) sums_block<NT, 1, D>(qp, ldq, parts, t0, r0, r0 == 0 ? pf : KeysAhead{}, out, ldo);
}

/// The output sums of NR x 16 rows from r0 and ND x 16 dims from d0 (amx_output_sums' layouts):
/// the accumulators loaded, every chunk's pieces added in order, stored back.
template <int NR, int ND, Dots D>
void output_block(const std::uint32_t* pa, std::int64_t pieces, std::int64_t piece_words, const std::uint32_t* vi,
                  std::int64_t vd, std::int64_t chunks, std::int64_t rows, std::int64_t r0, std::int64_t d0, float* acc,
                  std::int64_t ld) {
  float* c = acc + r0 * ld + d0;
  block_load<NR, ND>(c, ld);
  for (std::int64_t kk = 0; kk < chunks; ++kk) {
    const std::uint32_t* b = vi + kk * 16 * vd + d0;
    tile_load<6>(b, vd * 4);
    if constexpr (ND == 2) tile_load<7>(b + 16, vd * 4);
    for (std::int64_t piece = 0; piece < pieces; ++piece) {
      const std::uint32_t* a = pa + piece * piece_words + (kk * rows + r0) * 16;
      tile_load<4>(a, 64);
      if constexpr (NR == 2) tile_load<5>(a + 16 * 16, 64);
      block_dots<NR, ND, D>();
    }
  }
  block_store<NR, ND>(c, ld);
}

/// output_block over every dim for the NR x 16 rows from r0.
template <int NR, Dots D>
void output_rows(const std::uint32_t* pa, std::int64_t pieces, std::int64_t piece_words, const std::uint32_t* vi,
                 std::int64_t vd, std::int64_t chunks, std::int64_t rows, std::int64_t r0, float* acc,
                 std::int64_t ld) {
  std::int64_t d0 = 0;
  for (; d0 + 32 <= vd; d0 += 32) output_block<NR, 2, D>(pa, pieces, piece_words, vi, vd, chunks, rows, r0, d0, acc, ld);
  if (d0 < vd) output_block<NR, 1, D>(pa, pieces, piece_words, vi, vd, chunks, rows, r0, d0, acc, ld);
}

/// The peak probes' work: 4 x `iters` products D on register-resident tiles, every operand tile
/// the 16 rows of 64 bytes at `operand`, into four sum tiles; returns their operations (2 per
/// multiply-add: 32 of them per row pair of bf16 tiles, 64 of int8 ones).
template <Dots D>
double products_on_tiles(const void* operand, std::int64_t iters) {
  const AmxTileSession session;
  tile_load<4>(operand, 64), tile_load<5>(operand, 64), tile_load<6>(operand, 64), tile_load<7>(operand, 64);
  block_zero<2, 2>();
  for (std::int64_t i = 0; i < iters; ++i) block_dots<2, 2, D>();
  return 4.0 * 2.0 * 16 * 16 * (D == Dots::kBf16 ? 32 : 64) * static_cast<double>(iters);
}

/// amx_key_sums' work with the products D; out holds f32 sums (kBf16) or int32 ones (kInt8).
template <Dots D>
void key_sums(const std::uint32_t* qp, std::int64_t ldq, std::int64_t rows, const AmxKeyPart (&parts)[2],
              std::int64_t count, bool prefetch, float* out, std::int64_t ldo) {
  assert(rows % 16 == 0 && rows <= ldq && parts[0].pairs % 16 == 0 && parts[1].pairs % 16 == 0);
  const AmxTileSession session;
  const KeysAhead pf{prefetch, count};
  std::int64_t t = 0;
  for (; t + 32 <= count; t += 32) token_block<2, D>(qp, ldq, rows, parts, t, pf, out, ldo);
  if (t + 16 <= count) token_block<1, D>(qp, ldq, rows, parts, t, pf, out, ldo), t += 16;
  if (t == count) return;
  // The last count - t (< 16) tokens: their K rows copied into 16 zeroed rows, their sums taken
  // there, as a whole tile's, and copied out.
  const std::int64_t n = count - t;
  thread_local std::vector<char> keys;
  thread_local std::vector<float> sums;
  std::int64_t key_bytes = 0;
  for (const AmxKeyPart& k : parts) key_bytes += 16 * k.pairs * 4;
  keys.assign(static_cast<std::size_t>(key_bytes), 0);
  sums.resize(static_cast<std::size_t>(16 * rows));
  AmxKeyPart tail[2];
  char* dst = keys.data();
  for (int i = 0; i < 2; ++i) {
    const AmxKeyPart& k = parts[i];
    tail[i] = {dst, k.pairs * 4, k.pairs, k.first, nullptr, 0, 0};
    for (std::int64_t j = 0; j < n && k.pairs > 0; ++j)
      std::memcpy(dst + j * k.pairs * 4, static_cast<const char*>(k.rows) + (t + j) * k.row_bytes,
                  static_cast<std::size_t>(k.pairs * 4));
    dst += 16 * k.pairs * 4;
  }
  token_block<1, D>(qp, ldq, rows, tail, 0, KeysAhead{}, sums.data(), rows);
  for (std::int64_t j = 0; j < n; ++j)  // bytes: int32 sums too (kInt8)
    std::memcpy(out + (t + j) * ldo, sums.data() + j * rows, static_cast<std::size_t>(rows) * sizeof(float));
}

/// amx_output_sums' work with the products D; acc holds f32 sums (kBf16) or int32 ones (kInt8).
template <Dots D>
void output_sums(const std::uint32_t* pa, std::int64_t pieces, std::int64_t piece_words, const std::uint32_t* vi,
                 std::int64_t vd, std::int64_t chunks, std::int64_t rows, float* acc, std::int64_t ld) {
  assert(vd % 16 == 0 && rows % 16 == 0 && vd <= ld);
  const AmxTileSession session;
  std::int64_t r0 = 0;
  for (; r0 + 32 <= rows; r0 += 32) output_rows<2, D>(pa, pieces, piece_words, vi, vd, chunks, rows, r0, acc, ld);
  if (r0 < rows) output_rows<1, D>(pa, pieces, piece_words, vi, vd, chunks, rows, r0, acc, ld);
}

#endif  // FIA_AMX_ASM

}  // namespace

bool amx_bf16_in_cpu() {
#ifdef FIA_AMX_ASM
  static const bool in_cpu = cpu_has_amx_bf16();
  return in_cpu;
#else
  return false;
#endif
}

bool amx_bf16_supported() {
#ifdef FIA_AMX_ASM
  static const bool supported = amx_bf16_in_cpu() && process_may_use_tiles();
  return supported;
#else
  return false;
#endif
}

bool amx_enabled() { return amx_setting_on() && amx_bf16_supported(); }

bool amx_int8_supported() {
#ifdef FIA_AMX_ASM
  static const bool supported = cpu_has_amx_int8() && amx_bf16_supported();
  return supported;
#else
  return false;
#endif
}

bool amx_setting_on() { return amx_switch().on(true); }

bool amx_setting_valid() { return amx_switch().valid(); }

void set_amx(bool on) { amx_switch().set(on); }

void reset_amx() { amx_switch().reset(); }

AmxTileSession::AmxTileSession() {
#ifdef FIA_AMX_ASM
  static const TileConfig config;
  if (tile_sessions++ == 0) asm volatile("ldtilecfg %0" : : "m"(config));
#endif
}

AmxTileSession::~AmxTileSession() {
#ifdef FIA_AMX_ASM
  if (--tile_sessions == 0) asm volatile("tilerelease" ::: "memory");
#endif
}

void amx_key_sums(const std::uint32_t* qp, std::int64_t ldq, std::int64_t rows, const AmxKeyPart (&parts)[2],
                  std::int64_t count, bool prefetch, float* out, std::int64_t ldo) {
#ifdef FIA_AMX_ASM
  key_sums<Dots::kBf16>(qp, ldq, rows, parts, count, prefetch, out, ldo);
#else
  (void)qp, (void)ldq, (void)rows, (void)parts, (void)count, (void)prefetch, (void)out, (void)ldo;
#endif
}

void amx_output_sums(const std::uint32_t* pa, std::int64_t pieces, std::int64_t piece_words, const std::uint32_t* vi,
                     std::int64_t vd, std::int64_t chunks, std::int64_t rows, float* acc, std::int64_t ld) {
#ifdef FIA_AMX_ASM
  output_sums<Dots::kBf16>(pa, pieces, piece_words, vi, vd, chunks, rows, acc, ld);
#else
  (void)pa, (void)pieces, (void)piece_words, (void)vi, (void)vd, (void)chunks, (void)rows, (void)acc, (void)ld;
#endif
}

void amx_int8_key_sums(const std::int32_t* qq, std::int64_t ldq, std::int64_t rows, const AmxKeyPart& keys,
                       std::int64_t count, std::int32_t* out, std::int64_t ldo) {
#ifdef FIA_AMX_ASM
  const AmxKeyPart parts[2] = {keys, AmxKeyPart{}};
  key_sums<Dots::kInt8>(reinterpret_cast<const std::uint32_t*>(qq), ldq, rows, parts, count, false,
                        reinterpret_cast<float*>(out), ldo);
#else
  (void)qq, (void)ldq, (void)rows, (void)keys, (void)count, (void)out, (void)ldo;
#endif
}

void amx_int8_output_sums(const std::int32_t* pa, const std::int32_t* vq, std::int64_t vd, std::int64_t chunks,
                          std::int64_t rows, std::int32_t* acc, std::int64_t ld) {
#ifdef FIA_AMX_ASM
  output_sums<Dots::kInt8>(reinterpret_cast<const std::uint32_t*>(pa), 1, 0, reinterpret_cast<const std::uint32_t*>(vq),
                           vd, chunks, rows, reinterpret_cast<float*>(acc), ld);
#else
  (void)pa, (void)vq, (void)vd, (void)chunks, (void)rows, (void)acc, (void)ld;
#endif
}

double amx_int8_products(std::int64_t iters) {
#ifdef FIA_AMX_ASM
  if (!amx_int8_supported()) return 0.0;
  std::int8_t operand[16 * 64];  // bytes of both signs and many magnitudes
  for (int i = 0; i < 16 * 64; ++i) operand[i] = static_cast<std::int8_t>((i * 37) % 255 - 127);
  return products_on_tiles<Dots::kInt8>(operand, iters);
#else
  (void)iters;
  return 0.0;
#endif
}

double amx_bf16_products(std::int64_t iters) {
#ifdef FIA_AMX_ASM
  if (!amx_bf16_supported()) return 0.0;
  // Operands of mixed mantissas (and signs within a tile): tiles of zeros ran 2.5x as fast on
  // Emerald Rapids.
  std::uint16_t operand[16 * 32];
  for (int i = 0; i < 16 * 32; ++i)
    operand[i] = static_cast<std::uint16_t>((i % 2 == 0 ? 0x3F00 : 0xBF00) | ((i * 37) & 0x7F));
  return products_on_tiles<Dots::kBf16>(operand, iters);
#else
  (void)iters;
  return 0.0;
#endif
}

}  // namespace fia::detail
