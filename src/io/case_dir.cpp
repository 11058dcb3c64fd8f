#include "fia/io/case_dir.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "args/tensor_slots.hpp"
#include "io/json_text.hpp"
#include "fia/io/npy.hpp"
#include "fia/io/safetensors.hpp"
#include "validate/printable.hpp"

namespace fia::io {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

Status bad(const std::string& name, const std::string& msg) { return {StatusCode::kInvalidArgument, name, msg}; }

Status get_int(const json& v, const std::string& key, std::int64_t* out) {
  if (!v.is_number_integer()) return bad(key, "must be an integer, got " + json_brief(v));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    return bad(key, "must fit in int64, got " + json_brief(v));
  *out = v.get<std::int64_t>();
  return Status::Ok();
}

Status get_int_list(const json& v, const std::string& key, std::optional<std::vector<std::int64_t>>* out) {
  if (v.is_null()) {
    out->reset();
    return Status::Ok();
  }
  if (!v.is_array()) return bad(key, "must be a list of integers, got " + json_brief(v));
  std::vector<std::int64_t> r;
  for (const json& e : v) {
    std::int64_t x;
    if (!get_int(e, key, &x).ok()) return bad(key, "must be a list of integers, got element " + json_brief(e));
    r.push_back(x);
  }
  *out = std::move(r);
  return Status::Ok();
}

const std::set<std::string>& tensor_names() {
  static const std::set<std::string> names = [] {
    std::set<std::string> n = {"key", "value"};
    FiaArgs a;
    for (const auto& [name, slot] : detail::tensor_slots(a)) n.emplace(name);
    return n;
  }();
  return names;
}

/// Splits "key.3" into ("key", 3); returns false for names without a canonical decimal suffix
/// ("key.03" is not a list name, so one slot cannot be given twice).
bool list_name(const std::string& name, std::string* base, std::size_t* index) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size() || name.size() - dot > 7) return false;
  if (name[dot + 1] == '0' && dot + 2 != name.size()) return false;
  for (std::size_t i = dot + 1; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  *base = name.substr(0, dot);
  *index = std::stoul(name.substr(dot + 1));
  return true;
}


/// Points the FiaArgs tensor slots at the loaded tensors; builds key/value tensor lists.
Status bind_tensors(Case* c) {
  FiaArgs& a = c->args;
  std::map<std::string, std::map<std::size_t, const OwnedTensor*>> lists;
  for (const auto& [name, t] : c->tensors) {
    std::string base;
    std::size_t index;
    if (name == "key" || name == "value") {
      std::vector<TensorView>& dst = name == "key" ? a.key : a.value;
      dst.assign(1, t.view());
    } else if (list_name(name, &base, &index) && (base == "key" || base == "value")) {
      lists[base][index] = &t;
    } else if (TensorView* slot = detail::tensor_slot(a, name)) {
      *slot = t.view();
    } else {
      return bad("inputs.safetensors", "unknown tensor name '" + detail::printable(name, 64) +
                                           "' (expected a torch_npu input name, or key.N / value.N)");
    }
  }
  for (const char* base : {"key", "value"}) {
    auto it = lists.find(base);
    if (it == lists.end()) continue;
    std::vector<TensorView>& dst = std::string(base) == "key" ? a.key : a.value;
    if (!dst.empty()) return bad(base, std::string("both '") + base + "' and '" + base + ".N' tensors are given");
    std::size_t expect = 0;
    for (const auto& [index, t] : it->second) {
      if (index != expect)
        return bad(base, std::string("tensor-list entries must be numbered 0, 1, 2, ...; missing ") + base + "." +
                             std::to_string(expect));
      dst.push_back(t->view());
      ++expect;
    }
  }
  return Status::Ok();
}

}  // namespace

Status parse_params(const std::string& json_text, FiaArgs* args) {
  const JsonObject parsed = parse_json_object(json_text);
  if (!parsed.ok()) {
    if (parsed.key.empty()) return bad("params.json", parsed.message);
    return bad(parsed.key, parsed.message + (parsed.error == JsonObject::Error::kDuplicate ? " in params.json" : ""));
  }
  const json& j = parsed.value;
  FiaArgs& a = *args;
  if (j.contains("scale") && j.contains("scale_value"))
    return bad("scale", "both scale and its alias scale_value are given");
  const std::pair<const char*, std::int64_t*> ints[] = {
      {"num_heads", &a.num_heads},
      {"pre_tokens", &a.pre_tokens},
      {"next_tokens", &a.next_tokens},
      {"num_key_value_heads", &a.num_key_value_heads},
      {"sparse_mode", &a.sparse_mode},
      {"inner_precise", &a.inner_precise},
      {"block_size", &a.block_size},
      {"antiquant_mode", &a.antiquant_mode},
      {"key_antiquant_mode", &a.key_antiquant_mode},
      {"value_antiquant_mode", &a.value_antiquant_mode},
      {"query_quant_mode", &a.query_quant_mode},
  };
  const std::pair<const char*, std::optional<std::vector<std::int64_t>>*> lists[] = {
      {"actual_seq_lengths", &a.actual_seq_lengths},
      {"actual_seq_lengths_kv", &a.actual_seq_lengths_kv},
      {"actual_shared_prefix_len", &a.actual_shared_prefix_len},
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    bool known = false;
    for (const auto& [name, slot] : ints) {
      if (key != name) continue;
      known = true;
      Status st = get_int(v, key, slot);
      if (!st.ok()) return st;
    }
    for (const auto& [name, slot] : lists) {
      if (key != name) continue;
      known = true;
      Status st = get_int_list(v, key, slot);
      if (!st.ok()) return st;
    }
    if (key == "scale" || key == "scale_value") {
      known = true;
      if (!v.is_number()) return bad(key, "must be a number, got " + json_brief(v));
      a.scale = v.get<double>();
    } else if (key == "input_layout") {
      known = true;
      if (!v.is_string()) return bad(key, "must be a string, got " + json_brief(v));
      a.input_layout = v.get<std::string>();
    } else if (key == "softmax_lse_flag") {
      known = true;
      if (!v.is_boolean()) return bad(key, "must be true or false, got " + json_brief(v));
      a.softmax_lse_flag = v.get<bool>();
    }
    if (!known) {  // an empty key cannot name itself: the file is named instead
      if (key.empty()) return bad("params.json", "unknown parameter \"\" (an empty key)");
      return bad(detail::printable(key, 64), "unknown parameter");
    }
  }
  return Status::Ok();
}

Status load_case(const std::string& dir, Case* out) {
  if (!fs::is_directory(dir)) return bad("CASE_DIR", "not a directory: " + dir);
  const fs::path root(dir);
  if (fs::exists(root / "params.json")) {
    std::vector<unsigned char> text;
    if (!read_file((root / "params.json").string(), &text)) return bad("params.json", "cannot read the file");
    Status st = parse_params(std::string(text.begin(), text.end()), &out->args);
    if (!st.ok()) return st;
  }
  if (fs::exists(root / "inputs.safetensors")) {
    TensorFile f;
    Status st = read_safetensors((root / "inputs.safetensors").string(), &f);
    if (!st.ok()) return st;
    out->tensors = std::move(f.tensors);
  }
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.path().extension() != ".npy") continue;
    const std::string name = entry.path().stem().string();
    std::string base;
    std::size_t index;
    const bool known = tensor_names().count(name) || (list_name(name, &base, &index) && (base == "key" || base == "value"));
    if (!known)
      return bad(detail::printable(name, 64),
                 "unknown tensor name in " + detail::printable(entry.path().filename().string()));
    if (out->tensors.count(name)) return bad(name, "given both in inputs.safetensors and as " + name + ".npy");
    OwnedTensor t;
    Status st = read_npy(entry.path().string(), &t);
    if (!st.ok()) return st;
    out->tensors[name] = std::move(t);
  }
  if (out->tensors.empty())
    return bad("inputs.safetensors", "the case folder has neither inputs.safetensors nor NAME.npy tensors: " + dir);
  return bind_tensors(out);
}

namespace {

/// A contiguous copy of a (possibly strided) view.
OwnedTensor contiguous_copy(const TensorView& v) {
  OwnedTensor t(v.dtype, v.shape);
  const std::size_t es = dtype_size(v.dtype);
  std::vector<std::int64_t> idx(v.rank(), 0);
  for (std::int64_t lin = 0; lin < t.numel(); ++lin) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < v.rank(); ++k) off += idx[k] * v.stride(k);
    std::memcpy(t.bytes.data() + lin * es, static_cast<const std::byte*>(v.data) + off * static_cast<std::int64_t>(es), es);
    for (std::size_t k = v.rank(); k-- > 0;) {
      if (++idx[k] < v.shape[k]) break;
      idx[k] = 0;
    }
  }
  return t;
}

}  // namespace

Status save_case(const std::string& dir, const FiaArgs& a) {
  const FiaArgs defaults;
  json p = json::object();
  auto put_int = [&](const char* name, std::int64_t v, std::int64_t d) {
    if (v != d) p[name] = v;
  };
  put_int("num_heads", a.num_heads, defaults.num_heads);
  if (a.scale != defaults.scale) p["scale"] = a.scale;
  put_int("pre_tokens", a.pre_tokens, defaults.pre_tokens);
  put_int("next_tokens", a.next_tokens, defaults.next_tokens);
  if (a.input_layout != defaults.input_layout) p["input_layout"] = a.input_layout;
  put_int("num_key_value_heads", a.num_key_value_heads, 0);
  put_int("sparse_mode", a.sparse_mode, 0);
  put_int("inner_precise", a.inner_precise, 0);
  put_int("block_size", a.block_size, 0);
  put_int("antiquant_mode", a.antiquant_mode, 0);
  put_int("key_antiquant_mode", a.key_antiquant_mode, 0);
  put_int("value_antiquant_mode", a.value_antiquant_mode, 0);
  put_int("query_quant_mode", a.query_quant_mode, 0);
  if (a.softmax_lse_flag) p["softmax_lse_flag"] = true;
  if (a.actual_seq_lengths) p["actual_seq_lengths"] = *a.actual_seq_lengths;
  if (a.actual_seq_lengths_kv) p["actual_seq_lengths_kv"] = *a.actual_seq_lengths_kv;
  if (a.actual_shared_prefix_len) p["actual_shared_prefix_len"] = *a.actual_shared_prefix_len;

  std::map<std::string, OwnedTensor> copies;
  for (const auto& name : tensor_names()) {
    if (name == "key" || name == "value") continue;
    const TensorView* v = detail::tensor_slot(a, name);
    if (v && v->present()) copies[name] = contiguous_copy(*v);
  }
  const bool list = a.key.size() > 1;
  for (std::size_t i = 0; i < a.key.size(); ++i) copies[list ? "key." + std::to_string(i) : "key"] = contiguous_copy(a.key[i]);
  for (std::size_t i = 0; i < a.value.size(); ++i)
    copies[list ? "value." + std::to_string(i) : "value"] = contiguous_copy(a.value[i]);

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return {StatusCode::kInternal, "CASE_DIR", "cannot create " + dir + ": " + ec.message()};
  {
    std::ofstream f(fs::path(dir) / "params.json");
    f << p.dump(1) << "\n";
    if (!f) return {StatusCode::kInternal, "params.json", "cannot write " + dir + "/params.json"};
  }
  std::vector<std::pair<std::string, const OwnedTensor*>> list_of;
  for (const auto& [name, t] : copies) list_of.emplace_back(name, &t);
  return write_safetensors((fs::path(dir) / "inputs.safetensors").string(), list_of);
}

Status write_outputs(const std::string& out_dir, const Outputs& outputs) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return {StatusCode::kInternal, "OUT_DIR", "cannot create " + out_dir + ": " + ec.message()};
  return write_safetensors((fs::path(out_dir) / "outputs.safetensors").string(),
                           {{"attention_out", &outputs.attention_out}, {"softmax_lse", &outputs.softmax_lse}});
}

}  // namespace fia::io
