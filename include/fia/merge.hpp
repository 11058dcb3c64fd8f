// Merging partial attentions computed over disjoint key sets (ring attention, FIA-SPEC 17).
#pragma once

#include <string_view>

#include "fia/export.hpp"
#include "fia/status.hpp"
#include "fia/tensor.hpp"

namespace fia {

/// Combines two partial attentions of the same queries over DISJOINT key sets into the attention
/// over their union, exactly (FlashInfer's merge_state; the ring-attention rule of FIA-SPEC 17).
/// Typical use: two fia calls with softmax_lse_flag = true, one over keys [0, k) and one over
/// keys [k, n), merged into what one call over [0, n) gives.
///
/// Per query row (batch, head, position) with natural-log LSEs la and lb (FIA-SPEC 17):
///   lse = max(la, lb) + log1p(exp(-|la - lb|))          (= ln(exp(la) + exp(lb)))
///   out = out_a * exp(la - lse) + out_b * exp(lb - lse)
/// computed in double and rounded once to the output dtype (round to nearest even); lse is
/// rounded once to F32.
/// Special values, checked in this order per row:
///   * la or lb NaN: lse and every output element of the row are NaN;
///   * lb = +inf (part b saw no key; FIA gives output 0 and LSE +inf, FIA-SPEC 6.7, 17): the row
///     is part a's, copied bit for bit (output elements and LSE); so when both are +inf, part a;
///   * la = +inf (part a empty): the row is part b's, copied bit for bit;
///   * otherwise the formula; la = lb (which includes both -inf) weighs the parts 1/2 each, so
///     two -inf LSEs (never produced by FIA) give lse = -inf and out = (out_a + out_b) / 2; one
///     -inf LSE gives that part weight 0.
///
/// `input_layout`: the FIA input_layout string of the calls that produced the parts, any of
/// FIA-SPEC 3.1 ("BSH", "BNSD", "TND", "BNSD_BSND", "TND_NTD", "BSH_NBSD", ...). The outputs are
/// in that layout's OUTPUT form, as FIA returns attention_out:
///   out_a, out_b, out: one shape in the output layout, dtype F16, BF16 or F32, all the same;
///   lse_a, lse_b, lse: F32 of shape (B, N, S, 1), or (T, N, 1) for the TND/NTD family, as
///     Plan::softmax_lse_shape(). For BSH outputs (B, S, H) the head count N is read from the LSE
///     shape and must divide H (D = H / N).
/// Views may be strided (strides in elements) except that the innermost axis must have stride 1.
/// `out` may be the very view of out_a or out_b, and `lse` of lse_a or lse_b (an in-place merge):
/// each row is read completely before it is written. Other overlaps are not supported.
/// Zero-size tensors are valid (nothing is written, or only the LSE when D = 0).
///
/// Errors (nothing is written): kInvalidArgument naming input_layout (not an FIA layout string),
/// out_a / out_b / out (rank, dtype, shape), lse_a / lse_b / lse (dtype, shape, stride count),
/// with a message "<expected>, got <given>"; kNullArgument naming the tensor whose data is null
/// while it has elements; kUnsupported naming the tensor whose innermost axis has a stride other
/// than 1 (as fia::run does).
FIA_API Status merge_attention_states(TensorView out_a, TensorView lse_a, TensorView out_b, TensorView lse_b,
                                      std::string_view input_layout, MutableTensorView out, MutableTensorView lse);

}  // namespace fia
