// P per code path (FIA-SPEC 25.3) for the rules other than "round E to the query dtype", which the
// kernels apply tile by tile (p_rounding-inl.h): the split-fuse running max over 512-key tiles
// (21.6) and IncreFlashAttention's normalise-then-round. These rewrite an item's scores into P in
// one pass before its P·V. Included per Highway target by cpu/attention_item.cpp (the toggle
// guard below lets foreach_target re-include it once per target).
#if defined(FIA_CPU_P_RULES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FIA_CPU_P_RULES_INL_H_
#undef FIA_CPU_P_RULES_INL_H_
#else
#define FIA_CPU_P_RULES_INL_H_
#endif

HWY_BEFORE_NAMESPACE();
namespace fia::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

/// Calls v = op(v) on the n values at x, a vector at a time; lanes past n are computed on a copy
/// filled with `fill` and never written back.
template <class Op>
HWY_INLINE void map_row(DF df, float* x, std::int64_t n, float fill, Op op) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t c = 0;
  for (; c + L <= n; c += L) hn::StoreU(op(hn::LoadU(df, x + c)), df, x + c);
  if (c == n) return;
  HWY_ALIGN float tmp[HWY_MAX_BYTES / sizeof(float)];
  for (std::int64_t k = 0; k < L; ++k) tmp[k] = c + k < n ? x[c + k] : fill;
  hn::Store(op(hn::Load(df, tmp)), df, tmp);
  for (std::int64_t k = 0; c + k < n; ++k) x[c + k] = tmp[k];
}

/// The max of the n values at x (-inf when n = 0).
HWY_INLINE float row_max(DF df, float* x, std::int64_t n) {
  VF mx = hn::Set(df, kNegInf);
  map_row(df, x, n, kNegInf, [&](VF v) {
    mx = hn::Max(mx, v);
    return v;
  });
  return hn::GetLane(hn::MaxOfLanes(df, mx));
}

/// exp(v - base) where base is finite, else 0 (a row or tile that sees nothing).
HWY_INLINE VF exp_from(DF df, VF v, VF base) {
  const auto live = hn::Gt(base, hn::Set(df, kNegInf));
  return hn::IfThenElseZero(live, softmax_exp(df, hn::Sub(v, hn::IfThenElseZero(live, base))));
}

/// The grid tiles of rule.tile_cols keys (from logical column 0) met by columns [begin, end):
/// fn(first, count) for each, clipped to the range.
template <class Fn>
HWY_INLINE void for_each_grid_tile(const PRule& rule, std::int64_t begin, std::int64_t end, Fn fn) {
  for (std::int64_t t = begin / rule.tile_cols * rule.tile_cols; t < end; t += rule.tile_cols) {
    const std::int64_t a = std::max(t, begin), e = std::min(t + rule.tile_cols, end);
    fn(a, e - a);
  }
}

/// Row-major scores (narrow items): rewrites them into P and sets l[r] = sum of exp(S - m) for the
/// rules kRunningMax and kNormalizeFirst. Returns false (and does nothing) for kRoundE.
HWY_INLINE bool form_p_rows(DF df, const Problem& p, const WorkItem& it, ScoreView sv, const RowStats& rs, float* l) {
  const PRule& rule = p.p_rule;
  if (rule.kind == PRule::Kind::kRoundE) return false;
  const std::int64_t R = packed_rows(it), cols = it.col_end - it.col_begin;
  for (std::int64_t r = 0; r < R; ++r) {
    float* row = sv.base + r * sv.row_stride;
    const float m = rs.max[r];
    l[r] = 0.0f;
    if (m == kNegInf) {
      std::fill(row, row + cols, 0.0f);
      continue;
    }
    if (rule.kind == PRule::Kind::kNormalizeFirst) {
      VF sum = hn::Zero(df);
      const VF vm = hn::Set(df, m);
      float norm = 0.0f;
      if (rs.norm != nullptr) {
        norm = rs.norm[r];
      } else {  // self-contained: the row's own sum first
        map_row(df, row, cols, kNegInf, [&](VF v) {
          const VF e = softmax_exp(df, hn::Sub(v, vm));
          sum = hn::Add(sum, e);
          return v;
        });
        norm = row_norm(p, it.query_head(p.group, r), m, hn::GetLane(hn::SumOfLanes(df, sum)));
        sum = hn::Zero(df);
      }
      const VF vn = hn::Set(df, norm);
      map_row(df, row, cols, kNegInf, [&](VF v) {
        const VF e = softmax_exp(df, hn::Sub(v, vm));
        sum = hn::Add(sum, e);
        return round_p(df, hn::Mul(e, vn), rule.round_to);
      });
      l[r] = hn::GetLane(hn::SumOfLanes(df, sum));
      continue;
    }
    float running = rs.entering[r];
    for_each_grid_tile(rule, it.col_begin, it.col_end, [&](std::int64_t a, std::int64_t n) {
      float* x = row + (a - it.col_begin);
      running = std::max(running, row_max(df, x, n));
      const VF base = hn::Set(df, running);
      const VF f = hn::Set(df, running == kNegInf ? 0.0f : std::exp(running - m));
      VF sum = hn::Zero(df);
      map_row(df, x, n, kNegInf, [&](VF v) {
        const VF e = exp_from(df, v, base);
        sum = hn::Add(sum, e);
        return hn::Mul(round_p(df, e, rule.round_to), f);
      });
      l[r] += hn::GetLane(hn::SumOfLanes(df, hn::Mul(sum, f)));
    });
  }
  return true;
}

/// Column-major scores (wide items, element (r, c) at base[r + c * col_stride], Rp rows): as
/// form_p_rows, with the rows in vector lanes.
HWY_INLINE bool form_p_columns(DF df, const Problem& p, const WorkItem& it, ScoreView sv, const RowStats& rs,
                               float* l) {
  const PRule& rule = p.p_rule;
  if (rule.kind == PRule::Kind::kRoundE) return false;
  const std::int64_t R = packed_rows(it), Rp = padded_rows(it), cols = it.col_end - it.col_begin;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), cs = sv.col_stride;
  for (std::int64_t r0 = 0; r0 < Rp; r0 += L) {
    const VF vm = hn::Load(df, rs.max + r0);
    float* x0 = sv.base + r0;
    VF sum = hn::Zero(df);
    if (rule.kind == PRule::Kind::kNormalizeFirst) {
      HWY_ALIGN float norm[HWY_MAX_BYTES / sizeof(float)] = {};
      if (rs.norm != nullptr) {
        hn::Store(hn::Load(df, rs.norm + r0), df, norm);
      } else {  // self-contained: the rows' own sums first
        for (std::int64_t c = 0; c < cols; ++c) sum = hn::Add(sum, exp_from(df, hn::Load(df, x0 + c * cs), vm));
        HWY_ALIGN float sums[HWY_MAX_BYTES / sizeof(float)];
        hn::Store(sum, df, sums);
        for (std::int64_t k = 0; k < L && r0 + k < R; ++k)
          if (rs.max[r0 + k] != kNegInf) norm[k] = row_norm(p, it.query_head(p.group, r0 + k), rs.max[r0 + k], sums[k]);
        sum = hn::Zero(df);
      }
      const VF vn = hn::Load(df, norm);
      for (std::int64_t c = 0; c < cols; ++c) {
        float* x = x0 + c * cs;
        const VF e = exp_from(df, hn::Load(df, x), vm);
        sum = hn::Add(sum, e);
        hn::Store(round_p(df, hn::Mul(e, vn), rule.round_to), df, x);
      }
      hn::Store(sum, df, l + r0);
      continue;
    }
    VF running = hn::Load(df, rs.entering + r0);
    for_each_grid_tile(rule, it.col_begin, it.col_end, [&](std::int64_t a, std::int64_t n) {
      float* xt = x0 + (a - it.col_begin) * cs;
      for (std::int64_t c = 0; c < n; ++c) running = hn::Max(running, hn::Load(df, xt + c * cs));
      const VF f = exp_from(df, running, vm);  // exp(m_t - m) <= 1; 0 while the row has seen nothing
      VF tile_sum = hn::Zero(df);
      for (std::int64_t c = 0; c < n; ++c) {
        float* x = xt + c * cs;
        const VF e = exp_from(df, hn::Load(df, x), running);
        tile_sum = hn::Add(tile_sum, e);
        hn::Store(hn::Mul(round_p(df, e, rule.round_to), f), df, x);
      }
      sum = hn::MulAdd(tile_sum, f, sum);
    });
    hn::Store(sum, df, l + r0);
  }
  return true;
}

/// l[r] = sum of exp(S - m[r]) over an item's scores (row-major or column-major), rows with
/// m = -inf giving 0: the row sums IncreFlashAttention's P needs before any P·V (25.3).
HWY_INLINE void row_exp_sums(DF df, const WorkItem& it, ScoreView sv, const float* m, float* l) {
  const std::int64_t R = packed_rows(it), cols = it.col_end - it.col_begin;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  if (sv.col_stride == 1) {
    for (std::int64_t r = 0; r < R; ++r) {
      const VF vm = hn::Set(df, m[r]);
      VF sum = hn::Zero(df);
      map_row(df, sv.base + r * sv.row_stride, cols, kNegInf, [&](VF v) {
        sum = hn::Add(sum, exp_from(df, v, vm));
        return v;
      });
      l[r] = hn::GetLane(hn::SumOfLanes(df, sum));
    }
    return;
  }
  for (std::int64_t r0 = 0; r0 < padded_rows(it); r0 += L) {
    const VF vm = hn::Load(df, m + r0);
    VF sum = hn::Zero(df);
    for (std::int64_t c = 0; c < cols; ++c) sum = hn::Add(sum, exp_from(df, hn::Load(df, sv.base + r0 + c * sv.col_stride), vm));
    hn::Store(sum, df, l + r0);
  }
}

}  // namespace fia::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // FIA_CPU_P_RULES_INL_H_
