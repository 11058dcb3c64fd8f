// libFuzzer target: the .npy reader (io::parse_npy, what io::load_case reads NAME.npy with).
// Findings: a crash, a sanitizer report, a rejection that does not name the file, or an
// accepted array that does not survive a write and a re-read.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fia/io/npy.hpp"

namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "\nFINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fia::io;
  const std::vector<unsigned char> image(data, data + size);
  fia::OwnedTensor t;
  const fia::Status st = parse_npy(image, "fuzz.npy", &t);
  if (!st.ok()) {
    if (st.parameter != "fuzz.npy" || st.message.empty()) finding("a rejection that does not name the file: " + st.to_string());
    return 0;
  }
  std::vector<unsigned char> written;
  const fia::Status ws = serialize_npy(t, &written);
  if (!ws.ok()) finding("an accepted array cannot be written: " + ws.to_string());
  fia::OwnedTensor again;
  const fia::Status st2 = parse_npy(written, "again", &again);
  if (!st2.ok()) finding("a written image is rejected: " + st2.to_string());
  if (again.dtype != t.dtype || again.shape != t.shape || again.bytes != t.bytes)
    finding("the array changed by a write and a re-read");
  return 0;
}
