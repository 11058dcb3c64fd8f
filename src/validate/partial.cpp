// The partial-attention extensions of fia::Options (float32_out, softmax_max): checked and applied
// to a built Problem. Not FIA arguments; for attention split over key sets and merged by the LSE
// (FIA-SPEC 17, 25.3; docs/distributed.md).
#include "validate/partial.hpp"

#include <cmath>
#include <string>

#include "cpu/convert.hpp"
#include "validate/context.hpp"

namespace fia::detail {

namespace {

Status check_softmax_max(const TensorView& t, const Problem& p) {
  const char* name = "softmax_max";
  if (!p.lse)
    return {StatusCode::kInvalidArgument, name, "needs softmax_lse_flag: the LSE is what merges the partial results"};
  if (t.dtype != DType::F32)
    return {StatusCode::kInvalidArgument, name, "dtype must be F32, got " + std::string(dtype_name(t.dtype))};
  if (t.shape != p.lse_shape)
    return {StatusCode::kInvalidArgument, name,
            "shape must be softmax_lse's " + shape_str(p.lse_shape) + ", got " + shape_str(t.shape)};
  if (!t.strides.empty() && t.strides.size() != t.shape.size())
    return {StatusCode::kInvalidArgument, name, "strides must have one entry per axis"};
  if (t.numel() > 0 && t.data == nullptr) return {StatusCode::kNullArgument, name, "data is null"};
  if (p.full_quant.on || p.mla_full_quant.on)
    return {StatusCode::kUnsupported, name, "not with full quantization (FIA-SPEC 13)"};
  if (p.p_rule.kind != PRule::Kind::kRoundE)
    return {StatusCode::kUnsupported, name,
            "this path forms P from its own row sums or running max (FIA-SPEC 25.3: IncreFlashAttention, or "
            "inner_precise 1 on a token layout); only paths that round E = exp(S - m) take it"};
  return check_softmax_max_values(t);
}

}  // namespace

Status check_softmax_max_values(const TensorView& t) {
  auto bad = [](float v) { return std::isnan(v) || v == INFINITY; };
  auto error = [](std::int64_t lin, float v) {
    return Status{StatusCode::kInvalidArgument, "softmax_max",
                  "element " + std::to_string(lin) + " is " + (std::isnan(v) ? "NaN" : "+inf") +
                      ": each value must be finite or -inf"};
  };
  const auto* data = static_cast<const float*>(t.data);
  if (t.strides.empty()) {  // row-major: one pass
    for (std::int64_t lin = 0; lin < t.numel(); ++lin)
      if (bad(data[lin])) return error(lin, data[lin]);
    return Status::Ok();
  }
  std::vector<std::int64_t> idx(t.shape.size(), 0);
  for (std::int64_t lin = 0; lin < t.numel(); ++lin) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < t.shape.size(); ++k) off += idx[k] * t.stride(k);
    if (bad(data[off])) return error(lin, data[off]);
    for (std::size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < t.shape[k]) break;
      idx[k] = 0;
    }
  }
  return Status::Ok();
}

Status apply_partial_options(const Options& options, Problem* p) {
  p->softmax_max_rows = RowIndex{};
  if (p->empty_query) {  // FIA-SPEC 19: nothing is validated or computed; the output dtype still follows
    if (options.float32_out) p->out_dtype = DType::F32;
    return Status::Ok();
  }
  if (options.float32_out) {
    if (p->post_quant.on)
      return {StatusCode::kInvalidArgument, "float32_out", "not with quant_scale2: the output is int8 (FIA-SPEC 14)"};
    p->out_dtype = DType::F32;
  }
  if (!options.softmax_max.present()) return Status::Ok();
  const Status st = check_softmax_max(options.softmax_max, *p);
  if (!st.ok()) return st;
  const TensorView& t = options.softmax_max;
  p->softmax_max_rows = p->lse_index(MutableTensorView(const_cast<void*>(t.data), t.dtype, t.shape, t.strides));
  return Status::Ok();
}

}  // namespace fia::detail
