// Narrow items' Q·Kᵀ (decode): dot products of a few query rows against the K rows of a run, widened
// (or dequantized) in registers, as cpu/decode_rows-inl.h walks them; cpu/decode-inl.h calls
// run_dots. Included per Highway target by cpu/attention_item.cpp (the toggle guard below lets
// foreach_target re-include it once per target).
#if defined(FIA_CPU_DECODE_DOTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_DECODE_DOTS_INL_H_
#undef FIA_CPU_DECODE_DOTS_INL_H_
#else
#define FIA_CPU_DECODE_DOTS_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Dot products of ROWS query rows (stride kw) with the K rows of NT consecutive tokens (token j
/// at k + j * ks) over n elements, stored to out[r * os + j] (added to it with kAdd: the rope
/// part), prefetching the lines of `spread` over its vector steps. Each (row, token) sum runs in its
/// own lanes over the vectors of the row and is then reduced by sum4, so the bits of a token's
/// scores do not depend on NT. Stored, not zeroed and then added, and without the scalar tail's
/// loops when n is a whole number of vectors: that epilogue had taken 28 % of the 3-token step's
/// samples (Zen 4, AVX2, L2-resident D1-like walk: 0.91x the time per token; cold D1 0.917x, D2
/// 0.919x, faster in 6 and 7 of 8 pairs).
/// NT = 3 keeps 12 accumulators in flight, more than a multiply-add's latency times the two ports
/// (8): with 2 tokens the loop waits on the latency (a standalone copy of the loop on Zen 4, AVX2,
/// 4 rows, head dim 128: 43.5 cycles per token with 2, 37.5 with 3, 32 for the multiply-adds
/// alone; D2 0.933x the time, faster in 12 of 16 alternating pairs).
template <class Src, int ROWS, int NT, bool kAdd>
HWY_INLINE void dots(DF df, const float* q, std::int64_t kw, const typename Src::T* k, std::int64_t ks, std::int64_t n,
                     float* out, std::int64_t os, SpreadLines spread = {}) {
  static_assert(NT >= 1 && NT <= 3, "one to three tokens");
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const typename Src::T* k0 = k;
  const typename Src::T* k1 = k + (NT > 1 ? ks : 0);
  const typename Src::T* k2 = k + (NT > 2 ? 2 * ks : 0);
  VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;  // token 0, rows 0-3
  VF b0 = a0, b1 = a0, b2 = a0, b3 = a0;            // token 1
  VF c0 = a0, c1 = a0, c2 = a0, c3 = a0;            // token 2
  std::int64_t d = 0;
  spread.over(n / L);
  for (; d + L <= n; d += L) {
    spread.step();
    const VF x0 = Src::load(df, k0, d);
    const VF x1 = NT > 1 ? Src::load(df, k1, d) : x0;
    const VF x2 = NT > 2 ? Src::load(df, k2, d) : x0;
#define FIA_DOTS_ROW(r)                                        \
  if constexpr (ROWS > r) {                                    \
    VF qv = hn::LoadU(df, q + r * kw + d);                     \
    keep_in_register(qv); /* one load per query vector */     \
    a##r = hn::MulAdd(qv, x0, a##r);                           \
    if constexpr (NT > 1) b##r = hn::MulAdd(qv, x1, b##r);     \
    if constexpr (NT > 2) c##r = hn::MulAdd(qv, x2, c##r);     \
  }
    FIA_DOTS_ROW(0) FIA_DOTS_ROW(1) FIA_DOTS_ROW(2) FIA_DOTS_ROW(3)
#undef FIA_DOTS_ROW
  }
  spread.rest();
  float sums[3][4];
  sum4(df, a0, a1, a2, a3, sums[0]);
  if constexpr (NT > 1) sum4(df, b0, b1, b2, b3, sums[1]);
  if constexpr (NT > 2) sum4(df, c0, c1, c2, c3, sums[2]);
  if (d < n) {  // rows that are not a whole number of vectors
    const typename Src::T* rows[3] = {k0, k1, k2};
    for (int r = 0; r < ROWS; ++r)
      for (int j = 0; j < NT; ++j)
        for (std::int64_t e = d; e < n; ++e) sums[j][r] += q[r * kw + e] * Src::one(rows[j], e);
  }
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < NT; ++j) out[r * os + j] = kAdd ? out[r * os + j] + sums[j][r] : sums[j][r];
}

/// What dots<Src, 1, NT, kAdd> computes, for 8 tokens of one query row (MHA decode, targets
/// without dots4): one accumulator per token, so that 8 chains of multiply-adds are in flight
/// where the 2-token step had 2 (its loop waited on the latency), and one sum4 per 4 tokens instead of one
/// per token over three zero vectors. sum4 reduces each of its vectors by the same tree whatever
/// the others hold, and a token's vectors are added in the same order, so a token's score has the
/// same bits as in dots (the outputs of MHA decode calls compared byte for byte on AVX2, SSE4 and
/// scalar). In-process A/B (Emerald Rapids VM, AVX2, 2 threads): cold D4 0.957x the time (faster
/// in 14 of 16 alternating pairs), with K and V in L3 0.852x (10 of 10).
template <class Src, bool kAdd>
HWY_INLINE void row_dots(DF df, const float* q, const typename Src::T* k, std::int64_t ks, std::int64_t n, float* out,
                         SpreadLines spread = {}) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  VF a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  std::int64_t d = 0;
  spread.over(n / L);
  for (; d + L <= n; d += L) {
    spread.step();
    VF qv = hn::LoadU(df, q + d);
    keep_in_register(qv);
    a0 = hn::MulAdd(qv, Src::load(df, k, d), a0);
    a1 = hn::MulAdd(qv, Src::load(df, k + ks, d), a1);
    a2 = hn::MulAdd(qv, Src::load(df, k + 2 * ks, d), a2);
    a3 = hn::MulAdd(qv, Src::load(df, k + 3 * ks, d), a3);
    a4 = hn::MulAdd(qv, Src::load(df, k + 4 * ks, d), a4);
    a5 = hn::MulAdd(qv, Src::load(df, k + 5 * ks, d), a5);
    a6 = hn::MulAdd(qv, Src::load(df, k + 6 * ks, d), a6);
    a7 = hn::MulAdd(qv, Src::load(df, k + 7 * ks, d), a7);
  }
  spread.rest();
  float sums[8];
  sum4(df, a0, a1, a2, a3, sums);
  sum4(df, a4, a5, a6, a7, sums + 4);
  for (int j = 0; j < 8; ++j) {
    for (std::int64_t e = d; e < n; ++e) sums[j] += q[e] * Src::one(k + j * ks, e);
    out[j] = kAdd ? out[j] + sums[j] : sums[j];
  }
}

/// Raw dot products (with the rope part) of ROWS rows against the tokens of one run, for each KV
/// head of `hs` (the run's K rows, the query rows q, the scores out and the prefetches stepping
/// from head to head): one call per block of the interleaved-head walk instead of one per head.
/// In L2 on Zen 4, a D1-like walk over BSH rows took 0.94x the time per token and KV head on
/// AVX2 (86 instead of 91.5 ticks; BNSD rows: 83) and 0.97x on AVX3 (84.5 instead of 87.5).
template <class Src, int ROWS>
void run_dots(DF df, const Problem& p, const float* q, std::int64_t kw, const KvRun& run, float* out, std::int64_t os,
              const Prefetch& pf, const HeadSteps& hs) {
  for (std::int64_t hk = 0; hk < hs.count; ++hk) {
    const float* qh = q + hk * hs.rows * kw;
    float* oh = out + hk * hs.rows * os;
    const Prefetch ph = hs.for_head(pf, hk);
#ifdef FIA_DOTS4
    const KvRun rh = hk == 0 ? run : run.sub(0, run.count, hk, dtype_size(p.kv_dtype));
    std::int64_t t0 = 0;
#ifdef FIA_SUM16
    // One row (MHA): 16 tokens a call, one tree for 16 scores instead of four trees over mostly
    // zeros (D4's geometry in L2, one thread: 0.84x the time; cold D4 0.976-0.996x, faster in
    // 10-16 of 16-20 alternating pairs; Emerald Rapids). Rows of floats, whose prefetches are
    // spread over the call (64 lines at once had made it slower cold: 1.03-1.05x, Zen 4).
    if constexpr (ROWS == 1 && FloatRowSource<Src>)
      for (; t0 + 16 <= rh.count; t0 += 16)
        dots16_store<Src>(df, p, qh, rh, t0, oh + t0, row_prefetches<Src>(ph, t0, 16));
#endif
    for (std::int64_t t = t0; t < rh.count; t += 4)
      dots4_store<Src, ROWS>(df, p, qh, kw, rh, t, std::min<std::int64_t>(4, rh.count - t), oh + t, os,
                             row_prefetches<Src>(ph, t, 4));
#else
    using T = typename Src::T;
    const T* k = static_cast<const T*>(run.key) + hk * run.key_head_stride;
    const T* kr = run.key_rope ? static_cast<const T*>(run.key_rope) + hk * run.rope_head_stride : nullptr;
    auto tokens = [&](std::int64_t t, auto nt) {
      constexpr int NT = decltype(nt)::value;
      dots<Src, ROWS, NT, false>(df, qh, kw, k + t * run.key_stride, run.key_stride, p.qk_dim, oh + t, os,
                                 row_prefetches<Src>(ph, t, NT));
      if (p.rope_dim > 0)
        dots<Src, ROWS, NT, true>(df, qh + p.qk_dim, kw, kr + t * run.rope_stride, run.rope_stride, p.rope_dim, oh + t, os);
    };
    // Three tokens at a time for 3-4 rows of float K (12 accumulators; the L2-resident D1 walk
    // 0.94x the time in fp16, 0.96x in bf16). Two for two rows (MHA's walk took 1.035x with three:
    // there the reductions weigh, not the latency), for the last tokens of one row, and for
    // int8/int4 K converted in registers (D3's walk 1.14x, D5's 1.09x with three).
    std::int64_t t = 0;
    if constexpr (ROWS == 1 && FloatRowSource<Src>) {  // one row of float K: 8 tokens a step, row_dots
      for (; t + 8 <= run.count; t += 8) {
        row_dots<Src, false>(df, qh, k + t * run.key_stride, run.key_stride, p.qk_dim, oh + t,
                             row_prefetches<Src>(ph, t, 8));
        if (p.rope_dim > 0)
          row_dots<Src, true>(df, qh + p.qk_dim, kr + t * run.rope_stride, run.rope_stride, p.rope_dim, oh + t);
      }
    }
    constexpr bool kThree = ROWS >= 3 && FloatRowSource<Src>;
    constexpr int kStep = kThree ? 3 : 2;
    for (; t + kStep <= run.count; t += kStep) tokens(t, std::integral_constant<int, kStep>());
    if (run.count - t == 2) tokens(t, std::integral_constant<int, 2>());
    if (run.count - t == 1) tokens(t, std::integral_constant<int, 1>());
#endif
  }
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_DECODE_DOTS_INL_H_
