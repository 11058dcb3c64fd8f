// fia::merge_attention_states: the ring-attention merge of two partial attentions (FIA-SPEC 17).
#include "fia/merge.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "args/layout.hpp"
#include "cpu/convert.hpp"
#include "numeric/half.hpp"
#include "validate/check_view.hpp"
#include "validate/context.hpp"

namespace fia {

namespace {

using detail::cat;
using detail::check_view;
using detail::invalid;
using detail::Layout;
using detail::shape_str;

std::string dname(DType t) { return std::string(dtype_name(t)); }

/// The dtype and shape `what` asks for, then a sound view.
template <class View>
Status check_like(const char* name, const View& t, DType dtype, const std::vector<std::int64_t>& shape,
                  const char* what) {
  if (!t.present()) return detail::null_argument(name, "required, got an absent view");
  if (t.dtype != dtype) return invalid(name, cat("dtype must be ", dname(dtype), " (", what, "), got ", dname(t.dtype)));
  if (t.shape != shape)
    return invalid(name, cat("shape must be ", shape_str(shape), " (", what, "), got ", shape_str(t.shape)));
  return check_view(name, t);
}

void store(void* base, DType dtype, std::int64_t off, double x) {
  switch (dtype) {
    case DType::F16: {
      const std::uint16_t h = f64_to_f16(x);
      std::memcpy(static_cast<char*>(base) + off * 2, &h, 2);
      break;
    }
    case DType::BF16: {
      const std::uint16_t h = f64_to_bf16(x);
      std::memcpy(static_cast<char*>(base) + off * 2, &h, 2);
      break;
    }
    default: {
      const float f = static_cast<float>(x);
      std::memcpy(static_cast<char*>(base) + off * 4, &f, 4);
      break;
    }
  }
}

/// Element strides of one output tensor along the logical axes b, s, n, d.
struct OutStrides {
  std::int64_t b = 0, s = 0, n = 0, d = 0;
  std::int64_t at(std::int64_t ib, std::int64_t is, std::int64_t in, std::int64_t id) const {
    return ib * b + is * s + in * n + id * d;
  }
};

template <class View>
OutStrides out_strides(const View& v, Layout layout, std::int64_t head_dim) {
  const detail::AxisPos ap = detail::axis_positions(layout);
  OutStrides st;
  if (ap.b >= 0) st.b = v.stride(static_cast<std::size_t>(ap.b));
  st.s = v.stride(static_cast<std::size_t>(ap.s));
  st.d = v.stride(static_cast<std::size_t>(ap.d));
  st.n = layout == Layout::kBSH ? head_dim * st.d : v.stride(static_cast<std::size_t>(ap.n));
  return st;
}

/// Element strides of one LSE tensor along b, s, n ((B, N, S, 1) or (T, N, 1)).
struct LseStrides {
  std::int64_t b = 0, s = 0, n = 0;
  std::int64_t at(std::int64_t ib, std::int64_t is, std::int64_t in) const { return ib * b + is * s + in * n; }
};

template <class View>
LseStrides lse_strides(const View& v, bool token) {
  if (token) return {0, v.stride(0), v.stride(1)};
  return {v.stride(0), v.stride(2), v.stride(1)};
}

Status validate(const TensorView& out_a, const TensorView& lse_a, const TensorView& out_b, const TensorView& lse_b,
                std::string_view input_layout, const MutableTensorView& out, const MutableTensorView& lse,
                detail::LayoutPair* layout, std::int64_t dims[4]) {
  if (!detail::parse_layout(input_layout, layout)) {
    std::string list;
    for (const auto& n : detail::accepted_layouts()) list += (list.empty() ? "" : ", ") + n;
    return invalid("input_layout", cat("one of ", list, ", got '", detail::printable(input_layout, 32), "'"));
  }
  const Layout ol = layout->out;
  const char* lname = detail::layout_name(ol);
  if (!out_a.present()) return detail::null_argument("out_a", "required, got an absent view");
  if (out_a.dtype != DType::F16 && out_a.dtype != DType::BF16 && out_a.dtype != DType::F32)
    return invalid("out_a", cat("dtype must be F16, BF16 or F32, got ", dname(out_a.dtype)));
  const int rank = detail::layout_rank(ol);
  if (static_cast<int>(out_a.rank()) != rank)
    return invalid("out_a", cat("rank must be ", rank, " (output layout ", lname, " of ", layout->name, "), got ",
                                out_a.rank(), " (shape ", shape_str(out_a.shape), ")"));
  FIA_RETURN_IF_ERROR(check_view("out_a", out_a));
  FIA_RETURN_IF_ERROR(check_like("out_b", out_b, out_a.dtype, out_a.shape, "as out_a"));
  FIA_RETURN_IF_ERROR(check_like("out", out, out_a.dtype, out_a.shape, "as out_a"));

  const detail::AxisPos ap = detail::axis_positions(ol);
  const bool token = detail::is_token_layout(ol);
  const std::int64_t b = ap.b >= 0 ? out_a.shape[static_cast<std::size_t>(ap.b)] : 1;
  const std::int64_t s = out_a.shape[static_cast<std::size_t>(ap.s)];
  std::int64_t n = 0, d = 0;
  if (ol == Layout::kBSH) {
    // H = N * D: N comes from the LSE, (B, N, S, 1).
    const std::int64_t h = out_a.shape[2];
    if (!lse_a.present()) return detail::null_argument("lse_a", "required, got an absent view");
    const bool shaped = lse_a.dtype == DType::F32 && lse_a.rank() == 4 && lse_a.shape[1] >= 0;
    n = shaped ? lse_a.shape[1] : -1;
    if (lse_a.dtype == DType::F32 && (n < 0 || (n == 0 ? h != 0 : h % n != 0)))
      return invalid("lse_a", cat("shape must be [", b, ", N, ", s, ", 1] with N dividing H = ", h,
                                  " (layout BSH), got ", shape_str(lse_a.shape)));
    d = n > 0 ? h / n : 0;
  } else {
    n = out_a.shape[static_cast<std::size_t>(ap.n)];
    d = out_a.shape[static_cast<std::size_t>(ap.d)];
  }
  const std::vector<std::int64_t> lse_shape =
      token ? std::vector<std::int64_t>{s, n, 1} : std::vector<std::int64_t>{b, n, s, 1};
  const std::string what = cat("softmax_lse of layout ", layout->name, " for output ", shape_str(out_a.shape));
  FIA_RETURN_IF_ERROR(check_like("lse_a", lse_a, DType::F32, lse_shape, what.c_str()));
  FIA_RETURN_IF_ERROR(check_like("lse_b", lse_b, DType::F32, lse_shape, what.c_str()));
  FIA_RETURN_IF_ERROR(check_like("lse", lse, DType::F32, lse_shape, what.c_str()));
  dims[0] = b;
  dims[1] = s;
  dims[2] = n;
  dims[3] = d;
  return Status::Ok();
}

}  // namespace

Status merge_attention_states(TensorView out_a, TensorView lse_a, TensorView out_b, TensorView lse_b,
                              std::string_view input_layout, MutableTensorView out, MutableTensorView lse) {
  detail::LayoutPair layout;
  std::int64_t dims[4] = {0, 0, 0, 0};
  FIA_RETURN_IF_ERROR(validate(out_a, lse_a, out_b, lse_b, input_layout, out, lse, &layout, dims));
  const auto [nb, ns, nn, nd] = dims;
  if (nb == 0 || ns == 0 || nn == 0) return Status::Ok();

  const Layout ol = layout.out;
  const bool token = detail::is_token_layout(ol);
  const OutStrides sa = out_strides(out_a, ol, nd), sb = out_strides(out_b, ol, nd), so = out_strides(out, ol, nd);
  const LseStrides la_st = lse_strides(lse_a, token), lb_st = lse_strides(lse_b, token),
                   lo_st = lse_strides(lse, token);
  const DType dt = out_a.dtype;
  const std::size_t esize = dtype_size(dt);
  const auto* pa = static_cast<const char*>(out_a.data);
  const auto* pb = static_cast<const char*>(out_b.data);
  auto* po = static_cast<char*>(out.data);
  const auto* la_p = static_cast<const float*>(lse_a.data);
  const auto* lb_p = static_cast<const float*>(lse_b.data);
  auto* lo_p = static_cast<float*>(lse.data);
  constexpr double kInf = std::numeric_limits<double>::infinity();

  for (std::int64_t ib = 0; ib < nb; ++ib) {
    for (std::int64_t in = 0; in < nn; ++in) {
      for (std::int64_t is = 0; is < ns; ++is) {
        const float fa = la_p[la_st.at(ib, is, in)];
        const float fb = lb_p[lb_st.at(ib, is, in)];
        const double la = fa, lb = fb;
        float* lse_dst = lo_p + lo_st.at(ib, is, in);
        if (std::isnan(la) || std::isnan(lb)) {
          const double nan = std::numeric_limits<double>::quiet_NaN();
          for (std::int64_t id = 0; id < nd; ++id) store(po, dt, so.at(ib, is, in, id), nan);
          *lse_dst = std::numeric_limits<float>::quiet_NaN();
          continue;
        }
        if (lb == kInf || la == kInf) {  // an empty part: the other one, bit for bit
          const bool take_a = lb == kInf;
          const char* src = take_a ? pa : pb;
          const OutStrides& ss = take_a ? sa : sb;
          for (std::int64_t id = 0; id < nd; ++id)
            std::memmove(po + so.at(ib, is, in, id) * static_cast<std::int64_t>(esize),
                         src + ss.at(ib, is, in, id) * static_cast<std::int64_t>(esize), esize);
          *lse_dst = take_a ? fa : fb;
          continue;
        }
        // la = lb (both -inf included) weighs the parts equally.
        const double diff = la == lb ? 0.0 : la - lb;
        const double m = std::max(la, lb);
        const double merged = m + std::log1p(std::exp(-std::fabs(diff)));
        const double wa = la == lb ? 0.5 : std::exp(la - merged);
        const double wb = la == lb ? 0.5 : std::exp(lb - merged);
        for (std::int64_t id = 0; id < nd; ++id) {
          const double a = detail::load_one(pa, dt, sa.at(ib, is, in, id));
          const double b = detail::load_one(pb, dt, sb.at(ib, is, in, id));
          store(po, dt, so.at(ib, is, in, id), a * wa + b * wb);
        }
        *lse_dst = static_cast<float>(merged);
      }
    }
  }
  return Status::Ok();
}

}  // namespace fia
