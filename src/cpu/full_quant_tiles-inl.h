// The tiles both int8 full-quant kernels share (cpu/full_quant.cpp, FIA-SPEC 13.1;
// cpu/mla_full_quant.cpp, 13.3), per Highway target: K rows converted to groups, Q·Kᵀ of a K
// tile with rows in lanes, and the exact int32 P·V of a chunk with V's columns in lanes. Included
// after cpu/full_quant_products-inl.h.
#if defined(FIA_CPU_FULL_QUANT_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_FULL_QUANT_TILES_INL_H_
#undef FIA_CPU_FULL_QUANT_TILES_INL_H_
#else
#define FIA_CPU_FULL_QUANT_TILES_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/amx.hpp"
#include "cpu/full_quant_layout.hpp"
#include "cpu/registers-inl.h"
#include "cpu/transpose-inl.h"

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Row vectors per register block and columns per block of qk_block on this target. The rows are
/// in lanes, so the row vectors follow the width: the 32 packed rows are 2 vectors of 16 lanes, or
/// 4 (of 8 or fewer: up to 4 per block). The columns follow the register count: each (row vector,
/// column) product keeps one accumulator on x86 (vpmaddwd, vpdpbusd) and two elsewhere (NEON and
/// SVE widen the low and high halves into separate sums), besides the row vectors and a column:
/// 2 x 6 on AVX-512, 4 x 2 on AVX2, 4 x 3 on NEON and SVE_256, 2 x 6 on SVE.
constexpr int kQkRowVectors = HWY_MAX_BYTES >= 64 ? 2 : 4;
constexpr int kQkAccumulators = HWY_ARCH_X86 ? 1 : 2;
constexpr int kQkColumns =
    std::clamp((kVectorRegisters - kQkRowVectors - 1) / (kQkRowVectors * kQkAccumulators), 1, 6);

/// An int8 row of D values as groups at dst, zero-padded to Dg: G = 2 int16 values (pairs), G = 4
/// bytes offset by 128 (the unsigned operand of byte quads).
template <int G>
HWY_INLINE void convert_key_row(const std::int8_t* row, std::int64_t D, std::int64_t Dg, std::byte* dst_bytes) {
  std::int64_t x = 0;
  if constexpr (G == 2) {
    const hn::ScalableTag<std::int16_t> d16;
    const hn::Rebind<std::int8_t, decltype(d16)> d8;
    const auto step = static_cast<std::int64_t>(hn::Lanes(d16));
    auto* dst = reinterpret_cast<std::int16_t*>(dst_bytes);
    for (; x + step <= D; x += step) hn::StoreU(hn::PromoteTo(d16, hn::LoadU(d8, row + x)), d16, dst + x);
    for (; x < Dg; ++x) dst[x] = x < D ? row[x] : 0;
  } else {
    const hn::ScalableTag<std::uint8_t> d8;
    const auto step = static_cast<std::int64_t>(hn::Lanes(d8));
    auto* dst = reinterpret_cast<std::uint8_t*>(dst_bytes);
    const auto* src = reinterpret_cast<const std::uint8_t*>(row);
    for (; x + step <= D; x += step) hn::StoreU(hn::Xor(hn::LoadU(d8, src + x), hn::Set(d8, 0x80)), d8, dst + x);
    for (; x < Dg; ++x) dst[x] = static_cast<std::uint8_t>((x < D ? src[x] : 0) ^ 0x80);
  }
}

/// Q·Kᵀ of NV row vectors from rv for the n rows of the K tile, into out (column-major, int32).
template <int G, int NV>
HWY_INLINE void qk_rows(const std::int32_t* q, std::int64_t Rp, const std::byte* k, std::int64_t krow,
                        std::int64_t groups, std::int64_t rv, std::int64_t n, std::int32_t* out) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(DI()));
  std::int64_t c = 0;
  for (; c + kQkColumns <= n; c += kQkColumns)
    qk_block<G, NV, kQkColumns>(q + rv * L, Rp, k + c * krow, krow, groups, out + c * Rp + rv * L);
  for (; c < n; ++c) qk_block<G, NV, 1>(q + rv * L, Rp, k + c * krow, krow, groups, out + c * Rp + rv * L);
}

/// Q·Kᵀ of all Rp rows (query groups q[g * Rp + r]) for the n converted K rows at k (krow bytes
/// apart), into out[c * Rp + r] (int32).
template <int G>
HWY_INLINE void qk_tile(const std::int32_t* q, std::int64_t Rp, const std::byte* k, std::int64_t krow,
                        std::int64_t groups, std::int64_t n, std::int32_t* out) {
  const std::int64_t RV = Rp / static_cast<std::int64_t>(hn::Lanes(DI()));
  std::int64_t rv = 0;
  for (; rv + kQkRowVectors <= RV; rv += kQkRowVectors) qk_rows<G, kQkRowVectors>(q, Rp, k, krow, groups, rv, n, out);
  for (; rv < RV; ++rv) qk_rows<G, 1>(q, Rp, k, krow, groups, rv, n, out);
}

/// Per-thread rows of a V tile: fq::kVTile rows of vd bytes that gather_value_rows copies an NZ
/// cache's rows into, then one row of `pad` bytes for the tile's rows past the chunk.
struct ValueTileBuffer {
  std::int8_t* copies;
  const std::int8_t* pad;
};
HWY_INLINE ValueTileBuffer value_tile_buffer(std::int64_t vd, std::int8_t pad) {
  thread_local std::vector<std::int8_t> bytes;
  bytes.resize(static_cast<std::size_t>((fq::kVTile + 1) * vd));
  std::int8_t* pad_row = bytes.data() + fq::kVTile * vd;
  std::fill(pad_row, pad_row + vd, pad);
  return {bytes.data(), pad_row};
}

/// rows[c] = the V row of column c0 + c of item it for c < n (n <= fq::kVTile), buf.pad for the
/// rest of the tile: the rows where they are stored, or copies in buf.copies where an NZ cache's
/// are (each_kv_row hands those out copied, valid until its next run).
HWY_INLINE void gather_value_rows(const Problem& p, const WorkItem& it, std::int64_t c0, std::int64_t n,
                                  const ValueTileBuffer& buf, const std::int8_t** rows) {
  bool tiled = false;
  for_each_run<false>(p, it.b, it.h, c0, n, KvParts::kValues,
                      [&](std::int64_t, const KvRun& run) { tiled = tiled || run.tiled(); });
  std::fill(rows + n, rows + fq::kVTile, buf.pad);
  const auto vd = static_cast<std::size_t>(p.v_dim);
  fq::each_kv_row(p, it, true, c0, n, [&](std::int64_t c, const std::int8_t* row) {
    rows[c] = tiled ? static_cast<const std::int8_t*>(std::memcpy(buf.copies + c * vd, row, vd)) : row;
  });
}

/// One group row of V: dst[d] (d < VD) = the group of rows[0..G)'s elements d (G = 2: int16 pairs;
/// G = 4: bytes, with kOffset offset by 128, bits ^ 0x80, the unsigned operand of pv_chunk's byte
/// quads; without, the signed token quads of pv_chunk_tiles), 0 for d in [VD, VDp). Each word is
/// written once from its G rows: a read-modify-write of one word per row took 19 % of P4's
/// samples (Emerald Rapids without AMX, AVX3, one thread).
template <int G, bool kOffset>
HWY_INLINE void group_value_rows(const std::int8_t* const* rows, std::int64_t VD, std::int64_t VDp, std::int32_t* dst) {
  const DI di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(di));
  std::int64_t d = 0;
  if constexpr (G == 4) {
    const hn::RebindToUnsigned<DI> du;
    const hn::Rebind<std::uint8_t, DI> du8;
    auto byte = [&](int k) {
      return hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(du8, reinterpret_cast<const std::uint8_t*>(rows[k]) + d)));
    };
    const VI offset = hn::Set(di, kOffset ? static_cast<std::int32_t>(0x80808080u) : 0);
    for (; d + L <= VD; d += L) {
      const VI w = hn::Or(hn::Or(byte(0), hn::ShiftLeft<8>(byte(1))), hn::Or(hn::ShiftLeft<16>(byte(2)), hn::ShiftLeft<24>(byte(3))));
      hn::StoreU(hn::Xor(w, offset), di, dst + d);
    }
  } else {
    const hn::Rebind<std::int8_t, DI> d8;
    const VI low = hn::Set(di, 0xFFFF);
    for (; d + L <= VD; d += L) {
      const VI w = hn::Or(hn::And(hn::PromoteTo(di, hn::LoadU(d8, rows[0] + d)), low),
                          hn::ShiftLeft<16>(hn::PromoteTo(di, hn::LoadU(d8, rows[1] + d))));
      hn::StoreU(w, di, dst + d);
    }
  }
  for (; d < VD; ++d) {
    std::uint32_t w = 0;
    for (int k = 0; k < G; ++k)
      w |= ((static_cast<std::uint32_t>(rows[k][d]) ^ (kOffset ? 0x80u : 0u)) & (G == 2 ? 0xFFFFu : 0xFFu)) << (k * 32 / G);
    dst[d] = static_cast<std::int32_t>(w);
  }
  std::fill(dst + VD, dst + VDp, 0);
}

/// The exact int32 P·V of columns [cb, cb + nc) into acc (rows < R, row stride VDp): P groups at
/// pg[(c / G) * Rp + r] (columns relative to cb), V the value rows of the item's batch and KV
/// head, grouped fq::kVTile rows at a time in vbuf ((kVTile / G) x VDp int32). G = 4 leaves V's 128
/// offset in: the caller subtracts 128 times the row's sum of P. Rows past the chunk give words
/// of 0 (pad bytes 0x80 in quads, which the offset makes 0; 0 in pairs), as P is 0 there.
template <int G>
void pv_chunk(const Problem& p, const WorkItem& it, const std::int32_t* pg, std::int64_t Rp, std::int32_t* vbuf,
              std::int32_t* acc, std::int64_t R, std::int64_t VDp, std::int64_t cb, std::int64_t nc) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(DI())), VD = p.v_dim;
  std::fill(acc, acc + R * VDp, 0);
  const ValueTileBuffer buf = value_tile_buffer(VD, G == 4 ? std::int8_t{-128} : std::int8_t{0});
  const std::int8_t* rows[fq::kVTile];
  for (std::int64_t v0 = 0; v0 < nc; v0 += fq::kVTile) {
    const std::int64_t n = std::min(fq::kVTile, nc - v0), groups = (n + G - 1) / G;
    gather_value_rows(p, it, cb + v0, n, buf, rows);
    for (std::int64_t g = 0; g < groups; ++g) group_value_rows<G, G == 4>(rows + G * g, VD, VDp, vbuf + g * VDp);
    for (std::int64_t d0 = 0; d0 < VD; d0 += 4 * L) {
      std::int64_t r = 0;
      for (; r + 2 <= R; r += 2) pv_block<G, 2>(pg + v0 / G * Rp + r, Rp, vbuf + d0, VDp, groups, acc + r * VDp + d0);
      for (; r < R; ++r) pv_block<G, 1>(pg + v0 / G * Rp + r, Rp, vbuf + d0, VDp, groups, acc + r * VDp + d0);
    }
  }
}

#undef FIA_FULL_QUANT_TILES
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX3_ZEN4 || HWY_TARGET == HWY_AVX3_SPR
#define FIA_FULL_QUANT_TILES 1

/// pv_chunk on AMX tiles (tdpbssd, signed bytes: V without the 128 offset): for each tile of 64
/// columns, V's rows in token quads in vbuf (16 x VDp int32: four rows' bytes of a dim widened
/// into one word each, no read-modify-write), the tile's P quads transposed into pa (Rp x 16
/// int32, the tiles' A operand; quads past the chunk 0), and amx_int8_output_sums adding their
/// exact products to acc (all Rp rows, VDp columns: padding rows and columns take zeros or are
/// never read).
inline void pv_chunk_tiles(const Problem& p, const WorkItem& it, const std::int32_t* pg, std::int64_t Rp,
                           std::int32_t* vbuf, std::int32_t* pa, std::int32_t* acc, std::int64_t VDp, std::int64_t cb,
                           std::int64_t nc) {
  const std::int64_t VD = p.v_dim;
  const ValueTileBuffer buf = value_tile_buffer(VD, 0);  // rows past the chunk read zeros
  std::fill(acc, acc + Rp * VDp, 0);
  const std::int8_t* rows[fq::kVTile];
  for (std::int64_t v0 = 0; v0 < nc; v0 += fq::kVTile) {
    const std::int64_t n = std::min(fq::kVTile, nc - v0), quads = (n + 3) / 4;
    gather_value_rows(p, it, cb + v0, n, buf, rows);
    for (std::int64_t k = 0; k < quads; ++k) group_value_rows<4, false>(rows + 4 * k, VD, VDp, vbuf + k * VDp);
    const std::int32_t* q = pg + v0 / 4 * Rp;  // the tile's quads, quad j of row r at q[j * Rp + r]
    if (quads == 16) {
      for (std::int64_t r = 0; r < Rp; r += 8)
        for (std::int64_t j = 0; j < 16; j += 8)
          transpose_8x8(reinterpret_cast<const float*>(q + j * Rp + r), Rp, reinterpret_cast<float*>(pa + r * 16 + j), 16);
    } else {
      for (std::int64_t r = 0; r < Rp; ++r)
        for (std::int64_t j = 0; j < 16; ++j) pa[r * 16 + j] = j < quads ? q[j * Rp + r] : 0;
    }
    amx_int8_output_sums(pa, vbuf, VDp, 1, Rp, acc, VDp);
  }
}
#endif  // FIA_FULL_QUANT_TILES

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_FULL_QUANT_TILES_INL_H_
