// FIA-SPEC 16, 18, 20.12: learnable sink, inner_precise.
#include "validate/context.hpp"

namespace fia::detail {

Status check_misc(Ctx& c) {
  const FiaArgs& a = c.a;
  if (a.inner_precise < 0 || a.inner_precise > 3)
    return invalid("inner_precise", cat("inner_precise must be 0, 1, 2 or 3, got ", a.inner_precise));
  if (c.legacy_decode && a.inner_precise > 1)
    return invalid("inner_precise", cat("inner_precise must be 0 or 1 for decode (Q_S = 1, layout ", a.input_layout,
                                        "), got ", a.inner_precise));

  const TensorView& s = a.learnable_sink;
  if (s.present()) {
    c.has_sink = true;
    if (s.dtype != DType::BF16 && s.dtype != DType::F16 && s.dtype != DType::F32)
      return invalid("learnable_sink", cat("dtype must be BFLOAT16, got ", dtype_name(s.dtype)));
    if (s.rank() != 1 || s.shape[0] != c.num_heads)
      return invalid("learnable_sink", cat("shape must be (num_heads) = (", c.num_heads, "), got ", shape_str(s.shape)));
  }
  return Status::Ok();
}

}  // namespace fia::detail
