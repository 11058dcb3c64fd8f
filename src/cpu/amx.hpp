// Intel AMX tiles for Q·Kᵀ and P·V of bf16 wide items: prefill, and decode of 16 rows (tdpbf16ps:
// 16 x 16 f32 sums of 32 bf16 products per instruction; measured 1.0-2.4 TFLOP/s on one Emerald
// Rapids core, varying run to run, against about 150 GFLOP/s of fp32 FMAs). x86-64 Linux with gcc
// or clang only; elsewhere amx_bf16_supported() is false and nothing calls amx_key_sums or
// amx_output_sums.
#pragma once

#include <cstdint>

namespace fia::detail {

/// True when the CPU has AMX tiles with bf16 products (CPUID AMX-TILE and AMX-BF16, the OS
/// saving tile state in XCR0), whether or not Linux grants them to this process.
bool amx_bf16_in_cpu();

/// True when amx_bf16_in_cpu() and Linux lets this process use the tiles: asked once, on the first
/// call, for the whole process (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA; Linux 5.16 or
/// later). Once granted, every signal alternate stack of the process must hold the larger signal
/// frame (sigaltstack with a smaller size fails), so nothing asks before a plan could take them.
bool amx_bf16_supported();

/// True when plans take the tiles where they apply (cpu/prefill_dots-inl.h; plan() reads it into
/// Problem::amx for bf16 query and K rows only): the setting asks for them (by default yes;
/// FIA_AMX=0 forbids them, FIA_AMX=1 is the default said out loud; set_amx overrides both), and
/// then amx_bf16_supported().
bool amx_enabled();

/// True when the CPU has AMX-INT8 too (CPUID AMX-INT8) and amx_bf16_supported(). The int8
/// full-quant prefill (cpu/full_quant.cpp) takes the tiles where this and amx_setting_on() hold.
bool amx_int8_supported();

/// True unless the setting forbids the tiles (FIA_AMX=0, set_amx(false)); asks Linux nothing.
bool amx_setting_on();

/// False when FIA_AMX, as last read (on the first use of the setting or by reset_amx), is neither
/// unset, empty, 0 nor 1: plan() then fails with kInvalidArgument naming FIA_AMX.
bool amx_setting_valid();

/// Asks for (true) or forbids (false) the tiles in plans made from now on; for tests and
/// benchmarks.
void set_amx(bool on);

/// Returns to the default setting: FIA_AMX, else on.
void reset_amx();

/// Holds the tiles configured on the calling thread for its lifetime (ldtilecfg; tilerelease at
/// the end, so that the thread carries no tile state past it); nested sessions do nothing, so a
/// caller may hold one around many amx_key_sums calls (each takes one of its own) and pay the
/// configuration (about 150 ns) once. Only where amx_bf16_supported().
class AmxTileSession {
 public:
  AmxTileSession();
  ~AmxTileSession();
  AmxTileSession(const AmxTileSession&) = delete;
  AmxTileSession& operator=(const AmxTileSession&) = delete;
};

/// One operand part of amx_key_sums: the K rows of the tokens (token t's at rows + t * row_bytes
/// bytes, bf16), `pairs` pairs of dims (a multiple of 16) from the row's start, which meet the
/// query's pairs from pair `first`. A part of 0 pairs is skipped (rows may be null). For
/// prefetching only: the same part of the next run's rows (a paged cache's next block), token t's
/// at next + t * next_row_bytes for t < next_count (null: none).
struct AmxKeyPart {
  const void* rows = nullptr;
  std::int64_t row_bytes = 0, pairs = 0, first = 0;
  const void* next = nullptr;
  std::int64_t next_row_bytes = 0, next_count = 0;
};

/// out[t * ldo + r] = the sum of the bf16 products of query row r with token t over the parts'
/// dims, for t < count and r < rows (a multiple of 16, at most ldq): qp holds query row r's pair
/// k (dim 2k in the low half) at qp[k * ldq + r]. The sum runs over chunks of 16 pairs, the parts
/// and their chunks in order, each chunk added by one tdpbf16ps (which multiplies exactly, adds in
/// fp32 in its own order within the chunk, reads subnormal inputs as 0 and flushes subnormal
/// sums to 0, as vdpbf16ps does: cpu/bf16_dots-inl.h; query_pairs and bf16_query_pairs keep the
/// queries for which that could matter off both). A sum depends on its row and token alone, not
/// on where the token lies in `count` nor on count itself (the last count % 16 tokens go through
/// a zero-padded tile of their own). With `prefetch`, each block of 32 tokens prefetches the rows of the next block
/// (into the parts' next rows) into L2 as it goes, in address order. FIA-SPEC 5 steps 1-2. Call
/// only where amx_bf16_supported().
void amx_key_sums(const std::uint32_t* qp, std::int64_t ldq, std::int64_t rows, const AmxKeyPart (&parts)[2],
                  std::int64_t count, bool prefetch, float* out, std::int64_t ldo);

/// P·V on AMX tiles: acc[r * ld + d] += the sum, over chunks of 32 tokens kk in order and within
/// each over the pieces in order, of the bf16 products of P's row r with V's dim d, for r < rows
/// and d < vd (both multiples of 16, vd <= ld). pa holds the pieces of P, piece i's pair j of
/// chunk kk for row r (tokens 32 kk + 2j in the low half and 32 kk + 2j + 1) at pa[i *
/// piece_words + (kk * rows + r) * 16 + j]; vi holds V's rows interleaved in token pairs, word
/// vi[k * vd + d] dim d of tokens 2k (low half) and 2k + 1. tdpbf16ps: exact products, fp32 sums
/// in the instruction's order within a chunk, subnormal inputs read as 0: the caller keeps such
/// P and non-finite V off it. An element's sum depends on its own P row and V dim alone. Call
/// only where amx_bf16_supported().
void amx_output_sums(const std::uint32_t* pa, std::int64_t pieces, std::int64_t piece_words, const std::uint32_t* vi,
                     std::int64_t vd, std::int64_t chunks, std::int64_t rows, float* acc, std::int64_t ld);

/// amx_key_sums of int8 rows (tdpbssd): out[t * ldo + r] = the exact int32 dot product of query
/// row r with token t's K row over keys.pairs quads of dims (4 signed bytes each, a multiple of
/// 16), for t < count and r < rows (a multiple of 16, at most ldq): qq holds query row r's quad k
/// (dim 4k in the low byte) at qq[k * ldq + r]; K rows are read where they are stored (keys.rows,
/// keys.row_bytes apart; keys.first: the quad qq starts from, 0 for whole rows), the last count %
/// 16 through a zero-padded tile. The prefetch fields are ignored. FIA-SPEC 13.1 ("exact integer matmul"). Call only where
/// amx_int8_supported().
void amx_int8_key_sums(const std::int32_t* qq, std::int64_t ldq, std::int64_t rows, const AmxKeyPart& keys,
                       std::int64_t count, std::int32_t* out, std::int64_t ldo);

/// amx_output_sums of int8 P and V (tdpbssd, one piece): acc[r * ld + d] += the exact int32 sum
/// over the chunks' tokens of P[r][t] * V[t][d], for r < rows and d < vd (both multiples of 16,
/// vd <= ld). pa holds P's quads, chunk kk's quad j for row r (tokens 64 kk + 4j .. + 3, the first
/// in the low byte) at pa[(kk * rows + r) * 16 + j]; vq holds V's rows in token quads, word
/// vq[k * vd + d] dim d of tokens 4k .. 4k + 3. FIA-SPEC 13.1. Call only where
/// amx_int8_supported().
void amx_int8_output_sums(const std::int32_t* pa, const std::int32_t* vq, std::int64_t vd, std::int64_t chunks,
                          std::int64_t rows, std::int32_t* acc, std::int64_t ld);

/// For fia bench's AMX-INT8 peak probe: 4 x `iters` tdpbssd on register-resident tiles (bytes of
/// both signs and many magnitudes), on the calling thread; returns their operations (2 per
/// multiply-add), 0 where !amx_int8_supported().
double amx_int8_products(std::int64_t iters);

/// For fia bench's AMX peak probe: 4 x `iters` tdpbf16ps on register-resident tiles (two K and
/// two query tiles of bf16 values of mixed signs and mantissas, loaded once, into four sums), on
/// the calling thread; returns their FLOPs (2 per multiply-add), 0 where !amx_bf16_supported().
double amx_bf16_products(std::int64_t iters);

}  // namespace fia::detail
