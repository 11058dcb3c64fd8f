// FIA-SPEC 6, 8, 20.4, 20.5: sparse mode, mask shapes, pse shapes.
#include "validate/context.hpp"

namespace fia::detail {

namespace {

bool is_mask_dtype(DType t) { return t == DType::Bool || t == DType::I8 || t == DType::U8; }

bool batch_ok(std::int64_t dim, std::int64_t batch) { return dim == 1 || dim == batch; }

/// FIA-SPEC 6.2: the compressed 2048 x 2048 tile of sparse modes 2, 3, 4.
Status check_compressed_mask(const Ctx& c) {
  const TensorView& m = c.a.atten_mask;
  const auto& s = m.shape;
  const bool ok = (s.size() == 2 && s[0] == 2048 && s[1] == 2048) ||
                  (s.size() == 3 && s[0] == 1 && s[1] == 2048 && s[2] == 2048) ||
                  (s.size() == 4 && s[0] == 1 && s[1] == 1 && s[2] == 2048 && s[3] == 2048);
  if (!ok)
    return invalid("atten_mask", cat("sparse_mode ", c.a.sparse_mode,
                                     " needs the compressed mask (2048, 2048), (1, 2048, 2048) or (1, 1, 2048, 2048), got ",
                                     shape_str(s)));
  return Status::Ok();
}

/// FIA-SPEC 6.5: the tree mask of sparse_mode 9, (B, Q_S, Q_S), or for token layouts the
/// concatenated act_q x act_q matrices (1-D, sum of act_q^2); every batch needs act_q <= L.
Status check_tree_mask(const Ctx& c) {
  const auto& s = c.a.atten_mask.shape;
  if (is_token_layout(c.layout.in)) {
    std::int64_t need = 0;
    for (std::int64_t q : c.act_q) need += q * q;
    if (s.size() != 1 || s[0] != need)
      return invalid("atten_mask", cat("the tree mask (sparse_mode 9) of a token layout is 1-D with sum(act_q^2) = ",
                                       need, " elements, got shape ", shape_str(s)));
  } else if (s != std::vector<std::int64_t>{c.batch, c.q_seq, c.q_seq}) {
    return invalid("atten_mask", cat("the tree mask (sparse_mode 9) must be (B, Q_S, Q_S) = (", c.batch, ", ", c.q_seq,
                                     ", ", c.q_seq, "), got ", shape_str(s)));
  }
  for (std::int64_t b = 0; b < c.batch; ++b)
    if (c.act_q[b] > c.act_kv[b] + c.prefix_len)
      return invalid("actual_seq_lengths", cat("the tree mask (sparse_mode 9) needs act_q <= act_kv in every batch, got ",
                                               c.act_q[b], " > ", c.act_kv[b] + c.prefix_len, " in batch ", b));
  if (c.q_padding || c.kv_padding)
    return invalid(c.q_padding ? "query_padding_size" : "kv_padding_size",
                   "the tree mask (sparse_mode 9) does not combine with left padding");
  return Status::Ok();
}

/// FIA-SPEC 6.2 / 6.8 #9-10: a full mask (modes 0/1, legacy decode) covering rows x cols.
Status check_full_mask(const Ctx& c, std::int64_t rows, std::int64_t cols) {
  const TensorView& m = c.a.atten_mask;
  const auto& s = m.shape;
  const std::int64_t B = c.batch;
  const bool row_mask = !is_token_layout(c.layout.in) && c.q_seq == 1;  // 2-D read as (B, KV_S')
  const std::string want = cat("[B or 1, ", rows, "+, ", cols, "+]");
  switch (s.size()) {
    case 2:
      if (row_mask) {
        if (!batch_ok(s[0], B) || s[1] < cols)
          return invalid("atten_mask", cat("a 2-D mask with Q_S = 1 must be (B or 1, >= ", cols, "), got ", shape_str(s)));
      } else if (s[0] < rows || s[1] < cols) {
        return invalid("atten_mask", cat("a 2-D mask must be (>= ", rows, ", >= ", cols, "), got ", shape_str(s)));
      }
      break;
    case 3:
      if (!batch_ok(s[0], B) || s[1] < rows || s[2] < cols)
        return invalid("atten_mask", cat("a 3-D mask must be (B or 1, >= ", rows, ", >= ", cols, "), got ", shape_str(s)));
      break;
    case 4:
      if (!batch_ok(s[0], B) || s[1] != 1 || s[2] < rows || s[3] < cols)
        return invalid("atten_mask", cat("a 4-D mask must be (B or 1, 1, >= ", rows, ", >= ", cols, "), got ",
                                         shape_str(s)));
      break;
    default:
      return invalid("atten_mask", cat("mask rank must be 2, 3 or 4, got shape ", shape_str(s)));
  }
  return Status::Ok();
}

Status check_pse(Ctx& c, std::int64_t rows, std::int64_t cols) {
  const TensorView& t = c.a.pse_shift;
  if (!t.present() || t.numel() == 0) return Status::Ok();  // an empty pse is absent (8.2)
  c.has_pse = true;
  if (is_token_layout(c.layout.in) || is_token_layout(c.layout.out))
    return invalid("pse_shift", cat("pse_shift needs layout BSH, BSND, BNSD or one of their transposes, got ",
                                    c.a.input_layout));
  if (t.dtype != DType::F16 && t.dtype != DType::BF16 && t.dtype != DType::F32)
    return invalid("pse_shift", cat("dtype must be FLOAT16 or BFLOAT16, got ", dtype_name(t.dtype)));
  const auto& s = t.shape;
  if (s.size() != 4) return invalid("pse_shift", cat("pse_shift must be 4-D (B or 1, N, S1, S2), got shape ", shape_str(s)));
  if (!batch_ok(s[0], c.batch) || s[1] != c.num_heads || s[2] < rows || s[3] < cols)
    return invalid("pse_shift", cat("pse_shift must be (B or 1, ", c.num_heads, ", >= ", rows, ", >= ", cols,
                                    "), got ", shape_str(s)));
  return Status::Ok();
}

}  // namespace

Status check_visibility(Ctx& c) {
  const FiaArgs& a = c.a;
  const TensorView& m = a.atten_mask;
  const std::int64_t rows = c.q_seq;
  const std::int64_t cols = c.kv_width() + c.prefix_len;
  // An empty mask is absent (6.1), except where there is nothing to mask: then an empty mask of
  // the right shape still counts as given (no rows or no columns to compute).
  c.has_mask = m.present() && (m.numel() > 0 || rows == 0 || cols == 0);
  if (c.has_mask && !is_mask_dtype(m.dtype))
    return invalid("atten_mask", cat("dtype must be BOOL, INT8 or UINT8, got ", dtype_name(m.dtype)));

  if (c.legacy_decode) {  // 3.3: sparse_mode, pre_tokens, next_tokens are ignored
    // With sparse_mode 2-4 the compressed 2048 x 2048 tile is no positional mask (6.2): with the
    // sparse mode ignored, it is ignored too. Any other mask is a full user mask.
    if (c.has_mask && a.sparse_mode >= 2 && a.sparse_mode <= 4 && check_compressed_mask(c).ok()) c.has_mask = false;
    if (c.has_mask) FIA_RETURN_IF_ERROR(check_full_mask(c, rows, cols));
  } else {
    const std::int64_t mode = a.sparse_mode;
    if ((mode < 0 || mode > 4) && mode != 9)
      return invalid("sparse_mode", cat("sparse_mode only supports 0/1/2/3/4/9, got ", mode));
    if (mode != 0 && !c.has_mask)
      return invalid("atten_mask", cat("atten_mask is required when sparse_mode is ", mode, ", got none"));
    if (c.has_mask) {
      if (mode == 9) FIA_RETURN_IF_ERROR(check_tree_mask(c));
      else if (mode <= 1) FIA_RETURN_IF_ERROR(check_full_mask(c, rows, cols));
      else FIA_RETURN_IF_ERROR(check_compressed_mask(c));
    }
  }
  return check_pse(c, rows, cols);
}

}  // namespace fia::detail
