#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "generate/checkpoint.hpp"
#include "generate/generator.hpp"
#include "generate/tokenizer.hpp"

namespace fia::cli {

namespace {

bool read_prompts(const std::string& path, std::vector<std::string>* prompts) {
  std::ifstream f(path);
  if (!f) return false;
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    prompts->push_back(line);
  }
  return true;
}

DType parse_kv_dtype(const std::string& name) {
  if (name == "fp16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  return DType::F32;
}

int fail(const Status& st) {
  print_error(st.parameter, st.message);
  return st.code == StatusCode::kInternal ? kExitFailure : kExitRejected;
}

}  // namespace

int generate_command(const GenerateArgs& in) {
  GenerateArgs args = in;
  if (!resolve_backend(&args.backend)) return kExitRejected;
  model::Checkpoint checkpoint;
  if (Status st = model::load_checkpoint(args.model, &checkpoint); !st.ok()) return fail(st);
  model::Tokenizer tokenizer;
  if (Status st = model::load_tokenizer(args.tokenizer, checkpoint.config.vocab_size, &tokenizer); !st.ok())
    return fail(st);

  std::vector<std::string> prompts;
  const bool batch = !args.batch_prompts.empty();
  if (batch) {
    if (!read_prompts(args.batch_prompts, &prompts)) {
      print_error("--batch-prompts", "cannot open " + args.batch_prompts);
      return kExitRejected;
    }
    if (prompts.empty()) {
      print_error("--batch-prompts", args.batch_prompts + " has no prompt (one prompt per line)");
      return kExitRejected;
    }
  } else {
    prompts.push_back(args.prompt);
  }

  model::GenerationOptions opt;
  opt.steps = args.steps;
  opt.temperature = args.temperature;
  opt.top_p = args.top_p;
  opt.seed = args.seed;
  opt.kv_dtype = parse_kv_dtype(args.kv_dtype);
  opt.block_size = args.block_size;
  opt.fia.backend = args.backend == "reference" ? Backend::kReference : Backend::kCpu;
  opt.fia.threads = args.threads;

  // One prompt: print as the tokens come (run.c's stdout). A batch: each sequence at the end.
  model::TokenSink sink;
  if (!batch) {
    sink = [&args](std::size_t, int token, std::string_view text) {
      if (args.print_ids)
        std::printf("%d\n", token);
      else
        std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
  }
  std::vector<model::SequenceResult> results;
  model::GenerationStats stats;
  if (Status st = model::generate(checkpoint, tokenizer, prompts, opt, &results, &stats, sink); !st.ok())
    return fail(st);

  if (!batch) {
    if (!args.print_ids) std::printf("\n");
  } else {
    for (std::size_t k = 0; k < results.size(); ++k) {
      std::printf("--- prompt %zu: \"%s\" ---\n", k + 1, prompts[k].c_str());
      if (args.print_ids) {
        for (int id : results[k].ids) std::printf("%d\n", id);
      } else {
        std::printf("%s\n", results[k].text.c_str());
      }
    }
  }
  std::fflush(stdout);

  const double total = stats.prefill_seconds + stats.decode_seconds;
  const auto& att = stats.attention;
  std::fprintf(stderr, "prefill: %zu prompt(s), %lld tokens in %.1f ms; decode: %lld positions in %.1f ms\n",
               prompts.size(), static_cast<long long>(stats.prompt_tokens), 1e3 * stats.prefill_seconds,
               static_cast<long long>(stats.decode_positions), 1e3 * stats.decode_seconds);
  std::fprintf(stderr, "speed: %.1f tokens/s (%lld sampled tokens in %.1f ms)\n",
               total > 0 ? static_cast<double>(stats.sampled_tokens) / total : 0.0,
               static_cast<long long>(stats.sampled_tokens), 1e3 * total);
  std::fprintf(stderr,
               "attention: %.1f%% of the time (%.1f ms in %lld FIA calls: %lld prefill, %lld decode; %s backend, "
               "%s KV cache of %d blocks of %d tokens)\n",
               total > 0 ? 100.0 * att.seconds / total : 0.0, 1e3 * att.seconds,
               static_cast<long long>(att.prefill_calls + att.decode_calls), static_cast<long long>(att.prefill_calls),
               static_cast<long long>(att.decode_calls), args.backend.c_str(), args.kv_dtype.c_str(), stats.kv_blocks,
               args.block_size);
  return kExitOk;
}

}  // namespace fia::cli
