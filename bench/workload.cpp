#include "bench/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "args/tensor_slots.hpp"
#include "fia/io/case_dir.hpp"
#include "io/json_text.hpp"
#include "cpu/amx.hpp"
#include "cpu/isa.hpp"
#include "numeric/half.hpp"
#include "plan/plan.hpp"
#include "validate/build_problem.hpp"

namespace fia::bench {

namespace {

using json = nlohmann::json;

/// Random contents from a splitmix64 stream seeded by `rng`: float tensors uniform in [lo, hi)
/// (lo == hi: that constant); I8 integers in [-127, 127]; I32 any 32-bit word (as packed int4 K/V:
/// eight nibbles, each any value in [-8, 7]). Other dtypes stay zero.
void fill_random(const MutableTensorView& t, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uint64_t x = rng();
  auto next = [&x] {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto uniform = [&] { return lo + (hi - lo) * (static_cast<float>(next() >> 40) * 0x1p-24f); };
  const std::int64_t n = t.numel();
  switch (t.dtype) {
    case DType::F16:
      for (std::int64_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(t.data)[i] = detail::f32_to_f16(uniform());
      break;
    case DType::BF16:
      for (std::int64_t i = 0; i < n; ++i) static_cast<std::uint16_t*>(t.data)[i] = detail::f32_to_bf16(uniform());
      break;
    case DType::F32:
      for (std::int64_t i = 0; i < n; ++i) static_cast<float*>(t.data)[i] = uniform();
      break;
    case DType::I8:
      for (std::int64_t i = 0; i < n; ++i)
        static_cast<std::int8_t*>(t.data)[i] = static_cast<std::int8_t>(static_cast<int>(next() % 255) - 127);
      break;
    case DType::I32:
      for (std::int64_t i = 0; i < n; ++i) static_cast<std::uint32_t*>(t.data)[i] = static_cast<std::uint32_t>(next() >> 32);
      break;
    default: break;
  }
}

/// The value range of float tensor `name` of a shapes.json entry whose key has dtype `key_dtype`,
/// chosen so that dequantized values stay in a realistic range (|x| <= 1.5, with offsets about 2):
///   * antiquant scales (key_/value_/combined antiquant_scale, any mode and dtype): U[0.5, 1.5] / q
///     with q the largest stored magnitude of the key's integer type: 127 for I8 K/V, 7 for I32
///     (packed int4) K/V;
///   * antiquant offsets: U[-2, 2] (added to the integer before scaling, FIA-SPEC 12.1);
///   * full quantization (FIA-SPEC 13.1, per-tensor, int8 Q/K/V read as x / 127): dequant_scale1 and
///     dequant_scale2 1 / 127^2, quant_scale1 127 (softmax numerators in [0, 1] to int8),
///     quant_scale2 127 and quant_offset2 0 (output in about [-1, 1] to int8);
///   * everything else (query, float K/V, rope, pse, ...): U[-1, 1].
std::pair<float, float> value_range(const std::string& name, DType key_dtype) {
  auto ends_with = [&name](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends_with("antiquant_scale")) {
    const float q = key_dtype == DType::I32 ? 7.0f : 127.0f;
    return {0.5f / q, 1.5f / q};
  }
  if (ends_with("antiquant_offset")) return {-2.0f, 2.0f};
  if (name == "dequant_scale1" || name == "dequant_scale2") return {1.0f / (127.0f * 127.0f), 1.0f / (127.0f * 127.0f)};
  if (name == "quant_scale1" || name == "quant_scale2") return {127.0f, 127.0f};
  if (name == "quant_offset2") return {0.0f, 0.0f};
  return {-1.0f, 1.0f};
}

/// A new zeroed tensor of `c` on its pages, its data at least 64-byte aligned as torch's CPU
/// allocator aligns it (glibc puts a large block 16 bytes past a page: every 64-byte piece of a K
/// row would then span two cache lines, which callers' tensors do not).
MutableTensorView add_tensor(CallData& c, DType dtype, std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  c.blocks.emplace_back(static_cast<std::size_t>(n) * dtype_size(dtype), c.pages);
  return {c.blocks.back().data(), dtype, std::move(shape)};
}

/// Points an FiaArgs slot at `t` (key/value become one-tensor lists).
void bind_tensor(FiaArgs& a, const std::string& name, const MutableTensorView& m) {
  const TensorView t(m.data, m.dtype, m.shape);
  if (name == "key") a.key.assign(1, t);
  else if (name == "value") a.value.assign(1, t);
  else if (TensorView* slot = detail::tensor_slot(a, name)) *slot = t;
}

/// Builds one copy of a shapes.json entry's tensors.
std::unique_ptr<CallData> build_copy(const json& entry, std::uint64_t seed, Pages pages) {
  auto c = std::make_unique<CallData>();
  c->pages = pages;
  Status st = io::parse_params(entry.at("params").dump(), &c->args);
  if (!st.ok()) throw std::runtime_error("params: " + st.to_string());
  std::mt19937_64 rng(seed);
  DType key_dtype = DType::F16;
  if (entry.at("tensors").contains("key")) parse_dtype(entry["tensors"]["key"].at(0).get<std::string>(), &key_dtype);
  for (const auto& [name, spec] : entry.at("tensors").items()) {
    DType dtype;
    if (!parse_dtype(spec.at(0).get<std::string>(), &dtype)) throw std::runtime_error("unknown dtype for " + name);
    const MutableTensorView t = add_tensor(*c, dtype, spec.at(1).get<std::vector<std::int64_t>>());
    if (name == "block_table") {
      // Every block of the pool once, in shuffled order (paged KV of a running server).
      std::vector<std::int32_t> ids(static_cast<std::size_t>(t.numel()));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      std::copy(ids.begin(), ids.end(), static_cast<std::int32_t*>(t.data));
    } else if (name == "atten_mask") {
      const std::int64_t cols = t.shape.back(), rows = t.numel() / cols;
      for (std::int64_t i = 0; i < t.numel(); ++i) static_cast<std::uint8_t*>(t.data)[i] = (i % cols) > (i / cols) % rows ? 1 : 0;
    } else {
      const auto [lo, hi] = value_range(name, key_dtype);
      fill_random(t, rng, lo, hi);
    }
    bind_tensor(c->args, name, t);
  }
  return c;
}

/// Bytes of one stored K/V element (FIA-SPEC 12): float K/V in the query dtype, int8 one byte,
/// int4 half a byte (eight logical elements per int32 word).
double kv_element_bytes(const detail::Problem& p) {
  switch (p.kv_format) {
    case detail::KvFormat::kInt8: return 1.0;
    case detail::KvFormat::kInt4: return 0.5;
    default: return static_cast<double>(dtype_size(p.dtype));
  }
}

/// Bytes of one tensor's antiquant parameters a call reads. Per-token modes (1, 3, 4, 5): one F32
/// scale (and offset) per token the lengths cover, per KV head for the per-head modes (3, 5).
/// Other modes: the channel tables (KV_N x D) in the query dtype; per-tensor and per-head
/// parameters (modes 0 with shape (1), 2), which the library expands to such tables, count as
/// the table too (at most a few KB too many).
double antiquant_bytes(const detail::Problem& p, const detail::Antiquant& aq, double tokens) {
  if (aq.per_token) {
    const double per_token = (aq.head_stride != 0 ? static_cast<double>(p.num_kv_heads) : 1.0) * 4.0;
    return tokens * per_token * (aq.token_offset != nullptr ? 2.0 : 1.0);
  }
  const double tables = static_cast<double>(aq.channel_scale.size() + aq.channel_offset.size());
  return tables * static_cast<double>(dtype_size(p.dtype));
}

/// Records why the library rejects the workload's call (its plan() status).
void note_rejection(Workload& w) {
  Plan pl;
  const Status st = plan(w.copies[0]->args, Options{}, &pl);
  w.error = st.ok() ? "invalid call" : st.to_string();
  w.unsupported = st.code == StatusCode::kUnsupported;
}

}  // namespace

double bytes_read(const detail::Problem& p) {
  const double kv_es = kv_element_bytes(p), rope_es = static_cast<double>(dtype_size(p.dtype));
  const double heads = static_cast<double>(p.num_kv_heads);
  double bytes = 0.0, tokens = 0.0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const double L = static_cast<double>(p.kv_len(b));
    tokens += L;
    const std::int64_t v_dim = p.values_are_keys ? 0 : p.v_dim;  // decode MLA reads V as the K rows
    bytes += L * heads * (static_cast<double>(p.qk_dim + v_dim) * kv_es + static_cast<double>(p.rope_dim) * rope_es);
    for (const detail::KvSegment& seg : p.segments) {  // the block-table entries the lengths reach
      if (seg.paged && seg.block_size > 0)
        bytes += 4.0 * static_cast<double>((seg.length[b] + seg.block_size - 1) / seg.block_size);
    }
  }
  if (p.kv_format != detail::KvFormat::kFloat)
    bytes += antiquant_bytes(p, p.key_antiquant, tokens) + antiquant_bytes(p, p.value_antiquant, tokens);
  return bytes;
}

namespace {

/// The shares of the cells (packed rows x columns of the items) of `p` whose Q·Kᵀ and whose P·V
/// the kernels run as bf16 dot products (cpu/bf16_dots-inl.h) or on AMX tiles (cpu/amx.hpp), as
/// a plan made now would, on an AVX-512 instruction set: Q·Kᵀ of in-place items as dot products
/// (detail::bf16_key_dots; items of 16 rows run in place unless the tiles take both products of
/// wide items), that of other wide items on tiles (amx_wide_keys) or else as dot
/// products (bf16_wide_key_dots); P·V of those wide items on tiles (amx_wide_values), and else
/// that of these items where P is E rounded to bf16 as dot products (bf16_value_dots; the few
/// products either takes in fp32, of non-finite V rows and the smallest P, count as theirs).
/// Narrow (decode) items take neither.
struct ProductShares {
  double dot_keys = 0.0, dot_values = 0.0, tile_keys = 0.0, tile_values = 0.0;
};

ProductShares product_shares(detail::Problem p) {
  detail::read_kernel_settings(&p);  // as plan() does
  const bool tiles = detail::amx_wide_keys(p);
  if (!(detail::bf16_key_dots(p) || tiles)) return {};  // both only on kernels that have them
  const detail::CpuPlan plan = detail::make_cpu_plan(p, 1);
  double all = 0.0;
  ProductShares d;
  auto add = [&](const detail::WorkItem& it) {
    const double cells = static_cast<double>(detail::packed_rows(it) * (it.col_end - it.col_begin));
    all += cells;
    const bool in_place = detail::runs_in_place(plan, it), wide = !in_place && detail::is_wide(it);
    const bool wide_fast = wide && (tiles || detail::bf16_wide_key_dots(p));  // wide_pair_scores
    if (in_place && detail::bf16_key_dots(p)) d.dot_keys += cells;
    if (wide && tiles) d.tile_keys += cells;
    if (wide && !tiles && detail::bf16_wide_key_dots(p)) d.dot_keys += cells;
    if (wide_fast && detail::amx_wide_values(p)) {
      d.tile_values += cells;
    } else if ((in_place || wide_fast) && detail::bf16_value_dots(p)) {
      d.dot_values += cells;
    }
  };
  for (const detail::WorkItem& it : plan.items) add(it);
  for (const detail::SplitGroup& g : plan.splits) add(g.item);
  if (all > 0) d.dot_keys /= all, d.dot_values /= all, d.tile_keys /= all, d.tile_values /= all;
  return d;
}

}  // namespace

bool describe_work(Workload& w) {
  detail::Problem p;
  if (w.copies.empty() || !detail::build_problem(w.copies[0]->args, false, &p).ok()) return false;
  double cells = 0.0;
  std::int64_t max_q = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    cells += static_cast<double>(p.act_q[b]) * static_cast<double>(p.kv_len(b));
    max_q = std::max(max_q, p.act_q[b]);
  }
  const std::int64_t mode = w.copies[0]->args.sparse_mode;
  const bool causal = mode == 2 || mode == 3;
  w.bytes_per_call = bytes_read(p);
  w.values_are_keys = p.values_are_keys;
  w.int8_products = p.full_quant.on;
  detail::Problem planned = p;
  detail::read_kernel_settings(&planned);  // as plan() does
  w.int8_tiles = detail::full_quant_tiles(planned);
  // QK over QK_D + rope (MLA: 512 + 64), PV over V_D; 2 FLOPs per multiply-add.
  w.flops_per_call = 2.0 * static_cast<double>(p.num_heads) * cells * static_cast<double>(p.qk_dim + p.rope_dim + p.v_dim) *
                     (causal ? 0.5 : 1.0);
  w.decode = max_q <= 16;
  const ProductShares shares = product_shares(p);
  const double kw = static_cast<double>(p.qk_dim + p.rope_dim), vd = static_cast<double>(p.v_dim);
  w.dot_flops_per_call = w.flops_per_call * (kw * shares.dot_keys + vd * shares.dot_values) / (kw + vd);
  w.tile_flops_per_call = w.flops_per_call * (kw * shares.tile_keys + vd * shares.tile_values) / (kw + vd);
  return true;
}

std::vector<Workload> load_shapes(const std::string& path, const std::vector<std::string>& only, Pages pages) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  const io::JsonObject parsed = io::parse_json_object(ss.str());  // bounded nesting: no stack overflow
  if (!parsed.ok())
    throw std::runtime_error(path + ": " + (parsed.key.empty() ? "" : "'" + parsed.key + "': ") + parsed.message);
  const json& j = parsed.value;
  if (!j.contains("shapes") || !j["shapes"].is_array()) throw std::runtime_error(path + ": no 'shapes' list");
  std::vector<Workload> out;
  for (const json& e : j["shapes"]) {
    const std::string name = e.value("name", "");
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    Workload w;
    w.name = name;
    w.what = e.value("what", "");
    try {
      w.copies.push_back(build_copy(e, 1234, pages));
      if (!describe_work(w)) note_rejection(w);
    } catch (const std::exception& ex) {
      w.error = ex.what();
    }
    out.push_back(std::move(w));
  }
  return out;
}

Workload load_case_workload(const std::string& dir, Pages pages) {
  Workload w;
  w.name = dir;
  w.what = "case folder";
  auto c = std::make_unique<CallData>();
  c->pages = pages;
  io::Case loaded;
  const Status st = io::load_case(dir, &loaded);
  if (!st.ok()) {
    w.error = st.to_string();
    return w;
  }
  // Copy every tensor onto the pages asked for and re-point the arguments at the copies.
  c->args = loaded.args;
  std::map<const void*, void*> moved;
  for (auto& [name, t] : loaded.tensors) {
    if (t.bytes.empty()) continue;  // nothing to read: the view stays as loaded
    const MutableTensorView copy = add_tensor(*c, t.dtype, t.shape);
    std::memcpy(copy.data, t.bytes.data(), t.bytes.size());
    moved[t.bytes.data()] = copy.data;
    std::vector<std::byte>().swap(t.bytes);  // (only its address is looked up from here on)
  }
  auto repoint = [&moved](TensorView& v) {
    if (const auto it = moved.find(v.data); it != moved.end()) v.data = it->second;
  };
  for (auto& [name, slot] : detail::tensor_slots(c->args)) repoint(*slot);
  for (TensorView& v : c->args.key) repoint(v);
  for (TensorView& v : c->args.value) repoint(v);
  w.copies.push_back(std::move(c));
  if (!describe_work(w)) note_rejection(w);
  return w;
}

namespace {

/// The tensors of `a` the cold rotation swaps: every tensor of the key list, and of the value list
/// unless the call ignores it (V := K).
template <class Args>
auto rotated_tensors(const Workload& w, Args& a) {
  std::vector<decltype(&a.key[0])> out;
  for (auto& v : a.key) out.push_back(&v);
  if (!w.values_are_keys)
    for (auto& v : a.value) out.push_back(&v);
  return out;
}

std::size_t tensor_bytes(const TensorView& v) { return static_cast<std::size_t>(v.numel()) * dtype_size(v.dtype); }

}  // namespace

std::vector<ByteRange> kv_ranges(const Workload& w, std::size_t first) {
  std::vector<ByteRange> ranges;
  const std::size_t n = w.copies.size();
  for (std::size_t i = 0; i < n; ++i)
    for (const TensorView* v : rotated_tensors(w, std::as_const(w.copies[(first + i) % n]->args)))
      ranges.push_back({v->data, tensor_bytes(*v)});
  return ranges;
}

void add_cold_copies(Workload& w, double bytes) {
  if (!w.decode || w.copies.empty() || !w.error.empty()) return;
  const FiaArgs& a = w.copies[0]->args;
  double kv_bytes = 0.0;
  for (const TensorView* v : rotated_tensors(w, a)) kv_bytes += static_cast<double>(tensor_bytes(*v));
  if (kv_bytes == 0.0) return;  // nothing to read: nothing to keep cold
  const auto n = static_cast<std::size_t>(std::max(2.0, std::ceil(bytes / kv_bytes)));
  std::mt19937_64 rng(99);
  while (w.copies.size() < n) {
    auto c = std::make_unique<CallData>();
    c->args = a;
    c->pages = w.copies[0]->pages;
    for (TensorView* v : rotated_tensors(w, c->args)) {
      const MutableTensorView t = add_tensor(*c, v->dtype, v->shape);
      fill_random(t, rng);
      *v = TensorView(t.data, t.dtype, t.shape);
    }
    w.copies.push_back(std::move(c));
  }
}

}  // namespace fia::bench
