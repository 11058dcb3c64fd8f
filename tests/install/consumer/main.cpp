// Writes a call as a case folder with the installed fia::io, reads it back, and runs it.
#include <cstdio>
#include <vector>

#include <fia/fia.hpp>
#include <fia/io/case_dir.hpp>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::vector<float> q(16, 0.5f), k(32, 0.25f), v(32, 1.0f);
  fia::FiaArgs args;
  args.query = {q.data(), fia::DType::F32, {1, 1, 16}};
  args.key = {{k.data(), fia::DType::F32, {1, 2, 16}}};
  args.value = {{v.data(), fia::DType::F32, {1, 2, 16}}};
  fia::Status st = fia::io::save_case(argv[1], args);
  fia::io::Case loaded;
  if (st.ok()) st = fia::io::load_case(argv[1], &loaded);
  fia::Outputs out;
  if (st.ok()) st = fia::fused_infer_attention_score(loaded.args, fia::Options{}, &out);
  if (!st.ok()) {
    std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("attention_out[0] = %g\n", out.attention_out.as<float>()[0]);
  return out.attention_out.as<float>()[0] == 1.0f ? 0 : 1;
}
