#include "mutations.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "args/layout.hpp"
#include "args/tensor_slots.hpp"
#include "check/criterion.hpp"

namespace fia::fuzz {

namespace {

constexpr std::int64_t kMaxElements = 1 << 16;  // of a tensor a mutation makes

/// Mostly small integers around 0, sometimes the values where integer arithmetic breaks.
std::int64_t interesting(ByteReader& r) {
  const std::int64_t b = r.byte();
  if (b < 224) return b - 64;  // [-64, 159]
  static constexpr std::int64_t kEdges[] = {
      std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
      std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(),
      std::int64_t{1} << 31,                    std::int64_t{1} << 32,
      std::int64_t{1} << 40,                    std::int64_t{1} << 62,
      -(std::int64_t{1} << 31) - 1,             std::numeric_limits<std::int64_t>::min() + 1,
      2048,                                     2049,
      65535,                                    65536,
      -65536,                                   1 << 20,
  };
  return kEdges[(b - 224) % std::size(kEdges)];
}

/// A named tensor input: a single-tensor slot, or an entry of the key / value list.
struct Target {
  std::string name;
  TensorView* view = nullptr;
};

/// Picks one of the 24 single-tensor slots or a key / value list entry (possibly a new one).
Target pick_target(ByteReader& r, FiaArgs& a) {
  const std::int64_t k = r.below(26);
  if (k < 24) {
    const auto slot = detail::tensor_slots(a)[k];
    return {std::string(slot.first), slot.second};
  }
  std::vector<TensorView>& list = k == 24 ? a.key : a.value;
  const auto i = static_cast<std::size_t>(r.below(static_cast<std::int64_t>(list.size()) + 1));
  if (i == list.size()) list.emplace_back();
  return {(k == 24 ? "key." : "value.") + std::to_string(i), &list[i]};
}

/// The tensor of the call's storage that `v` views (nullptr for data the call does not own,
/// such as the shared compressed mask).
OwnedTensor* owner(test::TestCall& call, const TensorView& v) {
  for (OwnedTensor& t : call.storage)
    if (v.data != nullptr && t.bytes.data() == v.data) return &t;
  return nullptr;
}

bool is_float(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64; }

/// Sets element i of a tensor to v (floats rounded to the dtype, integers truncated).
void put(OwnedTensor& t, std::int64_t i, double v) {
  if (t.dtype == DType::F64) {
    t.as<double>()[i] = v;
  } else if (is_float(t.dtype)) {
    test::set_value(t, i, static_cast<float>(v));
  } else {
    const auto x = static_cast<std::int64_t>(v);
    std::memcpy(t.bytes.data() + i * dtype_size(t.dtype), &x, dtype_size(t.dtype));  // little-endian
  }
}

/// A replacement tensor: shape and dtype near the old ones, values from a seed, floats within
/// [-range, range], integers small (block ids, lengths, mask bits).
OwnedTensor replacement(ByteReader& r, const TensorView& old, float range) {
  static constexpr DType kTypes[] = {DType::F16, DType::BF16, DType::F32, DType::F64, DType::I8,
                                     DType::U8,  DType::Bool, DType::I32, DType::I64, DType::U64};
  const std::int64_t t = r.below(16);
  const DType dtype = t < 8 ? (old.present() ? old.dtype : DType::F16) : kTypes[(t - 8) % std::size(kTypes)];
  const std::int64_t rank_pick = r.below(8);
  const auto rank = rank_pick < 4 && old.present() ? static_cast<std::int64_t>(old.rank()) : rank_pick % 5;
  std::vector<std::int64_t> shape;
  std::int64_t numel = 1;
  for (std::int64_t k = 0; k < rank; ++k) {
    const std::int64_t base = k < static_cast<std::int64_t>(old.rank()) ? old.shape[k] : 4;
    std::int64_t d = r.pick<std::int64_t>({base, base, base + 1, base - 1, 0, 1, 2, 8, 2 * base});
    d = std::max<std::int64_t>(d, 0);
    if (d > 0 && numel * d > kMaxElements) d = 1;
    numel *= d;
    shape.push_back(d);
  }
  OwnedTensor out(dtype, shape);
  std::mt19937_64 rng(r.byte());
  std::uniform_real_distribution<float> real(-range, range);
  std::uniform_int_distribution<int> small(-2, 40);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    if (is_float(dtype)) put(out, i, real(rng));
    else if (dtype_size(dtype) == 1) put(out, i, rng() % 2 ? 0 : small(rng) & 0x7F);
    else put(out, i, small(rng));
  }
  return out;
}

/// "[2, 3, 4]".
std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

/// Two bytes, little-endian: an element index below n (n > 0).
std::int64_t element(ByteReader& r, std::int64_t n) {
  const std::int64_t low = r.byte();
  return (low | (r.byte() << 8)) % n;
}

}  // namespace

bool Mutator::apply() {
  FiaArgs& a = call.args;
  const std::int64_t op = r.below(extreme ? 19 : 16);
  switch (op) {
    case 0:
      a.num_heads = interesting(r);
      trace << " | num_heads=" << a.num_heads;
      return false;  // a BSH H splits into other heads: garbage may move into the windows
    case 1:
      a.num_key_value_heads = interesting(r);
      trace << " | num_key_value_heads=" << a.num_key_value_heads;
      return false;
    case 2:
      a.sparse_mode = r.range(-1, 10);
      trace << " | sparse_mode=" << a.sparse_mode;
      return true;
    case 3:
    case 4: {
      std::int64_t& tokens = op == 3 ? a.pre_tokens : a.next_tokens;
      tokens = r.flag() ? kIntMax - r.byte() : interesting(r);  // near the default, or anywhere
      trace << (op == 3 ? " | pre_tokens=" : " | next_tokens=") << tokens;
      return true;
    }
    case 5: {
      const std::vector<std::string>& names = detail::accepted_layouts();
      const std::int64_t k = r.below(static_cast<std::int64_t>(names.size()) + 4);
      static const char* kJunk[] = {"", "bsh", "BSH ", "TND_BSH"};
      a.input_layout = k < static_cast<std::int64_t>(names.size()) ? names[k] : kJunk[k - names.size()];
      trace << " | input_layout='" << a.input_layout << "'";
      return false;  // other axes: the garbage tokens move
    }
    case 6:
      a.inner_precise = r.range(-1, 5);
      trace << " | inner_precise=" << a.inner_precise;
      return true;
    case 7:
      a.block_size = interesting(r);
      trace << " | block_size=" << a.block_size;
      return false;
    case 8: {
      std::int64_t* modes[] = {&a.antiquant_mode, &a.key_antiquant_mode, &a.value_antiquant_mode, &a.query_quant_mode};
      const std::int64_t k = r.below(4);
      *modes[k] = r.range(-1, 7);
      trace << " | quant mode " << k << "=" << *modes[k];
      return false;  // per-token scale slots hold garbage
    }
    case 9:
      a.softmax_lse_flag = !a.softmax_lse_flag;
      trace << " | softmax_lse_flag=" << a.softmax_lse_flag;
      return true;
    case 10: {
      const double inf = std::numeric_limits<double>::infinity();
      a.scale = extreme ? r.pick({1e38, -1e38, 3.4e38, inf, -inf, std::nan(""), 1e-45, 0.0, -1.0})
                        : r.pick({0.0, -1.0, 1e-3, 1.0 / 3, 1.0});
      trace << " | scale=" << a.scale;
      return !extreme;
    }
    case 11: {
      std::optional<std::vector<std::int64_t>>* lists[] = {&a.actual_seq_lengths, &a.actual_seq_lengths_kv,
                                                           &a.actual_shared_prefix_len};
      const std::int64_t k = r.below(3);
      auto& list = *lists[k];
      const std::int64_t action = r.below(4);
      if (action == 0) list.reset();
      else if (!list || action == 1) (list ? *list : list.emplace()).push_back(interesting(r));
      else if (action == 2 && !list->empty()) list->pop_back();
      else if (!list->empty()) (*list)[element(r, static_cast<std::int64_t>(list->size()))] = interesting(r);
      trace << " | length list " << k << " =";
      if (list)
        for (auto v : *list) trace << " " << v;
      else
        trace << " absent";
      return false;
    }
    case 12: {
      const Target t = pick_target(r, a);
      *t.view = call.keep(replacement(r, *t.view, value_range));
      trace << " | " << t.name << " := " << dtype_name(t.view->dtype) << shape_text(t.view->shape);
      return is_float(t.view->dtype) && t.name.find("antiquant") == std::string::npos;
    }
    case 13: {
      const std::int64_t k = r.below(26);
      if (k < 24) {
        const auto slot = detail::tensor_slots(a)[k];
        *slot.second = TensorView{};
        trace << " | drop " << slot.first;
        return slot.first.find("padding") == std::string_view::npos;
      }
      std::vector<TensorView>& list = k == 24 ? a.key : a.value;
      if (!list.empty()) list.erase(list.begin() + element(r, static_cast<std::int64_t>(list.size())));
      trace << " | drop one of " << (k == 24 ? "key" : "value");
      return true;
    }
    case 14: {
      const Target t = pick_target(r, a);
      OwnedTensor* o = owner(call, *t.view);
      if (o == nullptr || o->numel() == 0 || is_float(o->dtype)) return true;
      const std::int64_t i = element(r, o->numel());
      const std::int64_t v = interesting(r);
      put(*o, i, static_cast<double>(v));
      trace << " | " << t.name << "[" << i << "]=" << v;
      return false;
    }
    case 15: {
      const Target t = pick_target(r, a);
      if (t.view->rank() == 0) return true;
      const auto axis = static_cast<std::size_t>(r.below(static_cast<std::int64_t>(t.view->rank())));
      std::vector<std::int64_t> strides(t.view->rank());
      for (std::size_t k = 0; k < strides.size(); ++k) strides[k] = t.view->stride(k);
      strides[axis] = 0;
      t.view->strides = strides;
      trace << " | " << t.name << " axis " << axis << " broadcast";
      return false;  // every index reads the first row, which may be garbage
    }
    case 16: {  // extreme: one element NaN, inf or huge
      const Target t = pick_target(r, a);
      OwnedTensor* o = owner(call, *t.view);
      if (o == nullptr || o->numel() == 0 || !is_float(o->dtype)) return false;
      const double inf = std::numeric_limits<double>::infinity();
      const double v = r.pick({std::nan(""), inf, -inf, 65504.0, -65504.0, 3.38e38, -3.38e38, 1e-40});
      const std::int64_t i = element(r, o->numel());
      put(*o, i, v);
      trace << " | " << t.name << "[" << i << "]=" << v;
      return false;
    }
    case 17: {  // extreme: a whole row of pse_shift -inf
      OwnedTensor* o = owner(call, a.pse_shift);
      if (o == nullptr || o->numel() == 0 || !is_float(o->dtype) || o->shape.empty()) return false;
      const std::int64_t cols = o->shape.back(), row = element(r, o->numel() / cols);
      for (std::int64_t j = 0; j < cols; ++j) put(*o, row * cols + j, -std::numeric_limits<double>::infinity());
      trace << " | pse_shift row " << row << " = -inf";
      return false;
    }
    default: {  // extreme: NaN wherever the builder put its "never read" garbage (FIA-SPEC 25.1 #24)
      for (OwnedTensor& t : call.storage) {
        if (!is_float(t.dtype)) continue;
        const std::vector<double> v = check::to_doubles(t);
        for (std::size_t i = 0; i < v.size(); ++i)
          if (v[i] == test::kGarbage) put(t, static_cast<std::int64_t>(i), std::nan(""));
      }
      trace << " | garbage := NaN";
      return false;
    }
  }
}

}  // namespace fia::fuzz
