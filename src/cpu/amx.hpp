// Intel AMX tiles for Q·Kᵀ of bf16 prefill (tdpbf16ps: 16 x 16 f32 sums of 32 bf16 products per
// instruction, 1 TFLOP/s per core on Emerald Rapids against 150 GFLOP/s of fp32 FMAs). x86-64
// Linux with gcc or clang only; elsewhere amx_bf16_supported() is false and nothing calls
// amx_key_sums.
#pragma once

#include <cstdint>

namespace fia::detail {

/// True when the CPU has AMX tiles with bf16 products (CPUID AMX-TILE and AMX-BF16, the OS
/// saving tile state in XCR0) and Linux lets this process use them (arch_prctl
/// ARCH_REQ_XCOMP_PERM for XTILEDATA, asked once, for the whole process).
bool amx_bf16_supported();

/// True when plans take the tiles where they apply (cpu/prefill_dots-inl.h; plan() reads it into
/// Problem::amx): amx_bf16_supported(), and the setting asks for them: by default yes;
/// FIA_AMX=0 forbids them, FIA_AMX=1 is the default said out loud; set_amx overrides both.
bool amx_enabled();

/// False when FIA_AMX, as last read (at start-up or by reset_amx), is neither unset, empty, 0
/// nor 1: plan() then fails with kInvalidArgument naming FIA_AMX.
bool amx_setting_valid();

/// Asks for (true) or forbids (false) the tiles in plans made from now on; for tests and
/// benchmarks.
void set_amx(bool on);

/// Returns to the default setting: FIA_AMX, else on.
void reset_amx();

/// One operand part of amx_key_sums: the K rows of the tokens (token t's at rows + t * row_bytes
/// bytes, bf16), `pairs` pairs of dims (a multiple of 16) from the row's start, which meet the
/// query's pairs from pair `first`.
struct AmxKeyPart {
  const void* rows = nullptr;
  std::int64_t row_bytes = 0, pairs = 0, first = 0;
};

/// out[t * ldo + r] = the sum over the parts in order, and over their pairs k in order in chunks
/// of 16 pairs, of the bf16 products of query row r's pair with token t's, for t < count and
/// r < rows (a multiple of 16): qp holds query row r's pair k (dim 2k in the low half) at
/// qp[k * ldq + r]. tdpbf16ps multiplies exactly and adds in fp32, reading subnormal inputs as 0
/// and flushing subnormal sums to 0, as vdpbf16ps does (cpu/bf16_dots-inl.h; query_pairs keeps the
/// queries for which that could matter off both). A sum depends on its row and token alone, not
/// on where the token lies in `count` nor on count itself. Call only where amx_bf16_supported().
void amx_key_sums(const std::uint32_t* qp, std::int64_t ldq, std::int64_t rows, const AmxKeyPart (&parts)[2],
                  std::int64_t count, float* out, std::int64_t ldo);

/// For fia bench's AMX peak probe: 4 x `iters` tdpbf16ps on register-resident tiles (two K and
/// two query tiles of zeros into four sums, no loads), on the calling thread; returns their FLOPs
/// (2 per multiply-add), 0 where !amx_bf16_supported().
double amx_bf16_products(std::int64_t iters);

}  // namespace fia::detail
