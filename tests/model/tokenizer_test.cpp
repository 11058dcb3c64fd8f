// run.c's BPE encoding (dummy prefix, merges by score, byte fallback) and decoding rules.
#include <gtest/gtest.h>

#include "model/model_files.hpp"

namespace fia::test {
namespace {

#define REQUIRE_MODELS() \
  if (!have_models()) GTEST_SKIP() << "no model files in " << models_dir()

using Ids = std::vector<int>;

std::string decode_all(const model::Tokenizer& t, const Ids& tokens) {
  std::string text;
  for (std::size_t i = 1; i < tokens.size(); ++i) text += t.decode(tokens[i - 1], tokens[i]);
  return text;
}

TEST(Tokenizer, EncodesLikeRunC) {
  REQUIRE_MODELS();
  const model::Tokenizer& t = tok512();
  EXPECT_EQ(t.encode(""), Ids({1}));                    // BOS only, no dummy prefix
  EXPECT_EQ(t.encode("Zoo"), Ids({1, 410, 469, 347}));  // " " + "Z" + "oo"
  // The start of the greedy story: " Once" " upon" " a" " time" after the dummy prefix merges.
  EXPECT_EQ(t.encode("Once upon a time"), Ids({1, 403, 407, 261, 378}));
}

TEST(Tokenizer, FallsBackToBytesForUnknownCodePoints) {
  REQUIRE_MODELS();
  const model::Tokenizer& t = tok512();
  EXPECT_EQ(t.encode("\xc3\xa9"), Ids({1, 410, 485}));                 // U+00E9 has a piece
  EXPECT_EQ(t.encode("\xc3\xbc"), Ids({1, 410, 0xC3 + 3, 0xBC + 3}));  // U+00FC has none: <0xC3> <0xBC>
  EXPECT_EQ(t.encode("\xf0\x9f\x98\x80"), Ids({1, 410, 0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3}));
}

TEST(Tokenizer, DecodesLikeRunC) {
  REQUIRE_MODELS();
  const model::Tokenizer& t = tok512();
  EXPECT_EQ(t.decode(1, 403), "Once");  // leading space dropped after BOS
  EXPECT_EQ(t.decode(403, 407), " upon");
  EXPECT_EQ(t.decode(1, 410), "");     // the dummy prefix alone
  EXPECT_EQ(t.decode(426, 13), "\n");  // <0x0A>
  EXPECT_EQ(t.decode(426, 3 + 0xC3), "\xc3");
  EXPECT_EQ(t.decode(426, 3), "");  // <0x00> is an empty C string
  // safe_printf: lone non-printable bytes are dropped, everything else passes.
  EXPECT_EQ(model::Tokenizer::printable("\xc3"), "");
  EXPECT_EQ(model::Tokenizer::printable("\x01"), "");
  EXPECT_EQ(model::Tokenizer::printable("\n"), "\n");
  EXPECT_EQ(model::Tokenizer::printable("a"), "a");
  EXPECT_EQ(model::Tokenizer::printable("\xc3\xa9"), "\xc3\xa9");
}

TEST(Tokenizer, DecodeInvertsEncode) {
  REQUIRE_MODELS();
  const model::Tokenizer& t = tok512();
  for (const std::string text : {"Lily and Ben went to the park.", "Zoo", "\"Hi!\" she said, 42 times.",
                                 "caf\xc3\xa9 \xc3\xbc\xf0\x9f\x98\x80", "a\nb  c", " leading space"}) {
    EXPECT_EQ(decode_all(t, t.encode(text)), text);
  }
}

TEST(Tokenizer, ReferenceIdsDecodeToTheReferenceText) {
  REQUIRE_MODELS();
  const model::Tokenizer& t = tok512();
  Ids ids = read_ids(models_dir() + "/stories260K_greedy_t0_n256.ids");
  ASSERT_EQ(ids.size(), 256u);
  ids.insert(ids.begin(), 1);
  std::string text;
  for (std::size_t i = 1; i < ids.size(); ++i) text += model::Tokenizer::printable(t.decode(ids[i - 1], ids[i]));
  EXPECT_EQ(text + "\n", read_file(models_dir() + "/stories260K_greedy_t0_n256.txt"));
}

}  // namespace
}  // namespace fia::test
