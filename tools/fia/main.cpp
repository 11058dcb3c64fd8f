// fia: the command-line tool. `fia run` computes one case folder (CASE-FORMAT.md).
// `fia generate` runs a llama2.c model whose attention calls are all FIA calls.
#include <CLI/CLI.hpp>

#include <cmath>
#include <sstream>

#include "commands.hpp"

namespace {

/// Accepts numbers in [lo, hi]; the message shows the bounds as written ("must be in [1, 65536],
/// got 0"). CLI::Range prints doubles with six decimals, and CLI::PositiveNumber's upper bound is
/// DBL_MAX, a 309-digit number.
CLI::Validator in_range(double lo, double hi) {
  auto show = [](double x) {
    if (x == std::floor(x) && std::abs(x) < 1e15) return std::to_string(static_cast<long long>(x));
    std::ostringstream os;
    os << x;
    return os.str();
  };
  const std::string range = "[" + show(lo) + ", " + show(hi) + "]";
  return CLI::Validator(
      [=](std::string& text) {
        double v = 0;
        if (CLI::detail::lexical_cast(text, v) && v >= lo && v <= hi) return std::string();
        return "must be in " + range + ", got " + text;
      },
      "in " + range);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fia::cli;
  CLI::App app{"fia: FusedInferAttentionScore on CPUs"};
  app.set_version_flag("--version", "fia " FIA_VERSION, "Print the version of fia and exit");
  app.require_subcommand(1);

  RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "Compute one case folder (params.json + inputs.safetensors)");
  run_cmd->add_option("CASE_DIR", run.case_dir, "Case folder")->required();
  run_cmd->add_option("--out", run.out_dir, "Output folder for outputs.safetensors")->required();
  CLI::Option* run_backend =
      run_cmd->add_option("--backend", run.backend, "cpu or reference (float64); default FIA_BACKEND, else cpu")
          ->check(CLI::IsMember({"cpu", "reference"}));
  run_cmd->add_option("--threads", run.threads, "Worker threads (0 = FIA_NUM_THREADS, OMP_NUM_THREADS or all CPUs)")
      ->check(in_range(0, 1024));
  run_cmd->add_flag("--strict", run.strict, "Also reject what an Ascend NPU would reject (hardware limits)");
  run_cmd->add_option("--entry-point", run.entry_point,
                      "The operator the call stands for: fia (FusedInferAttentionScore, default), ifa "
                      "(IncreFlashAttention) or pfa (PromptFlashAttention); each rounds P as its golden (FIA-SPEC 25.3)")
      ->check(CLI::IsMember({"fia", "ifa", "pfa"}));
  run_cmd->add_option("--post-quant-rounding", run.post_quant_rounding,
                      "With quant_scale2 (int8 output, FIA-SPEC 14.1): device (the NPU kernel's formula, default) or "
                      "golden (the vendor test golden's fp16 chain)")
      ->check(CLI::IsMember({"device", "golden"}));
  run_cmd
      ->add_flag("--expected", run.expected,
                 "Write the float64 reference's exact answer (F32, before the cast to the output dtype) as "
                 "OUT_DIR/expected.safetensors, for fia compare")
      ->excludes(run_backend);

  GenerateArgs gen;
  CLI::App* gen_cmd =
      app.add_subcommand("generate", "Generate text with a llama2.c model, every attention call done by FIA");
  gen_cmd->add_option("--model", gen.model, "llama2.c checkpoint (legacy .bin format)")->required();
  gen_cmd->add_option("--tokenizer", gen.tokenizer, "llama2.c tokenizer .bin")->required();
  CLI::Option* prompt_opt =
      gen_cmd->add_option("--prompt", gen.prompt, "Text to start from (default: empty, BOS only)");
  gen_cmd->add_option("--batch-prompts", gen.batch_prompts, "File with one prompt per line, generated as one batch")
      ->excludes(prompt_opt);
  gen_cmd->add_option("--steps", gen.steps, "Positions per sequence, prompt included, as run.c's -n (0 = seq_len)")
      ->check(in_range(0, 1 << 20));
  gen_cmd->add_option("--temperature", gen.temperature, "0 = greedy (default)")->check(in_range(0, 100));
  gen_cmd->add_option("--top-p", gen.top_p, "Nucleus sampling threshold when temperature > 0")
      ->check(in_range(0, 1));
  gen_cmd->add_option("--seed", gen.seed, "Sampler seed");
  gen_cmd->add_option("--kv-dtype", gen.kv_dtype, "KV cache dtype: fp32 (default), fp16 or bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  gen_cmd->add_option("--block-size", gen.block_size, "Tokens per KV cache block")->check(in_range(1, 65536));
  gen_cmd->add_option("--backend", gen.backend, "cpu or reference (float64); default FIA_BACKEND, else cpu")
      ->check(CLI::IsMember({"cpu", "reference"}));
  gen_cmd->add_option("--threads", gen.threads, "Worker threads of FIA (0 = FIA_NUM_THREADS, OMP_NUM_THREADS or all CPUs)")
      ->check(in_range(0, 1024));
  gen_cmd->add_flag("--print-ids", gen.print_ids, "Print the token ids, one per line, instead of the text");

  BenchArgs bench;
  CLI::App* bench_cmd = app.add_subcommand("bench", "Time the reference workloads against the machine's limits");
  bench_cmd->add_option("--shapes", bench.shapes, "Workload file (default: the repository's bench/shapes.json)");
  bench_cmd->add_option("--only", bench.only, "Comma-separated workload names, e.g. D1,P1");
  bench_cmd->add_option("--case", bench.case_dir, "Time one case folder instead of the workload file");
  bench_cmd->add_option("--threads", bench.threads, "Worker threads (0 = FIA_NUM_THREADS, OMP_NUM_THREADS or all CPUs)")
      ->check(in_range(0, 1024));
  bench_cmd->add_option("--repeat", bench.repeat, "Timed calls per workload (0 = 30 decode, 5 prefill)")
      ->check(in_range(0, 100000));
  bench_cmd->add_option("--probe-rounds", bench.probe_rounds,
                        "Rounds of each machine-limit probe per workload, judged by their median (default 12)")
      ->check(in_range(1, 1000));
  bench_cmd->add_option("--pages", bench.pages,
                        "Pages of the tensors and the probe buffer: huge (transparent huge pages where the OS "
                        "offers them, as engines put KV caches; default) or small (4 KiB)")
      ->check(CLI::IsMember({"huge", "small"}));
  bench_cmd->add_option("--json", bench.json, "Also write the results as JSON");
  bench_cmd->add_option("--isa", bench.isa, "Run the kernels on this instruction set (AVX3, AVX2, SSE4, ...)");

  CompareArgs cmp;
  CLI::App* cmp_cmd = app.add_subcommand("compare", "Judge an outputs.safetensors against an exact answer (criterion A)");
  cmp_cmd->add_option("GOT", cmp.got, "outputs.safetensors to judge")->required();
  cmp_cmd->add_option("EXPECTED", cmp.expected, "safetensors with the exact attention_out [and softmax_lse]")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    print_error("", what + " (see --help)");
    return kExitRejected;
  }
  if (run_cmd->parsed()) return run_command(run);
  if (gen_cmd->parsed()) return generate_command(gen);
  if (bench_cmd->parsed()) return bench_command(bench);
  if (cmp_cmd->parsed()) return compare_command(cmp);
  return kExitFailure;
}
