// safetensors / .npy reading and writing, and params.json parsing (CASE-FORMAT.md).
#include <gtest/gtest.h>

#include <cstring>

#include "fia/io/case_dir.hpp"
#include "io/json_text.hpp"
#include "fia/io/npy.hpp"
#include "fia/io/safetensors.hpp"
#include "validate/printable.hpp"

namespace fia::io {
namespace {

std::vector<unsigned char> image_with_header(const std::string& header, std::size_t data_bytes) {
  std::vector<unsigned char> img(8 + header.size() + data_bytes, 0);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) img[i] = static_cast<unsigned char>(n >> (8 * i));
  std::memcpy(img.data() + 8, header.data(), header.size());
  return img;
}

TEST(Safetensors, RoundTrip) {
  OwnedTensor a(DType::BF16, {2, 3}), b(DType::I32, {4});
  for (std::size_t i = 0; i < a.bytes.size(); ++i) a.bytes[i] = static_cast<std::byte>(i * 7);
  for (std::size_t i = 0; i < b.bytes.size(); ++i) b.bytes[i] = static_cast<std::byte>(i);
  OwnedTensor empty(DType::F16, {1, 0, 64});
  const auto img = serialize_safetensors({{"a", &a}, {"b", &b}, {"e", &empty}}, {{"k", "v"}});
  TensorFile f;
  ASSERT_TRUE(parse_safetensors(img, "x", &f).ok());
  EXPECT_EQ(f.tensors.at("a").shape, a.shape);
  EXPECT_EQ(f.tensors.at("a").bytes, a.bytes);
  EXPECT_EQ(f.tensors.at("b").dtype, DType::I32);
  EXPECT_EQ(f.tensors.at("b").bytes, b.bytes);
  EXPECT_EQ(f.tensors.at("e").numel(), 0);
  EXPECT_EQ(f.metadata.at("k"), "v");
}

TEST(Safetensors, RejectsMalformedImages) {
  TensorFile f;
  EXPECT_FALSE(parse_safetensors({1, 2, 3}, "x", &f).ok());                       // shorter than 8 bytes
  EXPECT_FALSE(parse_safetensors(image_with_header("{", 0), "x", &f).ok());        // not JSON
  EXPECT_FALSE(parse_safetensors(image_with_header("[]", 0), "x", &f).ok());       // not an object
  auto big = image_with_header("{}", 0);
  big[3] = 0x7F;                                                                   // header length past the end
  EXPECT_FALSE(parse_safetensors(big, "x", &f).ok());
  const char* bad[] = {
      R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}})",                  // bytes != shape
      R"({"t":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})",                  // truncated data
      R"({"t":{"dtype":"Q7","shape":[2],"data_offsets":[0,4]}})",                   // unknown dtype
      R"({"t":{"dtype":"F16","shape":[-2],"data_offsets":[0,4]}})",                 // negative dim
      R"({"t":{"dtype":"F16","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",  // overflow
      R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[4,0]}})",                  // reversed offsets
      R"({"t":{"dtype":"F16","shape":[2]}})",                                       // no offsets
      R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})",
  };
  for (const char* h : bad) {
    const Status st = parse_safetensors(image_with_header(h, 6), "inputs.safetensors", &f);
    EXPECT_FALSE(st.ok()) << h;
    EXPECT_EQ(st.parameter, "inputs.safetensors");
  }
}

std::vector<unsigned char> npy(const std::string& dict, std::size_t data_bytes) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  const unsigned char prefix[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(header.size() & 0xFF),
                                  static_cast<unsigned char>(header.size() >> 8)};
  std::vector<unsigned char> img(sizeof prefix + header.size() + data_bytes, 0);
  std::memcpy(img.data(), prefix, sizeof prefix);
  std::memcpy(img.data() + sizeof prefix, header.data(), header.size());
  return img;
}

TEST(Safetensors, RejectsDuplicateNamesAndDirectories) {
  TensorFile f;
  const Status st = parse_safetensors(
      image_with_header(R"({"t":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"t":{"dtype":"F16","shape":[1],"data_offsets":[2,4]}})", 4),
      "x", &f);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("'t' twice"), std::string::npos) << st.message;
  std::vector<unsigned char> bytes;
  EXPECT_FALSE(read_file("/", &bytes));
  EXPECT_FALSE(read_safetensors("/", &f).ok());
}

TEST(Npy, ParsesAndRejects) {
  OwnedTensor t;
  ASSERT_TRUE(parse_npy(npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", 12), "q.npy", &t).ok());
  EXPECT_EQ(t.dtype, DType::F16);
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 3}));
  ASSERT_TRUE(parse_npy(npy("{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }", 5), "m.npy", &t).ok());
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{5}));
  ASSERT_TRUE(parse_npy(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 8), "s.npy", &t).ok());
  EXPECT_TRUE(t.shape.empty());
  EXPECT_FALSE(parse_npy(npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", 11), "q.npy", &t).ok());
  EXPECT_FALSE(parse_npy(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", 4), "q.npy", &t).ok());
  EXPECT_FALSE(parse_npy(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", 4), "q.npy", &t).ok());
  EXPECT_FALSE(parse_npy(npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", 8), "q.npy", &t).ok());
  EXPECT_FALSE(parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }", 4), "q.npy", &t).ok());
  EXPECT_FALSE(parse_npy({0x93, 'N', 'U'}, "q.npy", &t).ok());
  EXPECT_FALSE(parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,), }", 8), "q.npy", &t).ok());
  EXPECT_FALSE(parse_npy(npy("{'descr': '<f4', 'shape': (2,), }", 8), "q.npy", &t).ok());
}


// Found by fuzzing: the header was matched with std::regex, which recursed once per character and
// overflowed the stack (fia run crashed) on long headers; a v1 header may hold 65535 bytes.
TEST(Npy, LongHeadersParse) {
  OwnedTensor t;
  const std::string spaces(30000, ' ');
  ASSERT_TRUE(parse_npy(npy("{'descr': '<f2', 'fortran_order': False, 'shape': (" + spaces + "2," + spaces + "), }", 4),
                        "q.npy", &t).ok());
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2}));
  const Status st = parse_npy(npy("{'descr': '" + std::string(60000, 'x') + "', 'fortran_order': False, 'shape': (), }", 4),
                              "q.npy", &t);
  EXPECT_FALSE(st.ok());
}

TEST(Npy, RoundTrip) {
  for (const auto& shape : {std::vector<std::int64_t>{2, 3}, std::vector<std::int64_t>{5}, std::vector<std::int64_t>{},
                            std::vector<std::int64_t>{1, 0, 4}}) {
    OwnedTensor t(DType::F16, shape);
    for (std::size_t i = 0; i < t.bytes.size(); ++i) t.bytes[i] = static_cast<std::byte>(i * 13);
    std::vector<unsigned char> img;
    ASSERT_TRUE(serialize_npy(t, &img).ok());
    OwnedTensor back;
    ASSERT_TRUE(parse_npy(img, "t.npy", &back).ok());
    EXPECT_EQ(back.dtype, DType::F16);
    EXPECT_EQ(back.shape, shape);
    EXPECT_EQ(back.bytes, t.bytes);
  }
  std::vector<unsigned char> img;
  EXPECT_EQ(serialize_npy(OwnedTensor(DType::BF16, {1}), &img).code, StatusCode::kUnsupported);
}

TEST(Params, ParsesEveryKey) {
  FiaArgs a;
  ASSERT_TRUE(parse_params(R"({"num_heads": 8, "scale_value": 0.5, "pre_tokens": -3, "next_tokens": 4,
      "input_layout": "TND", "num_key_value_heads": 2, "sparse_mode": 4, "inner_precise": 1, "block_size": 16,
      "antiquant_mode": 0, "key_antiquant_mode": 0, "value_antiquant_mode": 0, "query_quant_mode": 0,
      "softmax_lse_flag": true, "actual_seq_lengths": [1, 2], "actual_seq_lengths_kv": null,
      "actual_shared_prefix_len": [3]})", &a).ok());
  EXPECT_EQ(a.num_heads, 8);
  EXPECT_EQ(a.scale, 0.5);
  EXPECT_EQ(a.pre_tokens, -3);
  EXPECT_EQ(a.input_layout, "TND");
  EXPECT_TRUE(a.softmax_lse_flag);
  EXPECT_EQ(*a.actual_seq_lengths, (std::vector<std::int64_t>{1, 2}));
  EXPECT_FALSE(a.actual_seq_lengths_kv.has_value());
  EXPECT_EQ(*a.actual_shared_prefix_len, (std::vector<std::int64_t>{3}));
}

TEST(Params, RejectsNamingTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"num_head": 4})", "num_head"},
      {R"({"scale": 1, "scale_value": 1})", "scale"},
      {R"({"num_heads": "4"})", "num_heads"},
      {R"({"num_heads": 4.5})", "num_heads"},
      {R"({"actual_seq_lengths": [2.5, 3]})", "actual_seq_lengths"},
      {R"({"actual_seq_lengths_kv": 3})", "actual_seq_lengths_kv"},
      {R"({"softmax_lse_flag": 1})", "softmax_lse_flag"},
      {R"({"input_layout": 3})", "input_layout"},
      {R"({"scale": "x"})", "scale"},
      {R"({"block_size": 18446744073709551615})", "block_size"},
      {R"([1, 2])", "params.json"},
      {R"({"num_heads": 1, "num_heads": 2})", "num_heads"},
      {R"({"num_heads": )", "num_heads"},  // the text ends inside num_heads' value
      {R"({"num_heads": 1 "scale": 2})", "params.json"},
      {R"({"": 2})", "params.json"},  // found by fuzz_params: the error named no parameter
  };
  for (const auto& [text, name] : bad) {
    FiaArgs a;
    const Status st = parse_params(text, &a);
    EXPECT_FALSE(st.ok()) << text;
    EXPECT_EQ(st.parameter, name) << text;
  }
}

/// `depth` nested arrays around `inner`.
std::string nested(std::size_t depth, const std::string& inner = "") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

TEST(Params, DeeplyNestedValueIsRejectedNamingTheKey) {
  FiaArgs a;
  // 100,000 levels (200 KB) once overflowed the stack when the error message printed the value.
  Status st = parse_params(R"({"num_heads": )" + nested(100000) + "}", &a);
  EXPECT_EQ(st.parameter, "num_heads");
  EXPECT_EQ(st.message, "nested deeper than 64 levels");
  // Within the limit the value is read, and its echo in the message is cut short.
  st = parse_params(R"({"actual_seq_lengths": )" + nested(kMaxJsonDepth - 1, "1") + "}", &a);
  EXPECT_EQ(st.parameter, "actual_seq_lengths");
  EXPECT_EQ(st.message.rfind("must be a list of integers, got element [[[[", 0), 0u) << st.message;
  EXPECT_LT(st.message.size(), 160u) << st.message;
}

TEST(Params, NonFiniteNumbersAreNamedNotAnyJsonObject) {
  const std::pair<std::string, std::pair<const char*, const char*>> cases[] = {
      {R"({"scale": 1e400})", {"scale", "1e400 is not a finite number"}},
      {"{\"num_heads\": 2,\n \"scale\": -1e400}", {"scale", "-1e400 is not a finite number"}},
      {R"({"actual_seq_lengths": [1, 2e999]})", {"actual_seq_lengths", "2e999 is not a finite number"}},
      {R"({"scale": NaN})", {"scale", "not valid JSON at line 1, column 11: JSON has no NaN or Infinity"}},
      {"{\"num_heads\": 2,\n \"scale\": Infinity}",
       {"scale", "not valid JSON at line 2, column 11: JSON has no NaN or Infinity"}},
      {R"({"scale": -Infinity})", {"scale", "not valid JSON at line 1, column 12: JSON has no NaN or Infinity"}},
      {R"({"num_heads": 1 "scale": 2})",
       {"params.json", "not valid JSON at line 1, column 23: syntax error while parsing object - unexpected string "
                       "literal; expected '}'"}},
      {std::string("{\"num_heads\": 1}\0{}", 18), {"params.json", "not valid JSON at line 1, column 17: a NUL byte"}},
  };
  for (const auto& [text, want] : cases) {
    FiaArgs a;
    const Status st = parse_params(text, &a);
    EXPECT_EQ(st.parameter, want.first) << text;
    EXPECT_EQ(st.message, want.second) << text;
  }
}

TEST(Safetensors, DeeplyNestedHeaderIsRejectedNamingTheFile) {
  TensorFile f;
  const Status st = parse_safetensors(
      image_with_header(R"({"query":{"dtype":)" + nested(100000) + R"(,"shape":[1],"data_offsets":[0,2]}})", 2),
      "inputs.safetensors", &f);
  EXPECT_EQ(st.parameter, "inputs.safetensors");
  EXPECT_EQ(st.message, "the header entry 'query': nested deeper than 64 levels");
  const Status dtype = parse_safetensors(
      image_with_header(R"({"query":{"dtype":)" + nested(40, "\"F16\"") + R"(,"shape":[1],"data_offsets":[0,2]}})", 2),
      "inputs.safetensors", &f);
  EXPECT_EQ(dtype.message.rfind("tensor 'query' has an unsupported dtype [[[[", 0), 0u) << dtype.message;
  EXPECT_LT(dtype.message.size(), 140u) << dtype.message;
}

TEST(Safetensors, OnlyTrailingSpacesMayPadTheHeader) {
  const std::string json = R"({"t":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}})";
  TensorFile f;
  EXPECT_TRUE(parse_safetensors(image_with_header(json + "   ", 2), "x.safetensors", &f).ok());
  const std::pair<std::string, const char*> bad[] = {
      {json + std::string("\0\xff", 2), "the header holds a NUL byte at file offset 62; only spaces (0x20) may pad it"},
      {json + "\n  ", "only spaces (0x20) may pad the header, got byte 0x0a at file offset 62"},
      {" " + json, "the header must begin with '{', got byte 0x20"},
  };
  for (const auto& [header, message] : bad) {
    const Status st = parse_safetensors(image_with_header(header, 2), "x.safetensors", &f);
    EXPECT_EQ(st.parameter, "x.safetensors");
    EXPECT_EQ(st.message, message);
  }
}

TEST(Safetensors, OverlappingTensorsAreBothNamed) {
  TensorFile f;
  const Status st = parse_safetensors(
      image_with_header(R"({"key":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                        R"("value":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})", 6),
      "inputs.safetensors", &f);
  EXPECT_EQ(st.parameter, "inputs.safetensors");
  EXPECT_EQ(st.message, "tensors 'key' (bytes [0, 4)) and 'value' (bytes [2, 6)) overlap in the data area");
}

TEST(Printable, EscapesControlBytesAndBrokenUtf8AndCutsLongText) {
  EXPECT_EQ(detail::printable(std::string("BS\0H\n\x7f", 6)), "BS\\x00H\\x0a\\x7f");
  EXPECT_EQ(detail::printable("caf\xc3\xa9 \xff\xc3"), "caf\xc3\xa9 \\xff\\xc3");
  EXPECT_EQ(detail::printable(std::string(100, 'a'), 4), "aaaa... (100 bytes)");
}

}  // namespace
}  // namespace fia::io
