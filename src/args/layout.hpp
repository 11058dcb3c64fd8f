// input_layout strings and the axes they name (FIA-SPEC 3.1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fia::detail {

/// One tensor layout: the order of the batch (B), sequence (S or T), head (N) and head-dim (D)
/// axes. BSH is BSND with N and D fused; TND/NTD have no batch axis (the cumulative lengths split
/// T into batches); NBSD exists only as an output layout.
enum class Layout { kBSH, kBSND, kBNSD, kTND, kNTD, kNBSD };

/// A parsed input_layout: the input layout and the output layout ("BNSD_BSND" -> BNSD, BSND).
struct LayoutPair {
  Layout in = Layout::kBSH;
  Layout out = Layout::kBSH;
  std::string name;
  bool transposed() const { return in != out; }
};

/// The input_layout strings FIA accepts, in the order of FIA-SPEC 3.1.
const std::vector<std::string>& accepted_layouts();

/// Parses an input_layout string; false when it is not one FIA accepts.
bool parse_layout(std::string_view text, LayoutPair* out);

const char* layout_name(Layout layout);
/// 3 for BSH, TND, NTD; 4 for BSND, BNSD, NBSD.
int layout_rank(Layout layout);
/// True for TND and NTD (batches given by cumulative lengths).
inline bool is_token_layout(Layout layout) { return layout == Layout::kTND || layout == Layout::kNTD; }

/// Axis positions of a layout in a tensor of that layout (-1 when the axis does not exist).
/// For BSH the head and head-dim axes are both the last axis (H = N * D).
struct AxisPos {
  int b = -1, s = -1, n = -1, d = -1;
};
AxisPos axis_positions(Layout layout);

/// Shape of a tensor in `layout` from its logical sizes (S is T for the token layouts).
std::vector<std::int64_t> shape_in_layout(Layout layout, std::int64_t b, std::int64_t s,
                                          std::int64_t n, std::int64_t d);

}  // namespace fia::detail
