#include "model/model_files.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fia::test {

std::string models_dir() { return std::string(FIA_SHARED_DIR) + "/models"; }
std::string model_path() { return models_dir() + "/stories260K.bin"; }
std::string tokenizer_path() { return models_dir() + "/tok512.bin"; }

bool have_models() { return std::filesystem::exists(model_path()) && std::filesystem::exists(tokenizer_path()); }

const model::Checkpoint& stories260k() {
  static const model::Checkpoint ck = [] {
    model::Checkpoint c;
    const Status st = model::load_checkpoint(model_path(), &c);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return c;
  }();
  return ck;
}

const model::Tokenizer& tok512() {
  static const model::Tokenizer tok = [] {
    model::Tokenizer t;
    const Status st = model::load_tokenizer(tokenizer_path(), stories260k().config.vocab_size, &t);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return t;
  }();
  return tok;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<int> read_ids(const std::string& path) {
  std::ifstream f(path);
  std::vector<int> ids;
  int id = 0;
  while (f >> id) ids.push_back(id);
  return ids;
}

std::vector<Margin> read_margins(const std::string& path) {
  std::ifstream f(path);
  std::vector<Margin> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    Margin m;
    s >> m.pos >> m.id >> m.logit >> m.runner_up >> m.runner_up_logit >> m.margin;
    EXPECT_FALSE(s.fail()) << "bad .margins line: " << line;
    out.push_back(m);
  }
  return out;
}

}  // namespace fia::test
