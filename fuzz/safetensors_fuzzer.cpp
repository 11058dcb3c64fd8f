// libFuzzer target: the safetensors reader (io::parse_safetensors, what io::load_case reads
// inputs.safetensors with). Findings: a crash, a sanitizer report, a rejection that does not
// name the file, or an accepted image whose tensors do not survive a write and a re-read.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fia/io/safetensors.hpp"

namespace {

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "\nFINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fia::io;
  const std::vector<unsigned char> image(data, data + size);
  TensorFile file;
  const fia::Status st = parse_safetensors(image, "fuzz.safetensors", &file);
  if (!st.ok()) {
    if (st.parameter != "fuzz.safetensors" || st.message.empty()) finding("a rejection that does not name the file: " + st.to_string());
    return 0;
  }
  std::vector<std::pair<std::string, const fia::OwnedTensor*>> tensors;
  for (const auto& [name, t] : file.tensors) tensors.emplace_back(name, &t);
  TensorFile again;
  const fia::Status st2 = parse_safetensors(serialize_safetensors(tensors, file.metadata), "again", &again);
  if (!st2.ok()) finding("a written image is rejected: " + st2.to_string());
  if (again.metadata != file.metadata) finding("metadata changed by a write and a re-read");
  if (again.tensors.size() != file.tensors.size()) finding("tensor count changed by a write and a re-read");
  for (const auto& [name, t] : file.tensors) {
    const auto it = again.tensors.find(name);
    if (it == again.tensors.end() || it->second.dtype != t.dtype || it->second.shape != t.shape ||
        it->second.bytes != t.bytes)
      finding("tensor '" + name + "' changed by a write and a re-read");
  }
  return 0;
}
