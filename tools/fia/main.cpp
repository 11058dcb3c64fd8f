// fia: the command-line tool. `fia run` computes one case folder (CASE-FORMAT.md).
#include <CLI/CLI.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace fia::cli;
  CLI::App app{"fia: FusedInferAttentionScore on CPUs"};
  app.require_subcommand(1);

  RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "Compute one case folder (params.json + inputs.safetensors)");
  run_cmd->add_option("CASE_DIR", run.case_dir, "Case folder")->required();
  run_cmd->add_option("--out", run.out_dir, "Output folder for outputs.safetensors")->required();
  run_cmd->add_option("--backend", run.backend, "cpu (default) or reference (float64)")
      ->check(CLI::IsMember({"cpu", "reference"}));
  run_cmd->add_option("--threads", run.threads, "Worker threads (0 = all cores)")->check(CLI::Range(0, 1024));
  run_cmd->add_flag("--strict", run.strict, "Also reject what an Ascend NPU would reject (hardware limits)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    print_error("", what + " (see --help)");
    return kExitRejected;
  }
  if (run_cmd->parsed()) return run_command(run);
  return kExitFailure;
}
