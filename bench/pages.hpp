// Memory for the bench's tensors and probe buffer, on the pages a serving engine would give them.
#pragma once

#include <cstddef>

namespace fia::bench {

/// The pages a PageBlock lies on.
///   - kHuge: transparent huge pages where the OS offers them (Linux: madvise(MADV_HUGEPAGE) on a
///     block aligned to 2 MiB), as engines put their KV caches (torch's CPU allocator with
///     THP_MEM_ALLOC_ENABLE=1 does the same). On Zen 4 in a VM, a D2 call over 4 KiB pages took
///     1.24-1.35x its time over huge pages: the hardware prefetchers stop at every 4 KiB page and
///     each page costs a (nested) page walk.
///   - kSmall: 4 KiB pages (Linux: madvise(MADV_NOHUGEPAGE), even where THP is "always").
/// Elsewhere (macOS) both are the allocator's ordinary pages.
enum class Pages { kSmall, kHuge };

/// A zeroed block of memory, 64-byte aligned (2 MiB where it is on huge pages), freed with the
/// block. Blocks under 2 MiB are ordinary heap memory whatever `pages` says.
class PageBlock {
 public:
  PageBlock(std::size_t bytes, Pages pages);
  ~PageBlock();
  PageBlock(PageBlock&& other) noexcept;
  PageBlock(const PageBlock&) = delete;
  PageBlock& operator=(const PageBlock&) = delete;
  PageBlock& operator=(PageBlock&&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  void* mapping_ = nullptr;  ///< the start of the block's own mapping (Linux), else null
  std::size_t mapped_ = 0;
  bool advised_ = false;  ///< counted in huge_page_use().advised
};

/// Bytes of blocks this process has asked to have on huge pages (still allocated), and how many
/// bytes of its anonymous memory the OS has put on huge pages (Linux: AnonHugePages of
/// /proc/self/smaps_rollup; 0 where unknown). Backed below advised means the OS found too few free
/// 2 MiB pages: those parts of the tensors lie on 4 KiB pages.
struct HugePageUse {
  std::size_t advised = 0, backed = 0;
};
HugePageUse huge_page_use();

}  // namespace fia::bench
