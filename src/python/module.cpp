// fia._C: the nanobind extension behind the Python package (python/fia). It turns DLPack /
// buffer-protocol arrays (numpy arrays, other DLPack objects) and torch CPU tensors passed by
// address into fia::TensorView without copying, plans a call, and runs it into new numpy arrays,
// with the GIL released.
// The torch_npu argument names are mapped onto FiaArgs fields in python/fia/_calls.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "fia/fia.hpp"
#include "fia/merge.hpp"

namespace nb = nanobind;

namespace {

using Array = nb::ndarray<nb::ro, nb::device::cpu>;
using OutArray = nb::ndarray<nb::device::cpu>;

/// Raised for every failed fia::Status; python/fia/errors.py maps it onto ValueError /
/// TypeError / NotImplementedError subclasses. Arguments: (code name, parameter, message).
nb::object g_status_error;

[[noreturn]] void raise_status(const fia::Status& st) {
  PyErr_SetObject(g_status_error.ptr(),
                  nb::make_tuple(fia::status_code_name(st.code), st.parameter, st.message).ptr());
  throw nb::python_error();
}

[[noreturn]] void raise_invalid(const std::string& parameter, const std::string& message) {
  raise_status({fia::StatusCode::kInvalidArgument, parameter, message});
}

/// The fia DType of a DLPack dtype; false for element types fia has no name for.
bool to_dtype(nb::dlpack::dtype t, fia::DType* out) {
  using C = nb::dlpack::dtype_code;
  const auto code = static_cast<C>(t.code);
  if (t.lanes != 1) return false;
  struct Entry { C code; int bits; fia::DType dtype; };
  static constexpr Entry kTable[] = {
      {C::Float, 16, fia::DType::F16}, {C::Bfloat, 16, fia::DType::BF16}, {C::Float, 32, fia::DType::F32},
      {C::Float, 64, fia::DType::F64}, {C::Int, 8, fia::DType::I8},       {C::UInt, 8, fia::DType::U8},
      {C::Bool, 8, fia::DType::Bool},  {C::Int, 32, fia::DType::I32},     {C::Int, 64, fia::DType::I64},
      {C::UInt, 64, fia::DType::U64},
  };
  for (const auto& e : kTable)
    if (e.code == code && e.bits == t.bits) {
      *out = e.dtype;
      return true;
    }
  return false;
}

template <class View, class Arr>
View view_of(const Arr& a, fia::DType dtype) {
  View v;
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  v.dtype = dtype;
  v.shape.resize(a.ndim());
  v.strides.resize(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    v.shape[i] = static_cast<std::int64_t>(a.shape(i));
    v.strides[i] = static_cast<std::int64_t>(a.stride(i));
  }
  return v;
}

/// A plain torch CPU tensor passed as (tensor, data address, shape, strides, dtype name) by
/// python/fia: its own attributes cost less than a numpy view of it. Strides are in elements.
template <class View>
View tensor_view(const nb::tuple& t, const std::string& name, std::vector<nb::object>* keep) {
  View v;
  v.data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(t[1]));
  if (!fia::parse_dtype(nb::cast<std::string_view>(t[4]), &v.dtype))
    raise_invalid(name, "dtype must be one of F16, BF16, F32, F64, I8, U8, BOOL, I32, I64, U64");
  for (nb::handle d : t[2]) v.shape.push_back(nb::cast<std::int64_t>(d));
  for (nb::handle d : t[3]) v.strides.push_back(nb::cast<std::int64_t>(d));
  keep->push_back(nb::borrow(t[0]));
  return v;
}

/// A Python array as a view. `h` is an array; a tuple (array, "BF16"): numpy has no bfloat16 of
/// its own, so python/fia passes ml_dtypes bfloat16 arrays as uint16 views with the real name; or
/// a torch tensor's 5-tuple (tensor_view).
template <class View, class Arr>
View to_view(nb::handle h, const std::string& name, std::vector<nb::object>* keep) {
  nb::handle array = h;
  std::string dtype_name;
  if (nb::isinstance<nb::tuple>(h)) {
    nb::tuple t = nb::borrow<nb::tuple>(h);
    if (t.size() == 5) return tensor_view<View>(t, name, keep);
    array = t[0];
    dtype_name = nb::cast<std::string>(t[1]);
  }
  Arr a;
  if (!nb::try_cast(array, a, false))
    raise_status({fia::StatusCode::kInvalidArgument, name,
                  "a CPU tensor or array (torch.Tensor, numpy.ndarray or any DLPack object) is expected, got " +
                      nb::cast<std::string>(nb::str(array.type()))});
  fia::DType dtype{};
  if (!dtype_name.empty() ? !fia::parse_dtype(dtype_name, &dtype) : !to_dtype(a.dtype(), &dtype))
    raise_invalid(name, "dtype must be one of F16, BF16, F32, F64, I8, U8, BOOL, I32, I64, U64, got an "
                        "unsupported element type");
  keep->push_back(nb::borrow(array));
  return view_of<View>(a, dtype);
}

/// A new array the core writes into: the numpy array (owning its memory) and its view.
struct NewArray {
  nb::object array;
  fia::MutableTensorView view;
};

/// A zero-filled C-contiguous numpy array of `shape` (fia::Outputs are zero-filled too). bfloat16
/// is allocated as uint16: numpy has no bfloat16 of its own.
NewArray new_array(const std::vector<std::int64_t>& shape, fia::DType dtype) {
  using C = nb::dlpack::dtype_code;
  struct Entry { fia::DType dtype; C code; };
  static constexpr Entry kTable[] = {
      {fia::DType::F16, C::Float}, {fia::DType::BF16, C::UInt}, {fia::DType::F32, C::Float},
      {fia::DType::F64, C::Float}, {fia::DType::I8, C::Int},    {fia::DType::U8, C::UInt},
      {fia::DType::Bool, C::Bool}, {fia::DType::I32, C::Int},   {fia::DType::I64, C::Int},
      {fia::DType::U64, C::UInt},
  };
  const std::size_t size = fia::dtype_size(dtype);
  nb::dlpack::dtype dl{static_cast<std::uint8_t>(C::Float), static_cast<std::uint8_t>(8 * size), 1};
  for (const auto& e : kTable)
    if (e.dtype == dtype) dl.code = static_cast<std::uint8_t>(e.code);
  std::vector<std::size_t> dims(shape.begin(), shape.end());
  std::size_t bytes = size;
  for (auto d : shape) bytes *= static_cast<std::size_t>(d);
  void* data = std::calloc(bytes ? bytes : 1, 1);
  if (data == nullptr) throw std::bad_alloc();
  nb::capsule owner(data, [](void* p) noexcept { std::free(p); });
  nb::ndarray<nb::numpy> array(data, dims.size(), dims.data(), owner, nullptr, dl);
  return {array.cast(), fia::MutableTensorView{data, dtype, shape}};
}

/// One FIA call: its arguments (views of arrays it keeps alive), options and plan.
struct Call {
  fia::FiaArgs args;
  fia::Options options;
  fia::Plan plan;
  std::vector<nb::object> keep;

  /// Computes the call into new arrays, returned as (attention_out, softmax_lse): numpy arrays
  /// allocated here, zero-filled as fia::Outputs are; softmax_lse is the [1] zero array when not
  /// requested (FIA-SPEC 2.1). A bfloat16 attention_out comes back as (uint16 array, "BF16").
  nb::tuple run() {
    const fia::DType out_dtype = plan.attention_out_dtype();
    auto out = new_array(plan.attention_out_shape(), out_dtype);
    auto lse = new_array(plan.softmax_lse_flag() ? plan.softmax_lse_shape() : std::vector<std::int64_t>{1},
                         fia::DType::F32);
    fia::Status st;
    {
      nb::gil_scoped_release release;
      const std::size_t bytes = plan.workspace_bytes();
      const std::unique_ptr<std::byte[]> workspace(bytes ? new std::byte[bytes] : nullptr);  // the core aligns it
      st = fia::run(plan, out.view, plan.softmax_lse_flag() ? lse.view : fia::MutableTensorView{},
                    workspace.get(), bytes);
    }
    if (!st.ok()) raise_status(st);
    if (out_dtype == fia::DType::BF16) return nb::make_tuple(nb::make_tuple(out.array, "BF16"), lse.array);
    return nb::make_tuple(out.array, lse.array);
  }

  /// Seconds for `repeats` calls of the C++ one-shot API (plan, allocation and run) on the same
  /// arguments: the baseline of the Python-overhead benchmark (bench/python_overhead.py).
  double time_cpp_calls(int repeats) {
    nb::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) {
      fia::Outputs outputs;
      const fia::Status st = fia::fused_infer_attention_score(args, options, &outputs);
      if (!st.ok()) return -1.0;
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

struct TensorField {
  const char* name;
  fia::TensorView fia::FiaArgs::*member;
};

constexpr TensorField kTensorFields[] = {
    {"query", &fia::FiaArgs::query},
    {"pse_shift", &fia::FiaArgs::pse_shift},
    {"atten_mask", &fia::FiaArgs::atten_mask},
    {"dequant_scale1", &fia::FiaArgs::dequant_scale1},
    {"quant_scale1", &fia::FiaArgs::quant_scale1},
    {"dequant_scale2", &fia::FiaArgs::dequant_scale2},
    {"quant_scale2", &fia::FiaArgs::quant_scale2},
    {"quant_offset2", &fia::FiaArgs::quant_offset2},
    {"antiquant_scale", &fia::FiaArgs::antiquant_scale},
    {"antiquant_offset", &fia::FiaArgs::antiquant_offset},
    {"block_table", &fia::FiaArgs::block_table},
    {"query_padding_size", &fia::FiaArgs::query_padding_size},
    {"kv_padding_size", &fia::FiaArgs::kv_padding_size},
    {"key_antiquant_scale", &fia::FiaArgs::key_antiquant_scale},
    {"key_antiquant_offset", &fia::FiaArgs::key_antiquant_offset},
    {"value_antiquant_scale", &fia::FiaArgs::value_antiquant_scale},
    {"value_antiquant_offset", &fia::FiaArgs::value_antiquant_offset},
    {"key_shared_prefix", &fia::FiaArgs::key_shared_prefix},
    {"value_shared_prefix", &fia::FiaArgs::value_shared_prefix},
    {"query_rope", &fia::FiaArgs::query_rope},
    {"key_rope", &fia::FiaArgs::key_rope},
    {"key_rope_antiquant_scale", &fia::FiaArgs::key_rope_antiquant_scale},
    {"dequant_scale_query", &fia::FiaArgs::dequant_scale_query},
    {"learnable_sink", &fia::FiaArgs::learnable_sink},
};

struct IntField {
  const char* name;
  std::int64_t fia::FiaArgs::*member;
};

constexpr IntField kIntFields[] = {
    {"num_heads", &fia::FiaArgs::num_heads},
    {"pre_tokens", &fia::FiaArgs::pre_tokens},
    {"next_tokens", &fia::FiaArgs::next_tokens},
    {"num_key_value_heads", &fia::FiaArgs::num_key_value_heads},
    {"sparse_mode", &fia::FiaArgs::sparse_mode},
    {"inner_precise", &fia::FiaArgs::inner_precise},
    {"block_size", &fia::FiaArgs::block_size},
    {"antiquant_mode", &fia::FiaArgs::antiquant_mode},
    {"key_antiquant_mode", &fia::FiaArgs::key_antiquant_mode},
    {"value_antiquant_mode", &fia::FiaArgs::value_antiquant_mode},
    {"query_quant_mode", &fia::FiaArgs::query_quant_mode},
};

using IntList = std::optional<std::vector<std::int64_t>>;

struct ListField {
  const char* name;
  IntList fia::FiaArgs::*member;
};

constexpr ListField kListFields[] = {
    {"actual_seq_lengths", &fia::FiaArgs::actual_seq_lengths},
    {"actual_seq_lengths_kv", &fia::FiaArgs::actual_seq_lengths_kv},
    {"actual_shared_prefix_len", &fia::FiaArgs::actual_shared_prefix_len},
};

std::int64_t to_int(nb::handle h, const std::string& name) {
  std::int64_t v = 0;
  if (nb::isinstance<nb::bool_>(h) || !nb::try_cast(h, v, false))
    raise_status({fia::StatusCode::kInvalidArgument, name,
                  "an int is expected, got " + nb::cast<std::string>(nb::repr(h))});
  return v;
}

fia::EntryPoint entry_point(std::string_view name) {
  if (name == "ifa") return fia::EntryPoint::kIncreFlashAttention;
  if (name == "pfa") return fia::EntryPoint::kPromptFlashAttention;
  if (name != "fia") raise_invalid("entry_point", "\"fia\", \"ifa\" or \"pfa\" is expected");
  return fia::EntryPoint::kFusedInferAttentionScore;
}

fia::Backend backend(std::string_view name) {
  if (name == "cpu") return fia::Backend::kCpu;
  if (name == "reference") return fia::Backend::kReference;
  if (name != "default") raise_invalid("backend", "\"cpu\" or \"reference\" is expected, got \"" + std::string(name) + "\"");
  return fia::Backend::kDefault;
}

/// Validates and plans one call into `call`. `tensors`: FiaArgs tensor name -> array, (array,
/// dtype) or None; "key"/"value" -> a list of those. `attrs`: FiaArgs attribute name -> value.
/// `float32_out` and `softmax_max` (an array or None): the partial-attention options.
void plan_into(Call* call, std::string_view entry, nb::dict tensors, nb::dict attrs, std::string_view backend_name,
               bool strict, int threads, std::string_view rounding, bool float32_out, nb::handle softmax_max) {
  fia::FiaArgs& a = call->args;
  a.entry_point = entry_point(entry);
  call->options.backend = backend(backend_name);
  call->options.strict = strict;
  call->options.threads = threads;
  call->options.float32_out = float32_out;
  if (!softmax_max.is_none())
    call->options.softmax_max = to_view<fia::TensorView, Array>(softmax_max, "softmax_max", &call->keep);
  if (rounding != "device" && rounding != "golden")
    raise_invalid("post_quant_rounding", "\"device\" or \"golden\" is expected, got \"" + std::string(rounding) + "\"");
  call->options.post_quant_rounding =
      rounding == "golden" ? fia::PostQuantRounding::kGolden : fia::PostQuantRounding::kDevice;
  for (auto [k, v] : tensors) {
    const std::string name = nb::cast<std::string>(k);
    if (v.is_none()) continue;
    if (name == "key" || name == "value") {
      auto& list = name == "key" ? a.key : a.value;
      for (nb::handle item : v) list.push_back(to_view<fia::TensorView, Array>(item, name, &call->keep));
      continue;
    }
    bool found = false;
    for (const auto& f : kTensorFields)
      if (name == f.name) {
        a.*f.member = to_view<fia::TensorView, Array>(v, name, &call->keep);
        found = true;
      }
    if (!found) raise_invalid(name, "not a tensor argument of FusedInferAttentionScore");
  }
  for (auto [k, v] : attrs) {
    const std::string name = nb::cast<std::string>(k);
    bool found = false;
    for (const auto& f : kIntFields)
      if (name == f.name) a.*f.member = to_int(v, name), found = true;
    for (const auto& f : kListFields)
      if (name == f.name) {
        found = true;
        if (v.is_none()) continue;
        std::vector<std::int64_t> values;
        for (nb::handle item : v) values.push_back(to_int(item, name));
        a.*f.member = std::move(values);
      }
    if (name == "scale") {
      double s = 0;
      if (!nb::try_cast(v, s, true)) raise_invalid(name, "a float is expected");
      a.scale = s;
      found = true;
    } else if (name == "input_layout") {
      if (!nb::try_cast(v, a.input_layout, false)) raise_invalid(name, "a str is expected");
      found = true;
    } else if (name == "softmax_lse_flag") {
      a.softmax_lse_flag = nb::cast<bool>(v);
      found = true;
    }
    if (!found) raise_invalid(name, "not an attribute of FusedInferAttentionScore");
  }
  const fia::Status st = fia::plan(a, call->options, &call->plan);
  if (!st.ok()) raise_status(st);
}

std::unique_ptr<Call> plan(std::string_view entry, nb::dict tensors, nb::dict attrs, std::string_view backend_name,
                           bool strict, int threads, std::string_view rounding) {
  auto call = std::make_unique<Call>();
  plan_into(call.get(), entry, tensors, attrs, backend_name, strict, threads, rounding, false, nb::none());
  return call;
}

/// plan() and Call::run() in one: the eager calls' path, without a Call object for Python.
nb::tuple call(std::string_view entry, nb::dict tensors, nb::dict attrs, std::string_view backend_name, bool strict,
               int threads, std::string_view rounding, bool float32_out, nb::handle softmax_max) {
  Call c;
  plan_into(&c, entry, tensors, attrs, backend_name, strict, threads, rounding, float32_out, softmax_max);
  return c.run();
}

void merge(nb::handle out_a, nb::handle lse_a, nb::handle out_b, nb::handle lse_b, std::string_view layout,
           nb::handle out, nb::handle lse) {
  std::vector<nb::object> keep;
  const auto oa = to_view<fia::TensorView, Array>(out_a, "out_a", &keep);
  const auto la = to_view<fia::TensorView, Array>(lse_a, "lse_a", &keep);
  const auto ob = to_view<fia::TensorView, Array>(out_b, "out_b", &keep);
  const auto lb = to_view<fia::TensorView, Array>(lse_b, "lse_b", &keep);
  const auto o = to_view<fia::MutableTensorView, OutArray>(out, "out", &keep);
  const auto l = to_view<fia::MutableTensorView, OutArray>(lse, "lse", &keep);
  fia::Status st;
  {
    nb::gil_scoped_release release;
    st = fia::merge_attention_states(oa, la, ob, lb, layout, o, l);
  }
  if (!st.ok()) raise_status(st);
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "fia's C++ core: plan and run FusedInferAttentionScore calls on CPU arrays (see the fia package)";
  g_status_error = nb::steal(PyErr_NewException("fia._C.StatusError", PyExc_Exception, nullptr));
  m.attr("StatusError") = g_status_error;

  nb::class_<Call>(m, "Call", "A validated FIA call (fia::Plan) with the arrays it reads")
      .def("time_cpp_calls", &Call::time_cpp_calls, nb::arg("repeats"),
           "Seconds for `repeats` calls of fia::fused_infer_attention_score on the same arguments.");

  m.def("plan", &plan, nb::arg("entry_point"), nb::arg("tensors"), nb::arg("attrs"), nb::arg("backend"),
        nb::arg("strict"), nb::arg("threads"), nb::arg("post_quant_rounding"),
        "Validates and plans a call (fia::plan); raises StatusError(code, parameter, message).");
  m.def("call", &call, nb::arg("entry_point"), nb::arg("tensors"), nb::arg("attrs"), nb::arg("backend"),
        nb::arg("strict"), nb::arg("threads"), nb::arg("post_quant_rounding"), nb::arg("float32_out") = false,
        nb::arg("softmax_max").none() = nb::none(),
        "plan() and run() in one: (attention_out, softmax_lse) as new numpy arrays; raises as plan(). "
        "float32_out and softmax_max: fia::Options' partial-attention extensions (docs/distributed.md).");
  m.def("merge_attention_states", &merge, nb::arg("out_a"), nb::arg("lse_a"), nb::arg("out_b"), nb::arg("lse_b"),
        nb::arg("input_layout"), nb::arg("out"), nb::arg("lse"),
        "fia::merge_attention_states into `out` and `lse` (may alias the first part).");
}
