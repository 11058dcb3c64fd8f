// The smallest fia program: GQA decode over fp32 tensors (FIA-SPEC 22.16 in spirit).
//   cmake --build build --target example_basic && ./build/example_basic
#include <cmath>
#include <cstdio>
#include <vector>

#include "fia/fia.hpp"

int main() {
  const std::int64_t B = 1, N = 2, KV_N = 1, S = 16, D = 8;
  std::vector<float> q(B * N * 1 * D, 1.0f), k(B * KV_N * S * D), v(B * KV_N * S * D);
  for (std::size_t i = 0; i < k.size(); ++i) {
    k[i] = std::sin(0.1f * static_cast<float>(i));
    v[i] = static_cast<float>(i / D);  // value row t holds t
  }

  fia::FiaArgs args;
  args.query = {q.data(), fia::DType::F32, {B, N, 1, D}};
  args.key = {{k.data(), fia::DType::F32, {B, KV_N, S, D}}};
  args.value = {{v.data(), fia::DType::F32, {B, KV_N, S, D}}};
  args.input_layout = "BNSD";
  args.num_heads = N;
  args.num_key_value_heads = KV_N;
  args.scale = 1.0 / std::sqrt(static_cast<double>(D));
  args.softmax_lse_flag = true;

  // Phase 1: validate and size everything.
  fia::Plan plan;
  fia::Status st = fia::plan(args, fia::Options{}, &plan);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 2;
  }
  // Phase 2: run into caller-owned memory.
  fia::OwnedTensor out(plan.attention_out_dtype(), plan.attention_out_shape());
  fia::OwnedTensor lse(fia::DType::F32, plan.softmax_lse_shape());
  std::vector<std::byte> workspace(plan.workspace_bytes());
  st = fia::run(plan, out.mutable_view(), lse.mutable_view(), workspace.data(), workspace.size());
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 2;
  }
  for (std::int64_t n = 0; n < N; ++n)
    std::printf("head %lld: out[0] = %.6f  lse = %.6f\n", static_cast<long long>(n), out.as<float>()[n * D],
                lse.as<float>()[n]);
  return 0;
}
