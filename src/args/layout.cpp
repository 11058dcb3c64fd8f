#include "args/layout.hpp"

namespace fia::detail {

namespace {
struct Entry {
  const char* name;
  Layout in, out;
};
constexpr Entry kLayouts[] = {
    {"BSH", Layout::kBSH, Layout::kBSH},          {"BSND", Layout::kBSND, Layout::kBSND},
    {"BNSD", Layout::kBNSD, Layout::kBNSD},       {"TND", Layout::kTND, Layout::kTND},
    {"NTD", Layout::kNTD, Layout::kNTD},          {"BNSD_BSND", Layout::kBNSD, Layout::kBSND},
    {"BSH_BNSD", Layout::kBSH, Layout::kBNSD},    {"BSND_BNSD", Layout::kBSND, Layout::kBNSD},
    {"NTD_TND", Layout::kNTD, Layout::kTND},      {"TND_NTD", Layout::kTND, Layout::kNTD},
    {"BSH_NBSD", Layout::kBSH, Layout::kNBSD},    {"BSND_NBSD", Layout::kBSND, Layout::kNBSD},
    {"BNSD_NBSD", Layout::kBNSD, Layout::kNBSD},
};
}  // namespace

const std::vector<std::string>& accepted_layouts() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& e : kLayouts) v.emplace_back(e.name);
    return v;
  }();
  return names;
}

bool parse_layout(std::string_view text, LayoutPair* out) {
  for (const auto& e : kLayouts) {
    if (text == e.name) {
      *out = LayoutPair{e.in, e.out, e.name};
      return true;
    }
  }
  return false;
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::kBSH: return "BSH";
    case Layout::kBSND: return "BSND";
    case Layout::kBNSD: return "BNSD";
    case Layout::kTND: return "TND";
    case Layout::kNTD: return "NTD";
    case Layout::kNBSD: return "NBSD";
  }
  return "?";
}

int layout_rank(Layout layout) {
  switch (layout) {
    case Layout::kBSH:
    case Layout::kTND:
    case Layout::kNTD: return 3;
    default: return 4;
  }
}

AxisPos axis_positions(Layout layout) {
  switch (layout) {
    case Layout::kBSH: return {0, 1, 2, 2};
    case Layout::kBSND: return {0, 1, 2, 3};
    case Layout::kBNSD: return {0, 2, 1, 3};
    case Layout::kTND: return {-1, 0, 1, 2};
    case Layout::kNTD: return {-1, 1, 0, 2};
    case Layout::kNBSD: return {1, 2, 0, 3};
  }
  return {};
}

std::vector<std::int64_t> shape_in_layout(Layout layout, std::int64_t b, std::int64_t s,
                                          std::int64_t n, std::int64_t d) {
  switch (layout) {
    case Layout::kBSH: return {b, s, n * d};
    case Layout::kBSND: return {b, s, n, d};
    case Layout::kBNSD: return {b, n, s, d};
    case Layout::kTND: return {s, n, d};
    case Layout::kNTD: return {n, s, d};
    case Layout::kNBSD: return {n, b, s, d};
  }
  return {};
}

}  // namespace fia::detail
