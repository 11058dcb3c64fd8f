#include "bench/pages.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace fia::bench {

namespace {

constexpr std::size_t kLine = 64;

std::atomic<std::size_t> g_advised{0};

#if defined(__linux__) && defined(MADV_HUGEPAGE)
constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
#endif

}  // namespace

PageBlock::PageBlock(std::size_t bytes, Pages pages) : bytes_(bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= kHugePage) {
    // A mapping of its own, trimmed to start on a 2 MiB boundary, so the advice covers whole pages.
    const std::size_t size = round_up(bytes, kHugePage);
    const std::size_t span = size + kHugePage;
    void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(m);
    const std::uintptr_t aligned = round_up(start, kHugePage);
    if (aligned > start) munmap(m, aligned - start);
    if (aligned + size < start + span) munmap(reinterpret_cast<void*>(aligned + size), start + span - aligned - size);
    mapping_ = data_ = reinterpret_cast<void*>(aligned);
    mapped_ = size;
    madvise(data_, size, pages == Pages::kHuge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    if (pages == Pages::kHuge) {
      advised_ = true;
      g_advised += size;
    }
    return;
  }
#else
  (void)pages;
#endif
  data_ = ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{kLine});
  std::memset(data_, 0, bytes);
}

PageBlock::PageBlock(PageBlock&& other) noexcept
    : data_(other.data_), bytes_(other.bytes_), mapping_(other.mapping_), mapped_(other.mapped_), advised_(other.advised_) {
  other.data_ = other.mapping_ = nullptr;
  other.bytes_ = other.mapped_ = 0;
  other.advised_ = false;
}

PageBlock::~PageBlock() {
#if defined(__linux__)
  if (mapping_ != nullptr) {
    if (advised_) g_advised -= mapped_;
    munmap(mapping_, mapped_);
    return;
  }
#endif
  if (data_ != nullptr) ::operator delete(data_, std::align_val_t{kLine});
}

HugePageUse huge_page_use() {
  HugePageUse use;
  use.advised = g_advised;
  std::ifstream f("/proc/self/smaps_rollup");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("AnonHugePages:", 0) != 0) continue;
    std::istringstream in(line.substr(14));
    std::size_t kib = 0;
    in >> kib;
    use.backed = kib * 1024;
  }
  return use;
}

}  // namespace fia::bench
