// FIA-SPEC 12.3: the scale/offset shapes of each antiquant mode and where element (h, d) or
// (b, h, s) of one side lives.
#include "validate/antiquant_layout.hpp"

#include <cstring>
#include <vector>

namespace fia::detail {

namespace {

using Kind = ScaleLayout::Kind;

/// One accepted shape. `dims`: one symbol per axis (1, N, D, H = N*D, B, S = any S', K = blockNum,
/// Z = blockSize); `roles`: what each axis indexes (h head, d channel, f fused h*D+d, b batch or
/// block, t token or slot, . nothing). Combined forms list the axes after the leading 2.
struct Form {
  const char* name;
  const char* dims;
  const char* roles;
  Kind kind;
};

constexpr Form kChannelSplit[] = {
    {"(1, N, 1, D)", "1N1D", ".h.d", Kind::kChannel}, {"(1, 1, N, D)", "11ND", "..hd", Kind::kChannel},
    {"(1, N, D)", "1ND", ".hd", Kind::kChannel},      {"(1, H)", "1H", ".f", Kind::kChannel},
    {"(N, 1, D)", "N1D", "h.d", Kind::kChannel},      {"(N, D)", "ND", "hd", Kind::kChannel},
    {"(H)", "H", "f", Kind::kChannel},                {"(1) per-tensor", "1", ".", Kind::kTensor},
};
constexpr Form kChannelCombined[] = {
    {"(2, N, 1, D)", "N1D", "h.d", Kind::kChannel}, {"(2, 1, N, D)", "1ND", ".hd", Kind::kChannel},
    {"(2, N, D)", "ND", "hd", Kind::kChannel},      {"(2, H)", "H", "f", Kind::kChannel},
    {"(2) per-tensor", "", "", Kind::kTensor},
};
constexpr Form kHeadSplit[] = {{"(N)", "N", "h", Kind::kHead}};
constexpr Form kTokenSplit[] = {{"(1, B, S')", "1BS", ".bt", Kind::kToken}, {"(B, S')", "BS", "bt", Kind::kToken}};
constexpr Form kTokenCombined[] = {{"(2, B, S')", "BS", "bt", Kind::kToken}};
constexpr Form kTokenHeadSplit[] = {{"(B, N, S')", "BNS", "bht", Kind::kTokenHead}};
constexpr Form kPagedSplit[] = {{"(blockNum, blockSize)", "KZ", "bt", Kind::kPagedToken}};
constexpr Form kPagedHeadSplit[] = {{"(blockNum, N, blockSize)", "KNZ", "bht", Kind::kPagedTokenHead}};

struct Forms {
  const Form* begin = nullptr;
  const Form* end = nullptr;
};

template <std::size_t n>
Forms forms_of(const Form (&f)[n]) {
  return {f, f + n};
}

Forms forms(bool combined, std::int64_t mode) {
  if (combined) {
    if (mode == 0) return forms_of(kChannelCombined);
    if (mode == 1) return forms_of(kTokenCombined);
    return {};
  }
  switch (mode) {
    case 0: return forms_of(kChannelSplit);
    case 1: return forms_of(kTokenSplit);
    case 2: return forms_of(kHeadSplit);
    case 3: return forms_of(kTokenHeadSplit);
    case 4: return forms_of(kPagedSplit);
    case 5: return forms_of(kPagedHeadSplit);
    default: return {};
  }
}

bool dim_matches(char sym, std::int64_t v, const ScaleSizes& z) {
  switch (sym) {
    case '1': return v == 1;
    case 'N': return v == z.heads;
    case 'D': return v == z.head_dim;
    case 'H': return v == z.heads * z.head_dim;
    case 'B': return v == z.batch;
    case 'S': return true;
    case 'K': return v == z.block_num;
    case 'Z': return v == z.block_size;
    default: return false;
  }
}

}  // namespace

bool scale_layout(const TensorView& t, bool combined, int side, std::int64_t mode, const ScaleSizes& z,
                  ScaleLayout* out) {
  std::vector<std::int64_t> shape = t.shape, strides(t.rank());
  for (std::size_t i = 0; i < t.rank(); ++i) strides[i] = t.shape[i] == 1 ? 0 : t.stride(i);
  std::int64_t base = 0;
  if (combined) {
    if (shape.empty() || shape[0] != 2) return false;
    base = side * strides[0];
    shape.erase(shape.begin());
    strides.erase(strides.begin());
  }
  const Forms fs = forms(combined, mode);
  for (const Form* f = fs.begin; f != fs.end; ++f) {
    if (std::strlen(f->dims) != shape.size()) continue;
    bool ok = true;
    for (std::size_t i = 0; ok && i < shape.size(); ++i) ok = dim_matches(f->dims[i], shape[i], z);
    if (!ok) continue;
    ScaleLayout l;
    l.kind = f->kind;
    l.form = f->name;
    l.base = base;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      switch (f->roles[i]) {
        case 'h': l.h_stride = strides[i]; break;
        case 'd': l.d_stride = strides[i]; break;
        case 'f':
          l.h_stride = z.head_dim * strides[i];
          l.d_stride = strides[i];
          break;
        case 'b': l.b_stride = strides[i]; break;
        case 't':
          l.t_stride = strides[i];
          l.seq = shape[i];
          break;
        default: break;
      }
    }
    *out = l;
    return true;
  }
  return false;
}

std::string allowed_scale_shapes(bool combined, std::int64_t mode, const ScaleSizes& z) {
  const Forms fs = forms(combined, mode);
  std::string s;
  for (const Form* f = fs.begin; f != fs.end; ++f) {
    if (!s.empty()) s += f + 1 == fs.end ? " or " : ", ";
    s += f->name;
  }
  std::string sizes;
  auto add = [&](const char* name, std::int64_t v) { sizes += cat(sizes.empty() ? "" : ", ", name, " = ", v); };
  if (mode == 0 || mode == 2 || mode == 3 || mode == 5) add("N", z.heads);
  if (mode == 0) {
    add("D", z.head_dim);
    add("H", z.heads * z.head_dim);
  }
  if (mode == 1 || mode == 3) add("B", z.batch);
  if (mode == 4 || mode == 5) {
    add("blockNum", z.block_num);
    add("blockSize", z.block_size);
  }
  return s + " with " + sizes;
}

ScaleSizes scale_sizes(const Ctx& c, int side) {
  ScaleSizes z;
  z.heads = c.num_kv_heads;
  z.head_dim = side == 0 ? c.qk_dim : c.v_dim;
  z.batch = c.batch;
  z.block_num = c.block_num;
  z.block_size = c.storage == Storage::kPaged ? c.a.block_size : 0;
  return z;
}

}  // namespace fia::detail
