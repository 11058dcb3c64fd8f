#include "bench/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "args/tensor_slots.hpp"
#include "io/case_dir.hpp"
#include "numeric/half.hpp"
#include "validate/build_problem.hpp"

namespace fia::bench {

namespace {

using json = nlohmann::json;

/// Uniform values in [-1, 1) (int8: any byte) from a splitmix64 stream seeded by `rng`.
void fill_random(OwnedTensor& t, std::mt19937_64& rng) {
  std::uint64_t x = rng();
  auto next = [&x] {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto uniform = [&] { return static_cast<float>(next() >> 40) * 0x1p-23f - 1.0f; };
  const std::int64_t n = t.numel();
  switch (t.dtype) {
    case DType::F16:
      for (std::int64_t i = 0; i < n; ++i) t.as<std::uint16_t>()[i] = detail::f32_to_f16(uniform());
      break;
    case DType::BF16:
      for (std::int64_t i = 0; i < n; ++i) t.as<std::uint16_t>()[i] = detail::f32_to_bf16(uniform());
      break;
    case DType::F32:
      for (std::int64_t i = 0; i < n; ++i) t.as<float>()[i] = uniform();
      break;
    case DType::I8:
      for (std::int64_t i = 0; i < n; ++i) t.as<std::int8_t>()[i] = static_cast<std::int8_t>(next());
      break;
    default: break;
  }
}

/// Points an FiaArgs slot at `t` (key/value become one-tensor lists).
void bind_tensor(FiaArgs& a, const std::string& name, const OwnedTensor& t) {
  if (name == "key") a.key.assign(1, t.view());
  else if (name == "value") a.value.assign(1, t.view());
  else if (TensorView* slot = detail::tensor_slot(a, name)) *slot = t.view();
}

/// Builds one copy of a shapes.json entry's tensors.
std::unique_ptr<CallData> build_copy(const json& entry, std::uint64_t seed) {
  auto c = std::make_unique<CallData>();
  Status st = io::parse_params(entry.at("params").dump(), &c->args);
  if (!st.ok()) throw std::runtime_error("params: " + st.to_string());
  std::mt19937_64 rng(seed);
  for (const auto& [name, spec] : entry.at("tensors").items()) {
    DType dtype;
    if (!parse_dtype(spec.at(0).get<std::string>(), &dtype)) throw std::runtime_error("unknown dtype for " + name);
    OwnedTensor t(dtype, spec.at(1).get<std::vector<std::int64_t>>());
    if (name == "block_table") {
      // Every block of the pool once, in shuffled order (paged KV of a running server).
      std::vector<std::int32_t> ids(static_cast<std::size_t>(t.numel()));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      std::copy(ids.begin(), ids.end(), t.as<std::int32_t>());
    } else if (name == "atten_mask") {
      const std::int64_t cols = t.shape.back(), rows = t.numel() / cols;
      for (std::int64_t i = 0; i < t.numel(); ++i) t.as<std::uint8_t>()[i] = (i % cols) > (i / cols) % rows ? 1 : 0;
    } else {
      fill_random(t, rng);
    }
    c->tensors.push_back(std::move(t));
    bind_tensor(c->args, name, c->tensors.back());
  }
  return c;
}

}  // namespace

bool describe_work(Workload& w) {
  detail::Problem p;
  if (w.copies.empty() || !detail::build_problem(w.copies[0]->args, false, &p).ok()) return false;
  const double es = static_cast<double>(dtype_size(p.dtype));
  double bytes = 0.0, cells = 0.0;
  std::int64_t max_q = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const double L = static_cast<double>(p.kv_len(b));
    bytes += L * static_cast<double>(p.num_kv_heads) * static_cast<double>(p.qk_dim + p.rope_dim + p.v_dim) * es;
    cells += static_cast<double>(p.act_q[b]) * L;
    max_q = std::max(max_q, p.act_q[b]);
  }
  const std::int64_t mode = w.copies[0]->args.sparse_mode;
  const bool causal = mode == 2 || mode == 3;
  w.bytes_per_call = bytes;
  w.flops_per_call = 2.0 * static_cast<double>(p.num_heads) * cells * static_cast<double>(p.qk_dim + p.v_dim) * (causal ? 0.5 : 1.0);
  w.decode = max_q <= 16;
  return true;
}

std::vector<Workload> load_shapes(const std::string& path, const std::vector<std::string>& only) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  const json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("shapes") || !j["shapes"].is_array()) throw std::runtime_error(path + ": no 'shapes' list");
  std::vector<Workload> out;
  for (const json& e : j["shapes"]) {
    const std::string name = e.value("name", "");
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    Workload w;
    w.name = name;
    w.what = e.value("what", "");
    try {
      w.copies.push_back(build_copy(e, 1234));
      if (!describe_work(w)) {
        Plan pl;
        const Status st = plan(w.copies[0]->args, Options{}, &pl);
        w.error = st.ok() ? "invalid call" : st.to_string();
        w.unsupported = st.code == StatusCode::kUnsupported;
      }
    } catch (const std::exception& ex) {
      w.error = ex.what();
    }
    out.push_back(std::move(w));
  }
  return out;
}

Workload load_case_workload(const std::string& dir) {
  Workload w;
  w.name = dir;
  w.what = "case folder";
  auto c = std::make_unique<CallData>();
  io::Case loaded;
  const Status st = io::load_case(dir, &loaded);
  if (!st.ok()) {
    w.error = st.to_string();
    return w;
  }
  // Move the tensors into the CallData and re-point the arguments at them.
  c->args = loaded.args;
  for (auto& [name, t] : loaded.tensors) c->tensors.push_back(std::move(t));
  w.copies.push_back(std::move(c));
  if (!describe_work(w)) w.error = "invalid call";
  return w;
}

void add_cold_copies(Workload& w, double bytes) {
  if (!w.decode || w.copies.empty() || !w.error.empty()) return;
  double kv_bytes = 0.0;
  const FiaArgs& a = w.copies[0]->args;
  for (const auto* v : {&a.key[0], &a.value[0]}) kv_bytes += static_cast<double>(v->numel()) * static_cast<double>(dtype_size(v->dtype));
  const auto n = static_cast<std::size_t>(std::max(2.0, std::ceil(bytes / std::max(kv_bytes, 1.0))));
  std::mt19937_64 rng(99);
  while (w.copies.size() < n) {
    auto c = std::make_unique<CallData>();
    c->args = a;
    for (const bool key : {true, false}) {
      const TensorView& v = key ? a.key[0] : a.value[0];
      OwnedTensor t(v.dtype, v.shape);
      fill_random(t, rng);
      c->tensors.push_back(std::move(t));
      std::vector<TensorView>& slot = key ? c->args.key : c->args.value;
      slot.assign(1, c->tensors.back().view());
    }
    w.copies.push_back(std::move(c));
  }
}

}  // namespace fia::bench
