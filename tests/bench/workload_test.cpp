// The benchmark workloads are the calls shapes.json describes (bytes and FLOPs as the issue defines
// them, random tensors in realistic ranges), and the roofline arithmetic fia bench judges them by.
// Nothing here is timed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "bench/machine_limits.hpp"
#include "bench/runner.hpp"
#include "bench/workload.hpp"
#include "fia/half.hpp"
#include "fia/io/case_dir.hpp"
#include "problem/problem.hpp"
#include "support/call_builder.hpp"
#include "support/cli_runner.hpp"
#include "support/criterion.hpp"
#include "support/expectations.hpp"
#include "support/run_helpers.hpp"

namespace fia::test {
namespace {

const char* kShapes = FIA_SOURCE_DIR "/bench/shapes.json";

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

/// The one workload `name` of the project's shapes file.
bench::Workload shape(const std::string& name) {
  auto w = bench::load_shapes(kShapes, {name});
  EXPECT_EQ(w.size(), 1u) << name;
  return w.empty() ? bench::Workload{} : std::move(w[0]);
}

TEST(BenchWorkload, ShapesFileIsTheSharedOneModuloFormatting) {
  const std::string shared = FIA_SHARED_DIR "/bench/shapes.json";
  if (!std::filesystem::exists(shared)) GTEST_SKIP() << "no " << shared;
  EXPECT_EQ(read_json(kShapes), read_json(shared)) << "copy " << shared << " to bench/shapes.json";
}

TEST(BenchWorkload, EveryShapeLoadsAsACallOrTheLibrarysRejection) {
  const nlohmann::json doc = read_json(kShapes);
  const auto all = bench::load_shapes(kShapes, {});
  ASSERT_EQ(all.size(), doc["shapes"].size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const bench::Workload& w = all[i];
    EXPECT_EQ(w.name, doc["shapes"][i]["name"].get<std::string>());
    ASSERT_EQ(w.copies.size(), 1u) << w.name << ": " << w.error;  // the tensors exist either way
    if (w.error.empty()) {
      EXPECT_GT(w.bytes_per_call, 0.0) << w.name;
      EXPECT_GT(w.flops_per_call, 0.0) << w.name;
      EXPECT_EQ(w.decode, w.name[0] == 'D') << w.name;
    }
  }
  // Selection by name keeps the file's order and ignores unknown names.
  const auto some = bench::load_shapes(kShapes, {"P1", "D1", "nope"});
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[0].name, "D1");
  EXPECT_EQ(some[1].name, "P1");
}

TEST(BenchWorkload, DeeplyNestedShapesFileIsAnErrorNotACrash) {
  // 100,000 levels once overflowed the stack when the params were printed for parse_params.
  const std::string path = testing::TempDir() + "deep_shapes.json";
  std::ofstream(path) << R"({"shapes": [{"name": "X", "params": )" << std::string(100000, '[')
                      << std::string(100000, ']') << "}]}";
  try {
    bench::load_shapes(path, {});
    ADD_FAILURE() << "accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": 'shapes': nested deeper than 64 levels");
  }
  std::filesystem::remove(path);
}

TEST(BenchWorkload, FloatShapesReadKvAndBlockTablesAndDoTheirFlops) {
  auto w = bench::load_shapes(kShapes, {"D1", "D2", "D6", "P1", "P3"});
  ASSERT_EQ(w.size(), 5u);
  for (const auto& x : w) ASSERT_TRUE(x.error.empty()) << x.name << ": " << x.error;
  EXPECT_TRUE(w[0].decode);
  EXPECT_DOUBLE_EQ(w[0].bytes_per_call, 2.0 * 8 * 4096 * 128 * 2);  // K + V, fp16
  // D2: 16 x 2048 tokens of paged fp16 K + V (H = 1024), and 16 block-table entries per batch.
  EXPECT_DOUBLE_EQ(w[1].bytes_per_call, 16.0 * 2048 * 1024 * 2 * 2 + 16.0 * 16 * 4);
  // D6 (decode MLA, V := K): 8 x 4096 tokens of bf16 K (512) and key_rope (64), 32 table entries
  // each; the value tensor is ignored. QK over 576 dims, PV over 512.
  EXPECT_TRUE(w[2].values_are_keys);
  EXPECT_DOUBLE_EQ(w[2].bytes_per_call, 8.0 * 4096 * (512 + 64) * 2 + 8.0 * 32 * 4);
  EXPECT_DOUBLE_EQ(w[2].flops_per_call, 2.0 * 16 * 8 * 4096 * (576 + 512));
  EXPECT_FALSE(w[3].decode);
  EXPECT_DOUBLE_EQ(w[3].flops_per_call, 4.0 * 32 * 2048 * 2048 * 128 / 2);  // causal halves
  const double cells = 300.0 * 300 + 800.0 * 800 + 300.0 * 300 + 600.0 * 600;  // TND lengths
  EXPECT_DOUBLE_EQ(w[4].flops_per_call, 4.0 * 16 * cells * 128 / 2);
}

/// A BNSD-like problem as D1 (one batch, 8 KV heads, D 128) with `tokens` KV tokens.
detail::Problem problem_like_d1(std::int64_t tokens) {
  detail::Problem p;
  p.batch = 1;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.group = 4;
  p.qk_dim = p.v_dim = 128;
  p.dtype = DType::F16;
  p.act_q = {1};
  p.segments.resize(1);
  p.segments[0].length = {tokens};
  return p;
}

// The byte count from the Problem fields alone (no validation needed).
TEST(BenchWorkload, BytesReadCountStoredKvScalesAndBlockTables) {
  detail::Problem p = problem_like_d1(4096);
  EXPECT_DOUBLE_EQ(bench::bytes_read(p), 2.0 * 8 * 4096 * 128 * 2);  // D1

  // D3: int8, per-channel (the KV_N x D tables, F16 like the query).
  p.kv_dtype = DType::I8;
  p.kv_format = detail::KvFormat::kInt8;
  p.key_antiquant.channel_scale.assign(8 * 128, 1.0f);
  p.value_antiquant.channel_scale.assign(8 * 128, 1.0f);
  EXPECT_DOUBLE_EQ(bench::bytes_read(p), 2.0 * 8 * 4096 * 128 + 2.0 * 8 * 128 * 2);
  p.key_antiquant.channel_offset.assign(8 * 128, 0.0f);  // offsets: as much again
  p.value_antiquant.channel_offset.assign(8 * 128, 0.0f);
  EXPECT_DOUBLE_EQ(bench::bytes_read(p), 2.0 * 8 * 4096 * 128 + 4.0 * 8 * 128 * 2);

  // D5: int4, per-token x per-head (mode 3): one F32 per token and KV head.
  const float scales[1] = {1.0f};
  p = problem_like_d1(4096);
  p.kv_dtype = DType::I32;
  p.kv_format = detail::KvFormat::kInt4;
  for (detail::Antiquant* aq : {&p.key_antiquant, &p.value_antiquant}) {
    aq->per_token = true;
    aq->token_scale = scales;
    aq->head_stride = 4096;
    aq->token_stride = 1;
  }
  EXPECT_DOUBLE_EQ(bench::bytes_read(p), 2.0 * 8 * 4096 * 16 * 4 + 2.0 * 8 * 4096 * 4);
  // Per-token without heads (mode 1) with offsets: one F32 scale and one offset per token.
  for (detail::Antiquant* aq : {&p.key_antiquant, &p.value_antiquant}) {
    aq->head_stride = 0;
    aq->token_offset = scales;
  }
  EXPECT_DOUBLE_EQ(bench::bytes_read(p), 2.0 * 8 * 4096 * 16 * 4 + 2.0 * 4096 * 4 * 2);

  // Paged int8 with a shared prefix of 100 tokens (batched): per-token scales cover prefix and own
  // tokens; the block table is read for the own 1000 tokens only (8 blocks of 128).
  p = problem_like_d1(100);
  p.kv_dtype = DType::I8;
  p.kv_format = detail::KvFormat::kInt8;
  p.segments.resize(2);
  p.segments[1].paged = true;
  p.segments[1].block_size = 128;
  p.segments[1].length = {1000};
  for (detail::Antiquant* aq : {&p.key_antiquant, &p.value_antiquant}) {
    aq->per_token = true;
    aq->token_scale = scales;
  }
  EXPECT_DOUBLE_EQ(bench::bytes_read(p), 2.0 * 8 * 1100 * 128 + 2.0 * 1100 * 4 + 8.0 * 4);
}

// Needs the KV antiquantization validation (FIA-SPEC 12); without it D3 and D5 are rejected.
TEST(BenchWorkload, QuantizedKvIsCountedInItsStoredDtypeWithItsScales) {
  const bench::Workload d3 = shape("D3");
  ASSERT_TRUE(d3.error.empty()) << d3.error;
  EXPECT_TRUE(d3.decode);
  // int8 K + V (one byte each), per-channel F16 scales (KV_N x D) for K and for V.
  EXPECT_DOUBLE_EQ(d3.bytes_per_call, 2.0 * 8 * 4096 * 128 + 2.0 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(d3.flops_per_call, 2.0 * 32 * 4096 * (128 + 128));

  const bench::Workload d5 = shape("D5");
  ASSERT_TRUE(d5.error.empty()) << d5.error;
  EXPECT_TRUE(d5.decode);
  // int4 K + V: 16 int32 words (128 values) per token and head; one F32 scale per token and head.
  EXPECT_DOUBLE_EQ(d5.bytes_per_call, 2.0 * 8 * 4096 * 16 * 4 + 2.0 * 8 * 4096 * 4);
  EXPECT_DOUBLE_EQ(d5.flops_per_call, 2.0 * 32 * 4096 * (128 + 128));  // logical D = 128
}

TEST(BenchWorkload, QuantizedTensorsAndScalesAreDrawnInRealisticRanges) {
  const bench::Workload d3 = shape("D3");
  ASSERT_EQ(d3.copies.size(), 1u) << d3.error;
  const FiaArgs& a3 = d3.copies[0]->args;
  ASSERT_EQ(a3.key[0].dtype, DType::I8);
  const auto* k8 = static_cast<const std::int8_t*>(a3.key[0].data);
  int lo = 0, hi = 0;
  for (std::int64_t i = 0; i < a3.key[0].numel(); ++i) lo = std::min<int>(lo, k8[i]), hi = std::max<int>(hi, k8[i]);
  EXPECT_EQ(lo, -127);
  EXPECT_EQ(hi, 127);
  for (const TensorView* s : {&a3.key_antiquant_scale, &a3.value_antiquant_scale}) {
    ASSERT_EQ(s->dtype, DType::F16);
    ASSERT_EQ(s->numel(), 8 * 128);
    for (std::int64_t i = 0; i < s->numel(); ++i) {
      const float v = f16_to_f32(static_cast<const std::uint16_t*>(s->data)[i]);
      ASSERT_GE(v, 0.499f / 127);
      ASSERT_LE(v, 1.501f / 127);
    }
  }

  const bench::Workload d5 = shape("D5");
  ASSERT_EQ(d5.copies.size(), 1u) << d5.error;
  const FiaArgs& a5 = d5.copies[0]->args;
  ASSERT_EQ(a5.value[0].dtype, DType::I32);
  int nibble_count[16] = {};
  const auto* words = static_cast<const std::uint32_t*>(a5.value[0].data);
  for (std::int64_t i = 0; i < a5.value[0].numel(); ++i)
    for (int n = 0; n < 8; ++n) ++nibble_count[(words[i] >> (4 * n)) & 0xF];
  for (int n = 0; n < 16; ++n) EXPECT_GT(nibble_count[n], 0) << "nibble " << n;  // every int4 value occurs
  for (const TensorView* s : {&a5.key_antiquant_scale, &a5.value_antiquant_scale}) {
    ASSERT_EQ(s->dtype, DType::F32);
    for (std::int64_t i = 0; i < s->numel(); ++i) {
      const float v = static_cast<const float*>(s->data)[i];
      ASSERT_GE(v, 0.5f / 7);
      ASSERT_LE(v, 1.5f / 7);
    }
  }
}

// Float, int8 and int4 K/V: the copies (stored dtype, shared scales) are valid calls whose
// results meet criterion A against the exact reference.
TEST(BenchWorkload, ColdCopiesHoldDifferentKvAndGiveResultsOfTheSameCall) {
  for (const char* name : {"D1", "D3", "D5"}) {
    SCOPED_TRACE(name);
    bench::Workload w = shape(name);
    ASSERT_TRUE(w.error.empty()) << w.error;
    bench::add_cold_copies(w, 3.0 * w.bytes_per_call);
    ASSERT_GE(w.copies.size(), 3u);
    EXPECT_NE(w.copies[0]->args.key[0].data, w.copies[1]->args.key[0].data);
    EXPECT_EQ(w.copies[1]->args.key[0].dtype, w.copies[0]->args.key[0].dtype);
    for (std::size_t i = 0; i < 3; ++i) {
      const FiaArgs& args = w.copies[i]->args;
      detail::ReferenceResult exact;
      ASSERT_TRUE(reference_exact(args, &exact).ok());
      Outputs out;
      const Status st = run_call(args, Backend::kCpu, 2, &out);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_TRUE(criterion_a(out.attention_out, exact.out).pass) << "copy " << i;
    }
  }
}

// Callers' tensors (torch's CPU allocator) start on a cache line; so do the benchmark's, in every
// copy, or each 64-byte piece of a K row would span two lines (glibc puts large blocks 16 bytes
// past a page) and the kernels would be timed on loads no caller makes.
TEST(BenchWorkload, EveryTensorOfEveryCopyStartsOnACacheLine) {
  for (const char* name : {"D2", "D7", "P3"}) {
    SCOPED_TRACE(name);
    bench::Workload w = shape(name);
    ASSERT_TRUE(w.error.empty()) << w.error;
    bench::add_cold_copies(w, 3.0 * w.bytes_per_call);
    for (const auto& c : w.copies) {
      const FiaArgs& a = c->args;
      for (const TensorView* t : {&a.query, &a.key[0], &a.value[0], &a.block_table, &a.atten_mask})
        if (t->data) {
          EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t->data) % 64, 0u);
        }
    }
  }
}

// A case folder's K and V given as tensor lists (key.0, key.1, ...: one tensor per batch) get cold
// copies of every tensor of both lists, which the bandwidth rounds read too; a decode call whose
// K and V hold no bytes gets none (there is nothing to keep cold).
TEST(BenchWorkload, ColdCopiesOfTensorListsCopyEveryTensorAndEmptyKvGetsNone) {
  CallSpec spec;
  spec.batch = 3;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  spec.kv_seq = 40;
  spec.storage = KvStorage::kTensorList;
  const std::string dir = temp_dir("bench_lists");
  ASSERT_TRUE(io::save_case(dir + "/lists", build_call(spec, 21).args).ok());
  bench::Workload w = bench::load_case_workload(dir + "/lists");
  ASSERT_TRUE(w.error.empty()) << w.error;
  ASSERT_TRUE(w.decode);
  const FiaArgs& first = w.copies[0]->args;
  ASSERT_EQ(first.key.size(), 3u);
  bench::add_cold_copies(w, 3.0 * w.bytes_per_call);
  ASSERT_GE(w.copies.size(), 3u);
  EXPECT_EQ(bench::kv_ranges(w, 0).size(), w.copies.size() * 6);
  for (std::size_t i = 1; i < 3; ++i) {
    const FiaArgs& a = w.copies[i]->args;
    ASSERT_EQ(a.key.size(), 3u);
    ASSERT_EQ(a.value.size(), 3u);
    for (std::size_t j = 0; j < 3; ++j) {
      EXPECT_NE(a.key[j].data, first.key[j].data);
      EXPECT_NE(a.value[j].data, first.value[j].data);
      EXPECT_EQ(a.key[j].shape, first.key[j].shape);
    }
    expect_cpu_matches_reference(a, false, "copy " + std::to_string(i));
  }
  spec.storage = KvStorage::kContiguous;
  spec.kv_seq = 0;
  ASSERT_TRUE(io::save_case(dir + "/empty", build_call(spec, 22).args).ok());
  bench::Workload empty = bench::load_case_workload(dir + "/empty");
  ASSERT_TRUE(empty.error.empty()) << empty.error;
  bench::add_cold_copies(empty, 1e9);
  EXPECT_EQ(empty.copies.size(), 1u);
  std::filesystem::remove_all(dir);
}

// Decode MLA ignores `value` (V := K): its copies rotate the keys alone, sized by the key bytes,
// and still give the result of the same call.
TEST(BenchWorkload, ColdCopiesOfDecodeMlaRotateTheKeysAlone) {
  bench::Workload w = shape("D6");
  ASSERT_TRUE(w.error.empty()) << w.error;
  ASSERT_TRUE(w.values_are_keys);
  const TensorView& key = w.copies[0]->args.key[0];
  const double key_bytes = static_cast<double>(key.numel()) * static_cast<double>(dtype_size(key.dtype));
  bench::add_cold_copies(w, 3.0 * key_bytes);
  ASSERT_EQ(w.copies.size(), 3u);
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_NE(w.copies[i]->args.key[0].data, w.copies[0]->args.key[0].data);
    EXPECT_EQ(w.copies[i]->args.value[0].data, w.copies[0]->args.value[0].data);
  }
  Outputs a, b;
  ASSERT_TRUE(run_call(w.copies[1]->args, Backend::kCpu, 2, &a).ok());
  FiaArgs same = w.copies[1]->args;
  same.value = w.copies[2]->args.key;  // any value: it is not read
  ASSERT_TRUE(run_call(same, Backend::kCpu, 2, &b).ok());
  EXPECT_EQ(a.attention_out.bytes, b.attention_out.bytes);
}

TEST(BenchRoofline, EachShapeIsJudgedAgainstProbeRoundsTakenBetweenItsCalls) {
  bench::Workload w = shape("D1");
  std::string order;  // 'p': a probe round, 'c': a timed call
  double next = 0.0;
  bench::LimitProbes probes{[&] {
                              order += 'p';
                              return next += 10e9;  // 10, 20, ... GB/s: the median is the 4th of 6
                            },
                            [] { return 1e18; }, 6, nullptr, nullptr, nullptr, nullptr, nullptr};
  Options opt;
  opt.threads = 1;
  opt.backend = Backend::kCpu;
  const bench::Measurement m = bench::measure(w, opt, 10, probes, [&](int, int) { order += 'c'; });
  ASSERT_TRUE(m.error.empty()) << m.error;
  EXPECT_EQ(order, "pccpccpccpccpccp");  // one before the first call, the others spread after them
  EXPECT_FALSE(m.bandwidth_of_kv);       // one copy: the probe's own buffer
  ASSERT_EQ(m.bandwidth_rounds.size(), 6u);
  EXPECT_EQ(m.read_bandwidth.median, 40e9);
  EXPECT_EQ(m.read_bandwidth.min, 10e9);
  EXPECT_EQ(m.read_bandwidth.max, 60e9);
  EXPECT_TRUE(m.memory_bound);
  EXPECT_DOUBLE_EQ(m.roofline_s, w.bytes_per_call / 40e9);
  EXPECT_DOUBLE_EQ(m.fraction, m.roofline_s / m.median_s);

  bench::LimitProbes none;  // no probe: no rounds, no roofline
  none.rounds = 0;
  const bench::Measurement u = bench::measure(w, opt, 2, none, nullptr);
  EXPECT_TRUE(u.bandwidth_rounds.empty());
  EXPECT_EQ(u.roofline_s, 0.0);
}

// Int8 full quantization (P4) multiplies integers: it is judged against the int8 multiply-add
// peak, whose rounds it takes instead of the fp32 FMA peak's; float workloads keep the FMA peak.
TEST(BenchRoofline, Int8ProductsAreJudgedAgainstTheInt8Peak) {
  nlohmann::json file = read_json(kShapes);
  nlohmann::json small;
  for (const auto& e : file["shapes"])
    if (e["name"] == "P4") small = e;
  ASSERT_FALSE(small.is_null());
  small["name"] = "P4-small";  // 64 tokens, 4 query heads over one KV head
  small["params"]["num_heads"] = 4;
  small["params"]["num_key_value_heads"] = 1;
  small["tensors"]["query"][1] = {1, 64, 4, 128};
  small["tensors"]["key"][1] = {1, 64, 1, 128};
  small["tensors"]["value"][1] = {1, 64, 1, 128};
  small["tensors"]["atten_mask"][1] = {2048, 2048};
  const std::string path = testing::TempDir() + "int8_shapes.json";
  std::ofstream(path) << nlohmann::json{{"shapes", {small}}}.dump();
  auto loaded = bench::load_shapes(path, {});
  std::filesystem::remove(path);
  ASSERT_EQ(loaded.size(), 1u);
  bench::Workload& w = loaded[0];
  ASSERT_TRUE(w.error.empty()) << w.error;
  EXPECT_TRUE(w.int8_products);
  EXPECT_FALSE(shape("P1").int8_products);
  EXPECT_FALSE(shape("D3").int8_products);  // int8 KV dequantized to float products (antiquant)

  int fma_rounds = 0, int8_rounds = 0;
  bench::LimitProbes probes{[] { return 1e15; }, [&] { ++fma_rounds; return 1e9; }, 3,
                            [&] { ++int8_rounds; return 4e9; }, nullptr, nullptr, nullptr, nullptr};
  Options opt;
  opt.threads = 1;
  opt.backend = Backend::kCpu;
  const bench::Measurement m = bench::measure(w, opt, 2, probes, nullptr);
  ASSERT_TRUE(m.error.empty()) << m.error;
  EXPECT_TRUE(m.int8_products);
  EXPECT_EQ(fma_rounds, 0);
  EXPECT_EQ(int8_rounds, 3);
  EXPECT_EQ(m.int8_peak.median, 4e9);
  EXPECT_EQ(m.fma_peak.rounds, 0);
  EXPECT_FALSE(m.memory_bound);
  EXPECT_DOUBLE_EQ(m.roofline_s, w.flops_per_call / 4e9);

  // Products on AMX-INT8 tiles (Workload::int8_tiles, set where a plan would take them) are judged
  // against the AMX-INT8 rounds instead of the byte quads'.
  int amx_rounds = 0;
  int8_rounds = 0;
  probes.amx_int8_peak = [&] { ++amx_rounds; return 16e9; };
  w.int8_tiles = true;
  const bench::Measurement t = bench::measure(w, opt, 2, probes, nullptr);
  ASSERT_TRUE(t.error.empty()) << t.error;
  EXPECT_TRUE(t.int8_tiles);
  EXPECT_EQ(amx_rounds, 3);
  EXPECT_EQ(int8_rounds, 0);
  EXPECT_EQ(t.int8_peak.median, 16e9);
  EXPECT_DOUBLE_EQ(t.roofline_s, w.flops_per_call / 16e9);
}

// A decode workload with cold copies takes its bandwidth rounds over its own K and V copies, the
// copy of the next timed call first, so that the rest of the round (every other copy) leaves it
// cold again; the probe's own buffer is not read.
TEST(BenchRoofline, DecodeBandwidthIsReadOverItsOwnKvCopiesNextCallsFirst) {
  bench::Workload w = shape("D1");
  ASSERT_TRUE(w.error.empty()) << w.error;
  bench::add_cold_copies(w, 3.0 * w.bytes_per_call);
  const std::size_t n = w.copies.size();
  ASSERT_GE(n, 3u);
  const TensorView& k = w.copies[0]->args.key[0];
  const std::size_t copy_bytes = 2 * static_cast<std::size_t>(k.numel()) * dtype_size(k.dtype);  // K and V
  std::string order;                     // 'p': a probe round, 'c': a timed call
  std::vector<const void*> round_first;  // the first range of each round
  int buffer_rounds = 0;
  bench::LimitProbes probes{[&] { return ++buffer_rounds, 1e9; }, [] { return 1e18; }, 4, nullptr,
                            [&](const std::vector<bench::ByteRange>& ranges) {
                              order += 'p';
                              EXPECT_EQ(ranges.size(), 2 * n);
                              std::size_t total = 0;
                              for (const bench::ByteRange& r : ranges) total += r.bytes;
                              EXPECT_EQ(total, n * copy_bytes);
                              round_first.push_back(ranges.front().data);
                              return 20e9;
                            },
                            nullptr, nullptr, nullptr};
  Options opt;
  opt.threads = 1;
  opt.backend = Backend::kCpu;
  const bench::Measurement m = bench::measure(w, opt, 6, probes, [&](int, int) { order += 'c'; });
  ASSERT_TRUE(m.error.empty()) << m.error;
  EXPECT_EQ(order, "pccpccpccp");
  EXPECT_EQ(buffer_rounds, 0);
  EXPECT_TRUE(m.bandwidth_of_kv);
  EXPECT_EQ(m.read_bandwidth.median, 20e9);
  std::size_t calls = 0, round = 0;  // timed call i reads copy i % n
  for (const char c : order) {
    if (c == 'c') ++calls;
    else EXPECT_EQ(round_first[round++], w.copies[calls % n]->args.key[0].data) << "round " << round;
  }
}

}  // namespace
}  // namespace fia::test

namespace fia::bench {
namespace {

TEST(BenchRoofline, ReadBandwidthRoundsReadWholeSlicesOfEachRange) {
  std::vector<std::uint32_t> words(3 * 1024 + 5), few(100);
  const ByteRange a{words.data(), words.size() * 4}, b{few.data(), few.size() * 4};  // 12 KiB + 20, 400
  EXPECT_EQ(round_bytes(2, {a, b}), 8192u);  // a 4 KiB slice per worker of a, none of b
  EXPECT_EQ(round_bytes(1, {a, b}), 12288u);
  EXPECT_EQ(round_bytes(3, {a}), 12288u);
  EXPECT_EQ(round_bytes(4, {a}), 0u);
  EXPECT_EQ(read_bandwidth_round(2, {b}), 0.0);  // nothing to read: no rate
  EXPECT_EQ(read_bandwidth_round(2, {}), 0.0);
  EXPECT_GT(read_bandwidth_round(2, {a, b}), 0.0);
}

TEST(BenchRoofline, IsTheSlowerOfReadingTheBytesAndDoingTheFlops) {
  const MachineLimits limits{20e9, 400e9};  // 20 GB/s, 400 GFLOP/s
  bool memory = false;
  EXPECT_DOUBLE_EQ(roofline_seconds(40e6, 4e9, limits, &memory), 0.01);  // 2 ms of bytes, 10 ms of FLOPs
  EXPECT_FALSE(memory);
  EXPECT_DOUBLE_EQ(roofline_seconds(400e6, 4e9, limits, &memory), 0.02);  // 20 ms of bytes
  EXPECT_TRUE(memory);
  EXPECT_DOUBLE_EQ(roofline_seconds(1e9, 1e9, MachineLimits{}, &memory), 0.0);
}

TEST(BenchRoofline, ProbesReportTheMedianAndTheSpread) {
  const Probe p = summarize({3.0, 9.0, 1.0, 7.0, 5.0});
  EXPECT_EQ(p.rounds, 5);
  EXPECT_EQ(p.median, 5.0);
  EXPECT_EQ(p.min, 1.0);
  EXPECT_EQ(p.max, 9.0);
  EXPECT_EQ(summarize({2.0, 1.0}).median, 2.0);  // the upper median
  EXPECT_EQ(summarize({}).rounds, 0);
}

}  // namespace
}  // namespace fia::bench
