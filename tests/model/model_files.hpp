// The stories260K model and its reference outputs from the shared folder, for the model tests.
#pragma once

#include <string>
#include <vector>

#include "generate/checkpoint.hpp"
#include "generate/tokenizer.hpp"

namespace fia::test {

/// The folder with stories260K.bin, tok512.bin and the reference outputs.
std::string models_dir();
/// True when models_dir() holds the model and tokenizer.
bool have_models();
std::string model_path();
std::string tokenizer_path();

/// The model and tokenizer, loaded once (the test must have checked have_models()).
const model::Checkpoint& stories260k();
const model::Tokenizer& tok512();

/// A whole file as bytes.
std::string read_file(const std::string& path);
/// A file of token ids, one per line.
std::vector<int> read_ids(const std::string& path);

/// One line of a .margins file: the reference argmax at `pos`, its logit, the runner-up, the margin.
struct Margin {
  int pos = 0;
  int id = 0;
  double logit = 0;
  int runner_up = 0;
  double runner_up_logit = 0;
  double margin = 0;
};
/// The .margins file: '#' comment lines, then "pos id logit runner_up_id runner_up_logit margin".
std::vector<Margin> read_margins(const std::string& path);

}  // namespace fia::test
