#include <cstdio>

#include "check/criterion.hpp"
#include "commands.hpp"
#include "fia/io/safetensors.hpp"

namespace fia::cli {

int compare_command(const CompareArgs& args) {
  io::TensorFile got, want;
  for (const auto& [path, file] : {std::pair{args.got, &got}, std::pair{args.expected, &want}}) {
    const Status st = io::read_safetensors(path, file);
    if (!st.ok()) {
      print_error(st.parameter, st.message);
      return kExitRejected;
    }
  }
  for (const auto* f : {&got, &want}) {
    if (!f->tensors.count("attention_out")) {
      print_error(f == &got ? args.got : args.expected, "holds no attention_out tensor");
      return kExitRejected;
    }
  }
  const OwnedTensor& a = got.tensors.at("attention_out");
  const OwnedTensor& e = want.tensors.at("attention_out");
  if (a.shape != e.shape) {
    print_error("attention_out", "shapes differ");
    return kExitRejected;
  }
  bool pass = true;
  if (auto it = want.metadata.find("out_dtype"); it != want.metadata.end() && it->second != dtype_name(a.dtype)) {
    std::printf("attention_out: FAIL dtype %s, expected %s\n", std::string(dtype_name(a.dtype)).c_str(), it->second.c_str());
    pass = false;
  }
  const check::Verdict v = check::criterion_a(a, check::to_doubles(e));
  std::printf("attention_out: %s %.4f%% of %lld elements within tolerance (%s), worst relative error outside %.3g%s%s\n",
              v.pass ? "PASS" : "FAIL", 100.0 * v.fraction, static_cast<long long>(a.numel()),
              a.dtype == DType::I8 ? "within 1" : a.dtype == DType::BF16 ? "atol 1e-4, rtol 2^-7" : "atol 2.5e-5, rtol 0.005", v.worst_rel,
              v.pass ? "" : "; ", v.detail.c_str());
  pass = pass && v.pass;
  if (got.tensors.count("softmax_lse") && want.tensors.count("softmax_lse")) {
    const OwnedTensor& l = got.tensors.at("softmax_lse");
    const OwnedTensor& le = want.tensors.at("softmax_lse");
    const check::Verdict lv = l.shape == le.shape ? check::lse_match(l, check::to_doubles(le))
                                                  : check::Verdict{false, "shapes differ"};
    std::printf("softmax_lse: %s%s%s\n", lv.pass ? "PASS" : "FAIL", lv.pass ? "" : " ", lv.detail.c_str());
    pass = pass && lv.pass;
  }
  return pass ? kExitOk : kExitFailure;
}

}  // namespace fia::cli
