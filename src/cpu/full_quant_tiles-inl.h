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

/// The exact int32 P·V of columns [cb, cb + nc) into acc (rows < R, row stride VDp): P groups at
/// pg[(c / G) * Rp + r] (columns relative to cb), V the value rows of the item's batch and KV
/// head, grouped fq::kVTile rows at a time in vbuf ((kVTile / G) x VDp int32). G = 4 leaves V's 128
/// offset in: the caller subtracts 128 times the row's sum of P.
template <int G>
void pv_chunk(const Problem& p, const WorkItem& it, const std::int32_t* pg, std::int64_t Rp, std::int32_t* vbuf,
              std::int32_t* acc, std::int64_t R, std::int64_t VDp, std::int64_t cb, std::int64_t nc) {
  const DI di;
  const hn::Rebind<std::int8_t, DI> d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(di)), VD = p.v_dim;
  std::fill(acc, acc + R * VDp, 0);
  const VI mask = hn::Set(di, G == 2 ? 0xFFFF : 0xFF), flip = hn::Set(di, G == 2 ? 0 : 0x80);
  for (std::int64_t v0 = 0; v0 < nc; v0 += fq::kVTile) {
    const std::int64_t n = std::min(fq::kVTile, nc - v0), groups = (n + G - 1) / G;
    std::fill(vbuf, vbuf + groups * VDp, 0);
    fq::each_kv_row(p, it, true, cb + v0, n, [&](std::int64_t c, const std::int8_t* row) {
      std::int32_t* dst = vbuf + (c / G) * VDp;
      const int shift = static_cast<int>(c % G) * 32 / G;
      std::int64_t d = 0;
      for (; d + L <= VD; d += L) {
        const VI x = hn::And(hn::Xor(hn::PromoteTo(di, hn::LoadU(d8, row + d)), flip), mask);
        hn::StoreU(hn::Or(hn::LoadU(di, dst + d), hn::ShiftLeftSame(x, shift)), di, dst + d);
      }
      for (; d < VD; ++d) {
        const auto x = (static_cast<std::uint32_t>(row[d]) ^ (G == 2 ? 0u : 0x80u)) & (G == 2 ? 0xFFFFu : 0xFFu);
        dst[d] = static_cast<std::int32_t>(static_cast<std::uint32_t>(dst[d]) | (x << shift));
      }
    });
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
  const hn::ScalableTag<std::uint32_t> du;
  const hn::Rebind<std::uint8_t, decltype(du)> d8;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(du)), VD = p.v_dim;
  // The tile's V rows where they are stored, or copied where an NZ cache's are (each_kv_row hands
  // them out copied, valid until its next run); rows past the chunk read zeros.
  thread_local std::vector<std::int8_t> copies;
  copies.resize(static_cast<std::size_t>((fq::kVTile + 1) * VD));
  std::int8_t* zeros = copies.data() + fq::kVTile * VD;  // the row past the last copy
  std::fill(zeros, zeros + VD, std::int8_t{0});
  std::fill(acc, acc + Rp * VDp, 0);
  const std::int8_t* rows[fq::kVTile];
  for (std::int64_t v0 = 0; v0 < nc; v0 += fq::kVTile) {
    const std::int64_t n = std::min(fq::kVTile, nc - v0), quads = (n + 3) / 4;
    bool tiled = false;
    for_each_run<false>(p, it.b, it.h, cb + v0, n, KvParts::kValues,
                        [&](std::int64_t, const KvRun& run) { tiled = tiled || run.tiled(); });
    std::fill(rows + n, rows + fq::kVTile, zeros);
    fq::each_kv_row(p, it, true, cb + v0, n, [&](std::int64_t c, const std::int8_t* row) {
      if (tiled) rows[c] = static_cast<const std::int8_t*>(std::memcpy(copies.data() + c * VD, row, static_cast<std::size_t>(VD)));
      else rows[c] = row;
    });
    for (std::int64_t k = 0; k < quads; ++k) {
      const auto* r0 = reinterpret_cast<const std::uint8_t*>(rows[4 * k]);
      const auto* r1 = reinterpret_cast<const std::uint8_t*>(rows[4 * k + 1]);
      const auto* r2 = reinterpret_cast<const std::uint8_t*>(rows[4 * k + 2]);
      const auto* r3 = reinterpret_cast<const std::uint8_t*>(rows[4 * k + 3]);
      auto* dst = reinterpret_cast<std::uint32_t*>(vbuf + k * VDp);
      for (std::int64_t d = 0; d < VD; d += L) {
        const auto w01 = hn::Or(hn::PromoteTo(du, hn::LoadU(d8, r0 + d)), hn::ShiftLeft<8>(hn::PromoteTo(du, hn::LoadU(d8, r1 + d))));
        const auto w23 = hn::Or(hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d8, r2 + d))),
                                hn::ShiftLeft<24>(hn::PromoteTo(du, hn::LoadU(d8, r3 + d))));
        hn::StoreU(hn::Or(w01, w23), du, dst + d);
      }
      std::fill(dst + VD, dst + VDp, 0u);
    }
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
