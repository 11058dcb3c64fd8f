// Loading llama2.c checkpoints and tokenizers, and rejecting truncated and foreign files.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "model/model_files.hpp"
#include "support/cli_runner.hpp"

namespace fia::test {
namespace {

namespace fs = std::filesystem;

#define REQUIRE_MODELS() \
  if (!have_models()) GTEST_SKIP() << "no model files in " << models_dir()

void write_file(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

Status load_model_bytes(const std::string& bytes, const std::string& dir) {
  write_file(dir + "/m.bin", bytes);
  model::Checkpoint ck;
  return model::load_checkpoint(dir + "/m.bin", &ck);
}

TEST(Checkpoint, LoadsStories260K) {
  REQUIRE_MODELS();
  const model::Checkpoint& ck = stories260k();
  const model::ModelConfig& c = ck.config;
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
  EXPECT_EQ(c.head_size(), 8);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_EQ(model::checkpoint_bytes(c), fs::file_size(model_path()));
  ASSERT_EQ(ck.layers.size(), 5u);
  // The legacy order: embedding, then each tensor for all layers.
  const float* base = ck.data.data();
  EXPECT_EQ(ck.layers[0].rms_att - base, 512 * 64);
  EXPECT_EQ(ck.layers[1].rms_att - ck.layers[0].rms_att, 64);
  EXPECT_EQ(ck.layers[0].wq - base, 512 * 64 + 5 * 64);
  EXPECT_EQ(ck.layers[0].wk - ck.layers[4].wq, 64 * 64);
  EXPECT_EQ(ck.layers[0].w3 - ck.layers[4].w2, 64 * 172);
  EXPECT_EQ(ck.rms_final - ck.layers[4].w3, 172 * 64);
  EXPECT_EQ(ck.rms_final + 64 + 512 * 8 - base, static_cast<std::ptrdiff_t>(ck.data.size()));
  EXPECT_EQ(ck.classifier, ck.token_embedding);
  // RMSNorm weights of a trained model are O(1) and positive-ish; a shifted read would not be.
  double sum = 0;
  for (int i = 0; i < 64; ++i) sum += ck.rms_final[i];
  EXPECT_GT(sum / 64, 0.1);
}

TEST(Checkpoint, RejectsMissingTruncatedAndForeignFiles) {
  REQUIRE_MODELS();
  const std::string dir = temp_dir("ckpt");
  const std::string good = read_file(model_path());
  model::Checkpoint ck;

  Status st = model::load_checkpoint(dir + "/absent.bin", &ck);
  EXPECT_EQ(st.parameter, "--model");
  EXPECT_EQ(st.message.rfind("cannot open " + dir + "/absent.bin", 0), 0u) << st.message;

  st = load_model_bytes(good.substr(0, good.size() - 4), dir);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_NE(st.message.find("is truncated: its header (dim 64, hidden_dim 172, n_layers 5, n_heads 8, n_kv_heads 4, "
                            "vocab_size 512, seq_len 512) needs 1056540 bytes, the file has 1056536"),
            std::string::npos)
      << st.message;
  st = load_model_bytes(good.substr(0, 20), dir);
  EXPECT_NE(st.message.find("is truncated: a llama2.c checkpoint starts with a 28-byte header"), std::string::npos)
      << st.message;
  st = load_model_bytes(good + "xxxx", dir);
  EXPECT_NE(st.message.find("is not a llama2.c checkpoint: its header"), std::string::npos) << st.message;
  st = load_model_bytes(read_file(tokenizer_path()), dir);  // a tokenizer is not a model
  EXPECT_NE(st.message.find("is not a llama2.c checkpoint: "), std::string::npos) << st.message;

  std::string header = good.substr(0, 28);
  const std::int32_t magic = 0x616b3432, version = 2;
  header.replace(0, 4, reinterpret_cast<const char*>(&magic), 4);
  header.replace(4, 4, reinterpret_cast<const char*>(&version), 4);
  st = load_model_bytes(header + good.substr(28), dir);
  EXPECT_NE(st.message.find("is a versioned llama2.c export (magic \"ak42\", version 2)"), std::string::npos)
      << st.message;

  std::string odd_heads = good;
  const std::int32_t six = 6;
  odd_heads.replace(16, 4, reinterpret_cast<const char*>(&six), 4);  // n_kv_heads 6 of 8 heads
  st = load_model_bytes(odd_heads, dir);
  EXPECT_NE(st.message.find("n_heads (8) must be a multiple of n_kv_heads (6)"), std::string::npos) << st.message;
  fs::remove_all(dir);
}

TEST(Checkpoint, NegativeVocabSizeMeansAnOwnClassifier) {
  REQUIRE_MODELS();
  const std::string dir = temp_dir("ckpt-cls");
  std::string bytes = read_file(model_path());
  const std::int32_t neg = -512;
  bytes.replace(20, 4, reinterpret_cast<const char*>(&neg), 4);
  EXPECT_NE(load_model_bytes(bytes, dir).message.find("is truncated"), std::string::npos);
  bytes += std::string(512 * 64 * sizeof(float), '\0');
  write_file(dir + "/m.bin", bytes);
  model::Checkpoint ck;
  ASSERT_TRUE(model::load_checkpoint(dir + "/m.bin", &ck).ok());
  EXPECT_FALSE(ck.config.shared_classifier);
  EXPECT_EQ(ck.config.vocab_size, 512);
  EXPECT_EQ(ck.classifier, ck.rms_final + 64 + 512 * 8);
  fs::remove_all(dir);
}

TEST(TokenizerFile, LoadsTok512) {
  REQUIRE_MODELS();
  const model::Tokenizer& t = tok512();
  ASSERT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.piece(0), "<unk>");
  EXPECT_EQ(t.piece(1), "\n<s>\n");
  EXPECT_EQ(t.piece(2), "\n</s>\n");
  EXPECT_EQ(t.piece(3), "<0x00>");
  EXPECT_EQ(t.piece(258), "<0xFF>");
  EXPECT_EQ(t.piece(259), " t");
  EXPECT_EQ(t.piece(261), " a");
  EXPECT_EQ(t.score(261), -2.0f);
  EXPECT_EQ(t.lookup(" "), 410);
  EXPECT_EQ(t.lookup("no such piece"), -1);
}

TEST(TokenizerFile, RejectsMissingTruncatedAndForeignFiles) {
  REQUIRE_MODELS();
  const std::string dir = temp_dir("tok");
  const std::string good = read_file(tokenizer_path());
  model::Tokenizer t;
  auto load = [&](const std::string& bytes, int vocab) {
    write_file(dir + "/t.bin", bytes);
    return model::load_tokenizer(dir + "/t.bin", vocab, &t);
  };
  Status st = model::load_tokenizer(dir + "/absent.bin", 512, &t);
  EXPECT_EQ(st.parameter, "--tokenizer");
  EXPECT_EQ(st.message.rfind("cannot open", 0), 0u) << st.message;
  st = load(good.substr(0, good.size() - 1), 512);
  EXPECT_NE(st.message.find("is truncated: it ends inside token 511 of the model's 512"), std::string::npos)
      << st.message;
  st = load(good.substr(0, 2), 512);
  EXPECT_NE(st.message.find("is truncated"), std::string::npos) << st.message;
  st = load(good, 400);  // a tokenizer of another vocabulary
  EXPECT_NE(st.message.find("is not the tokenizer of this model: it has"), std::string::npos) << st.message;
  st = load(read_file(model_path()), 512);  // a model is not a tokenizer
  EXPECT_NE(st.message.find("is not a llama2.c tokenizer: token 2 has length "), std::string::npos) << st.message;
  const std::int32_t zero = 0;
  st = load(std::string(reinterpret_cast<const char*>(&zero), 4) + good.substr(4), 512);
  EXPECT_NE(st.message.find("is not a llama2.c tokenizer: max_token_length must lie in [1, 65536], got 0"),
            std::string::npos)
      << st.message;
  std::string long_piece = good;
  const std::int32_t len = 9;
  long_piece.replace(8, 4, reinterpret_cast<const char*>(&len), 4);  // token 0 longer than max_token_length 7
  st = load(long_piece, 512);
  EXPECT_NE(st.message.find("token 0 has length 9, outside [0, max_token_length 7]"), std::string::npos) << st.message;
  st = load(good, 100);
  EXPECT_NE(st.message.find("at least 259 tokens"), std::string::npos) << st.message;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fia::test
