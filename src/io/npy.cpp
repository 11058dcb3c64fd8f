#include "fia/io/npy.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

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

  std::smatch m;
  static const std::regex descr_re(R"('descr'\s*:\s*'([^']*)')");
  static const std::regex fortran_re(R"('fortran_order'\s*:\s*(True|False))");
  static const std::regex shape_re(R"('shape'\s*:\s*\(([^)]*)\))");
  if (!std::regex_search(h, m, descr_re)) return bad(label, "header has no 'descr'");
  DType dtype;
  if (!descr_dtype(m[1].str(), &dtype)) return bad(label, "unsupported dtype '" + m[1].str() + "'");
  if (!std::regex_search(h, m, fortran_re)) return bad(label, "header has no 'fortran_order'");
  if (m[1].str() == "True") return bad(label, "Fortran-order arrays are not supported");
  if (!std::regex_search(h, m, shape_re)) return bad(label, "header has no 'shape'");
  std::vector<std::int64_t> shape;
  const std::string dims = m[1].str();
  static const std::regex num_re(R"(\s*(\d+)\s*(,|$))");
  std::size_t consumed = 0;
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num_re); it != std::sregex_iterator(); ++it) {
    if (static_cast<std::size_t>(it->position()) != consumed) return bad(label, "malformed shape (" + dims + ")");
    if ((*it)[1].length() > 12) return bad(label, "dimension too large in shape (" + dims + ")");
    shape.push_back(std::stoll((*it)[1].str()));
    consumed = it->position() + it->length();
  }
  if (dims.find_first_not_of(" ,", consumed) != std::string::npos) return bad(label, "malformed shape (" + dims + ")");
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
