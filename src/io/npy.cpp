#include "fia/io/npy.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "fia/io/safetensors.hpp"

namespace fia::io {

namespace {

Status bad(const std::string& label, const std::string& msg) { return {StatusCode::kInvalidArgument, label, msg}; }

bool descr_dtype(const std::string& d, DType* out) {
  static const std::pair<const char*, DType> table[] = {
      {"<f2", DType::F16}, {"<f4", DType::F32}, {"<f8", DType::F64}, {"|i1", DType::I8},  {"|u1", DType::U8},
      {"|b1", DType::Bool}, {"<i4", DType::I32}, {"<i8", DType::I64}, {"<u8", DType::U64},
  };
  for (const auto& [name, t] : table) {
    if (d == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

constexpr const char* kSpace = " \t\n\r\f\v";

/// Where the value of `'key':` starts in a header dict (spaces skipped), or npos.
std::size_t value_of(const std::string& h, const std::string& key) {
  const std::size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return k;
  const std::size_t colon = h.find_first_not_of(kSpace, k + key.size() + 2);
  if (colon == std::string::npos || h[colon] != ':') return std::string::npos;
  return h.find_first_not_of(kSpace, colon + 1);
}

/// Parses the inside of a shape tuple: "", "5,", "2, 3" (decimal dimensions of at most 12 digits,
/// comma-separated, an optional trailing comma).
bool parse_shape(const std::string& dims, std::vector<std::int64_t>* shape) {
  std::size_t i = 0;
  while ((i = dims.find_first_not_of(kSpace, i)) != std::string::npos) {
    std::size_t end = i;
    while (end < dims.size() && dims[end] >= '0' && dims[end] <= '9') ++end;
    if (end == i || end - i > 12) return false;
    shape->push_back(std::stoll(dims.substr(i, end - i)));
    i = dims.find_first_not_of(kSpace, end);
    if (i == std::string::npos) break;
    if (dims[i] != ',') return false;
    ++i;
  }
  return true;
}

}  // namespace

Status parse_npy(const std::vector<unsigned char>& image, const std::string& label, OwnedTensor* out) {
  static const unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (image.size() < 10 || std::memcmp(image.data(), magic, 6) != 0) return bad(label, "not a .npy file (bad magic)");
  const unsigned major = image[6];
  std::size_t header_len = 0, pos = 0;
  if (major == 1) {
    header_len = image[8] | (image[9] << 8);
    pos = 10;
  } else if (major == 2 || major == 3) {
    if (image.size() < 12) return bad(label, "truncated header");
    header_len = image[8] | (image[9] << 8) | (image[10] << 16) | (static_cast<std::size_t>(image[11]) << 24);
    pos = 12;
  } else {
    return bad(label, "unsupported .npy format version " + std::to_string(major));
  }
  if (header_len > image.size() - pos) return bad(label, "truncated header");
  const std::string h(reinterpret_cast<const char*>(image.data() + pos), header_len);
  pos += header_len;

  // A linear scan of the header dict: std::regex recursed once per character and overflowed the
  // stack on long headers (a v1 header may hold 65535 bytes; found by fuzzing).
  const std::size_t descr = value_of(h, "descr");
  const std::size_t descr_end = descr == std::string::npos || h[descr] != '\'' ? descr : h.find('\'', descr + 1);
  if (descr_end == std::string::npos) return bad(label, "header has no 'descr'");
  const std::string descr_text = h.substr(descr + 1, descr_end - descr - 1);
  DType dtype;
  if (!descr_dtype(descr_text, &dtype)) return bad(label, "unsupported dtype '" + descr_text + "'");
  const std::size_t fortran = value_of(h, "fortran_order");
  if (fortran != std::string::npos && h.compare(fortran, 4, "True") == 0)
    return bad(label, "Fortran-order arrays are not supported");
  if (fortran == std::string::npos || h.compare(fortran, 5, "False") != 0) return bad(label, "header has no 'fortran_order'");
  const std::size_t open = value_of(h, "shape");
  const std::size_t close = open == std::string::npos ? open : h.find(')', open);
  if (open == std::string::npos || h[open] != '(' || close == std::string::npos) return bad(label, "header has no 'shape'");
  const std::string dims = h.substr(open + 1, close - open - 1);
  std::vector<std::int64_t> shape;
  if (!parse_shape(dims, &shape)) return bad(label, "malformed shape (" + dims + ")");
  std::uint64_t numel = 1;
  for (auto d : shape) {
    if (d != 0 && numel > (std::uint64_t{1} << 46) / static_cast<std::uint64_t>(d)) return bad(label, "array too large");
    numel *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t bytes = numel * dtype_size(dtype);
  if (image.size() - pos < bytes)
    return bad(label, "truncated: needs " + std::to_string(bytes) + " data bytes, has " + std::to_string(image.size() - pos));
  *out = OwnedTensor(dtype, shape);
  if (bytes) std::memcpy(out->bytes.data(), image.data() + pos, bytes);
  return Status::Ok();
}

Status serialize_npy(const OwnedTensor& t, std::vector<unsigned char>* image) {
  std::string descr;
  static const std::pair<const char*, DType> table[] = {
      {"<f2", DType::F16}, {"<f4", DType::F32}, {"<f8", DType::F64}, {"|i1", DType::I8},  {"|u1", DType::U8},
      {"|b1", DType::Bool}, {"<i4", DType::I32}, {"<i8", DType::I64}, {"<u8", DType::U64},
  };
  for (const auto& [name, dt] : table)
    if (dt == t.dtype) descr = name;
  if (descr.empty())
    return {StatusCode::kUnsupported, std::string(dtype_name(t.dtype)), "numpy has no dtype for it"};
  std::string shape;  // a Python tuple: "2, 3", "3," or ""
  for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  if (t.shape.size() == 1) shape += ",";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  image->assign(10 + header.size() + t.bytes.size(), 0);
  const unsigned char prefix[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size() & 0xFF),
                                  static_cast<unsigned char>(header.size() >> 8)};
  std::memcpy(image->data(), prefix, sizeof prefix);
  std::memcpy(image->data() + 10, header.data(), header.size());
  if (!t.bytes.empty()) std::memcpy(image->data() + 10 + header.size(), t.bytes.data(), t.bytes.size());
  return Status::Ok();
}

Status write_npy(const std::string& path, const OwnedTensor& t) {
  std::vector<unsigned char> image;
  Status st = serialize_npy(t, &image);
  if (!st.ok()) return st;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f || !f.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size())))
    return {StatusCode::kInternal, path, "cannot write " + path};
  return Status::Ok();
}

Status read_npy(const std::string& path, OwnedTensor* out) {
  std::vector<unsigned char> image;
  const std::string label = std::filesystem::path(path).filename().string();
  if (!read_file(path, &image)) return bad(label, "cannot read " + path);
  return parse_npy(image, label, out);
}

}  // namespace fia::io
