// fuzz_seed_corpus CASES_DIR OUT_DIR: seed corpora for the reader fuzzers from the sample cases
// of the shared folder (CASE-FORMAT.md), so that they start from real files:
//   OUT_DIR/params/       every params.json
//   OUT_DIR/safetensors/  every inputs.safetensors; files over kMaxSeedBytes with each axis cut
//                         to kMaxAxis (same names, dtypes and ranks, small data)
//   OUT_DIR/npy/          one .npy per (dtype, rank) pair met in those tensors
// Names are the case folder's path below CASES_DIR with '/' as '-'.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fia/io/npy.hpp"
#include "fia/io/safetensors.hpp"

namespace {

namespace fs = std::filesystem;
using fia::OwnedTensor;

constexpr std::uintmax_t kMaxSeedBytes = 64 << 10;  // libFuzzer mutates small inputs fastest
constexpr std::int64_t kMaxAxis = 4;

/// The tensor with every axis cut to kMaxAxis, holding the first bytes of the original.
OwnedTensor cut(const OwnedTensor& t) {
  std::vector<std::int64_t> shape = t.shape;
  for (auto& d : shape) d = std::min(d, kMaxAxis);
  OwnedTensor small(t.dtype, shape);
  std::copy_n(t.bytes.begin(), small.bytes.size(), small.bytes.begin());
  return small;
}

bool write(const fs::path& path, const std::vector<unsigned char>& bytes) {
  std::ofstream f(path, std::ios::binary);
  return static_cast<bool>(f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_seed_corpus CASES_DIR OUT_DIR\n");
    return 2;
  }
  const fs::path cases = argv[1], out = argv[2];
  for (const char* sub : {"params", "safetensors", "npy"}) fs::create_directories(out / sub);
  std::set<std::pair<fia::DType, std::size_t>> npy_kinds;
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(cases)) {
    if (!entry.is_directory() || !fs::exists(entry.path() / "params.json")) continue;
    std::string name = fs::relative(entry.path(), cases).string();
    for (char& c : name) c = c == '/' ? '-' : c;
    fs::copy_file(entry.path() / "params.json", out / "params" / (name + ".json"), fs::copy_options::overwrite_existing);
    ++files;
    const fs::path inputs = entry.path() / "inputs.safetensors";
    std::vector<unsigned char> image;
    fia::io::TensorFile file;
    if (!fia::io::read_file(inputs.string(), &image) || !fia::io::parse_safetensors(image, "inputs", &file).ok()) continue;
    if (fs::file_size(inputs) > kMaxSeedBytes) {
      for (auto& [tensor_name, t] : file.tensors) t = cut(t);
      std::vector<std::pair<std::string, const OwnedTensor*>> list;
      for (const auto& [tensor_name, t] : file.tensors) list.emplace_back(tensor_name, &t);
      image = fia::io::serialize_safetensors(list, file.metadata);
    }
    if (!write(out / "safetensors" / (name + ".safetensors"), image)) return 1;
    for (const auto& [tensor_name, t] : file.tensors) {
      std::vector<unsigned char> npy;
      if (!fia::io::serialize_npy(cut(t), &npy).ok() || !npy_kinds.insert({t.dtype, t.shape.size()}).second) continue;
      if (!write(out / "npy" / (name + "-" + tensor_name + ".npy"), npy)) return 1;
    }
  }
  std::printf("fuzz_seed_corpus: seeds from %d cases, %zu .npy kinds, in %s\n", files, npy_kinds.size(), out.c_str());
  return 0;
}
