#include "io/safetensors.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace fia::io {

namespace {

using json = nlohmann::json;

constexpr std::uint64_t kMaxHeader = 100u << 20;  // the safetensors reference limit is 100 MB

Status bad(const std::string& label, const std::string& msg) {
  return {StatusCode::kInvalidArgument, label, msg};
}

}  // namespace

nlohmann::json parse_json_object(const std::string& text, std::string* duplicate) {
  // Keys seen so far, one set per open object.
  std::vector<std::vector<std::string>> open;
  auto cb = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open.emplace_back();
    if (event == json::parse_event_t::object_end && !open.empty()) open.pop_back();
    if (event == json::parse_event_t::key && !open.empty()) {
      const std::string k = parsed.get<std::string>();
      auto& keys = open.back();
      if (std::find(keys.begin(), keys.end(), k) != keys.end() && duplicate->empty()) *duplicate = k;
      keys.push_back(k);
    }
    return true;
  };
  return json::parse(text, cb, /*allow_exceptions=*/false);
}

std::string json_excerpt(const nlohmann::json& value) {
  const std::string n = std::to_string(value.size()), plural = value.size() == 1 ? "" : "s";
  if (value.is_array()) return "a list of " + n + " element" + plural;
  if (value.is_object()) return "an object with " + n + " key" + plural;
  const std::string text = value.dump();
  return text.size() > 60 ? text.substr(0, 60) + "..." : text;
}

bool read_file(const std::string& path, std::vector<unsigned char>* out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size < 0) return false;
  f.seekg(0, std::ios::beg);
  out->resize(static_cast<std::size_t>(size));
  if (size > 0 && !f.read(reinterpret_cast<char*>(out->data()), size)) return false;
  return true;
}

Status parse_safetensors(const std::vector<unsigned char>& image, const std::string& label, TensorFile* out) {
  if (image.size() < 8) return bad(label, "truncated: shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | image[i];
  if (n > kMaxHeader) return bad(label, "header length " + std::to_string(n) + " exceeds 100 MB");
  if (n > image.size() - 8) return bad(label, "truncated: header length " + std::to_string(n) + " runs past the end of the file");
  const std::string header(reinterpret_cast<const char*>(image.data() + 8), n);
  std::string duplicate;
  json j = parse_json_object(header, &duplicate);
  if (!duplicate.empty()) return bad(label, "the header names '" + duplicate + "' twice");
  if (j.is_discarded() || !j.is_object()) return bad(label, "the header is not a JSON object");
  const std::uint64_t data_begin = 8 + n;
  const std::uint64_t data_size = image.size() - data_begin;

  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) return bad(label, "__metadata__ must be an object of strings");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) return bad(label, "__metadata__ value of '" + m.key() + "' is not a string");
        out->metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      return bad(label, "tensor '" + name + "' needs dtype, shape and data_offsets");
    DType dtype;
    if (!e["dtype"].is_string() || !parse_dtype(e["dtype"].get<std::string>(), &dtype))
      return bad(label, "tensor '" + name + "' has an unsupported dtype " + json_excerpt(e["dtype"]));
    const json& shape = e["shape"];
    if (!shape.is_array() || shape.size() > 16) return bad(label, "tensor '" + name + "' has a malformed shape");
    std::vector<std::int64_t> dims;
    std::uint64_t numel = 1;
    for (const json& d : shape) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0))
        return bad(label, "tensor '" + name + "' has a negative or non-integer dimension");
      const std::uint64_t v = d.get<std::uint64_t>();
      if (v > (std::uint64_t{1} << 40) || (v != 0 && numel > (std::uint64_t{1} << 46) / v))
        return bad(label, "tensor '" + name + "' is too large");
      numel *= v;
      dims.push_back(static_cast<std::int64_t>(v));
    }
    const json& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return bad(label, "tensor '" + name + "' has malformed data_offsets");
    const std::uint64_t b = off[0].get<std::uint64_t>(), en = off[1].get<std::uint64_t>();
    if (en < b || en > data_size)
      return bad(label, "truncated: tensor '" + name + "' data_offsets [" + std::to_string(b) + ", " +
                            std::to_string(en) + "] leave the " + std::to_string(data_size) + "-byte data area");
    if (en - b != numel * dtype_size(dtype))
      return bad(label, "tensor '" + name + "' has " + std::to_string(en - b) + " bytes but its shape needs " +
                            std::to_string(numel * dtype_size(dtype)));
    OwnedTensor t(dtype, std::move(dims));
    if (en > b) std::memcpy(t.bytes.data(), image.data() + data_begin + b, en - b);
    out->tensors[name] = std::move(t);
    if (en > b) spans.emplace_back(b, en);
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) return bad(label, "tensors overlap in the data area");
  return Status::Ok();
}

Status read_safetensors(const std::string& path, TensorFile* out) {
  std::vector<unsigned char> image;
  const std::string label = std::filesystem::path(path).filename().string();
  if (!read_file(path, &image)) return bad(label, "cannot read " + path);
  return parse_safetensors(image, label, out);
}

std::vector<unsigned char> serialize_safetensors(const std::vector<std::pair<std::string, const OwnedTensor*>>& tensors,
                                                 const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    json e;
    e["dtype"] = std::string(dtype_name(t->dtype));
    e["shape"] = t->shape;
    e["data_offsets"] = {offset, offset + t->bytes.size()};
    header[name] = e;
    offset += t->bytes.size();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h = header.dump();
  while ((8 + h.size()) % 8 != 0) h.push_back(' ');  // keep the data 8-byte aligned
  std::vector<unsigned char> image(8 + h.size() + offset);
  const std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) image[i] = static_cast<unsigned char>(n >> (8 * i));
  std::memcpy(image.data() + 8, h.data(), h.size());
  std::size_t pos = 8 + h.size();
  for (const auto& [name, t] : tensors) {
    if (!t->bytes.empty()) std::memcpy(image.data() + pos, t->bytes.data(), t->bytes.size());
    pos += t->bytes.size();
  }
  return image;
}

Status write_safetensors(const std::string& path, const std::vector<std::pair<std::string, const OwnedTensor*>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  const std::vector<unsigned char> image = serialize_safetensors(tensors, metadata);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f || !f.write(reinterpret_cast<const char*>(image.data()), static_cast<std::streamsize>(image.size()))) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return {StatusCode::kInternal, path, "cannot write " + tmp};
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return {StatusCode::kInternal, path, "cannot write " + path + ": it exists and is not a file"};
  }
  return Status::Ok();
}

}  // namespace fia::io
