#include "call_decoder.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "byte_reader.hpp"
#include "mutations.hpp"
#include "support/antiquant_builder.hpp"

namespace fia::fuzz {

namespace {

using test::CallSpec;
using test::KvStorage;
using test::MaskKind;

/// Multiply-adds (both products) above which the KV axis is shortened: the float64 reference
/// then takes ~20 ms under the sanitizers, and a fuzzer is only as good as its speed.
constexpr std::int64_t kMaxWork = 4'000'000;

/// A length in [0, max]: 0 for one byte value in eight, else near max or near 1, so that long
/// axes get long lengths too.
std::int64_t length(ByteReader& r, std::int64_t max) {
  const std::int64_t b = r.byte();
  if (b % 8 == 0 || max == 0) return 0;
  return b < 128 ? max - b % max : 1 + b % max;
}

/// The CallSpec part of the input, following the rules test::random_spec draws valid calls by,
/// with the choices taken from the input instead of a random generator.
CallSpec decode_spec(ByteReader& r) {
  CallSpec s;
  s.layout = r.pick<const char*>({"BSH", "BSND", "BNSD", "TND", "NTD", "BNSD_BSND", "BSH_BNSD", "BSND_BNSD",
                                  "NTD_TND", "TND_NTD"});
  const bool token = s.layout.find('T') != std::string::npos;
  s.dtype = r.pick({DType::F16, DType::BF16, DType::F32});
  // Two invalid GQA pairs (3/2, 2/4) for the validation rules.
  const auto heads = r.pick<std::pair<int, int>>({{1, 1}, {2, 1}, {4, 2}, {6, 3}, {8, 1}, {4, 4}, {5, 5}, {3, 2}, {2, 4}});
  s.num_heads = heads.first;
  s.num_kv_heads = heads.second == heads.first && r.flag() ? 0 : heads.second;
  s.qk_dim = r.pick<std::int64_t>({8, 16, 32, 64, 40, 24, 128, 1, 5});
  s.v_dim = r.pick<std::int64_t>({0, 0, 0, 8, 16, 24, 64});
  s.batch = r.range(1, 4);
  s.q_seq = r.flag() ? 1 : r.range(2, 20);
  const std::int64_t kv = r.byte();  // mostly short; from 512 on, long enough for split-KV chunks
  s.kv_seq = kv < 224 ? 1 + kv % 64 : 512 + (kv - 224) * 20;
  s.lse = r.flag();

  const std::int64_t storage = r.below(8);
  if (storage < 2) {
    s.storage = KvStorage::kPaged;
    s.block_size = r.pick<std::int64_t>({4, 16, 128, 1, 7});
    s.paged_bnbsd = r.flag();
  } else if (storage < 3 && !token && s.batch > 1) {
    s.storage = KvStorage::kTensorList;
  }
  if (s.storage != KvStorage::kTensorList && r.below(6) == 0) s.rope_dim = r.pick<std::int64_t>({8, 16, 5});
  const std::int64_t vd = s.v_dim ? s.v_dim : s.qk_dim;
  const bool legacy = !token && (s.layout == "BSH" || s.layout == "BSND" || s.layout == "BNSD") && s.q_seq == 1 &&
                      vd == s.qk_dim && s.rope_dim == 0;

  // Lengths within the stored axes (mutations go beyond them).
  if (token || s.storage == KvStorage::kPaged || r.flag()) {
    std::vector<std::int64_t> lens(s.batch);
    for (auto& v : lens) v = length(r, s.kv_seq);
    s.act_kv = lens;
  }
  if (token || (!legacy && r.flag())) {
    std::vector<std::int64_t> lens(s.batch);
    for (auto& v : lens) v = length(r, s.q_seq);
    s.act_q = lens;
  }
  if (token) s.q_seq = std::max<std::int64_t>(1, *std::max_element(s.act_q->begin(), s.act_q->end()));
  if (!token && s.rope_dim == 0 && s.storage == KvStorage::kContiguous && r.below(4) == 0) {
    const std::int64_t max_q = s.act_q ? *std::max_element(s.act_q->begin(), s.act_q->end()) : s.q_seq;
    const std::int64_t max_kv = s.act_kv ? *std::max_element(s.act_kv->begin(), s.act_kv->end()) : s.kv_seq;
    if (s.act_q && r.flag()) s.query_padding = r.range(-1, 254) % (s.q_seq - max_q + 1);
    if (s.act_kv && r.flag()) s.kv_padding = r.range(-1, 254) % (s.kv_seq - max_kv + 1);
  }
  if (!token && s.rope_dim == 0 && !s.query_padding && !s.kv_padding && r.below(4) == 0) {
    s.prefix_seq = r.range(1, 40);
    if (r.flag()) s.prefix_len = r.byte() % (s.prefix_seq + 1);
  }

  // Visibility: masks, sparse modes, pre/next tokens.
  const std::int64_t span = s.kv_seq + s.prefix_seq + 4;
  auto tokens = [&] {
    const auto v = static_cast<std::int8_t>(r.byte());  // [-64, 127] stretched over long axes, or none
    return v < -64 ? kIntMax : v * std::max<std::int64_t>(1, span / 100);
  };
  const std::int64_t visibility = r.below(7);
  if (legacy && visibility < 3) {
    s.mask = MaskKind::kFull;
    s.sparse_mode = r.below(2);
  } else if (visibility == 1) {
    s.mask = MaskKind::kFull;
  } else if (visibility == 2) {
    s.mask = MaskKind::kFull;
    s.sparse_mode = 1;
  } else if (visibility >= 3) {
    s.mask = visibility == 6 ? MaskKind::kNone : MaskKind::kCompressed;  // 6: sparse mode without its mask
    s.sparse_mode = visibility == 6 ? r.range(2, 4) : visibility - 1;
  }
  s.pre_tokens = tokens();
  s.next_tokens = tokens();
  if (s.mask == MaskKind::kFull) {
    s.mask_rank = static_cast<int>(r.range(2, 4));
    s.mask_batch_broadcast = r.flag();
    s.mask_density = r.pick({0.0, 0.2, 0.6, 1.0});
    s.mask_dtype = r.pick({DType::Bool, DType::I8, DType::U8});
  }
  s.pse = !token && r.below(3) == 0;
  s.pse_batch_broadcast = r.flag();
  s.sink = r.below(3) == 0;
  s.inner_precise = legacy ? r.below(2) : r.below(4);
  s.value_range = r.pick({1.0f, 3.0f, 10.0f});
  s.scale = r.pick({0.0, 0.0, 1.0, 0.5, 0.05});

  // KV antiquantization (int4 needs head dims that are multiples of 8).
  const std::int64_t quant = r.below(4);
  const bool int4_ok = s.qk_dim % 8 == 0 && vd % 8 == 0;
  if (quant >= 2 && s.rope_dim == 0 && (quant == 2 || int4_ok)) {
    const std::vector<test::AntiquantKind> kinds = test::antiquant_kinds(s);
    const test::AntiquantKind kind = kinds[r.below(static_cast<std::int64_t>(kinds.size()))];
    test::set_antiquant(s, quant == 2 ? test::KvQuant::kInt8 : test::KvQuant::kInt4, kind, r.byte());
  }

  // Keep the call small: shorten the KV axis (and the lengths within it) past kMaxWork.
  const std::int64_t per_kv = s.batch * s.num_heads * s.q_seq * (s.qk_dim + s.rope_dim + vd);
  if (per_kv * (s.kv_seq + s.prefix_seq) > kMaxWork) {
    s.kv_seq = std::max<std::int64_t>(1, kMaxWork / per_kv - s.prefix_seq);
    if (s.act_kv)
      for (auto& v : *s.act_kv) v = std::min(v, s.kv_seq);
    if (s.kv_padding) s.kv_padding = std::min<std::int64_t>(*s.kv_padding, 0);
  }
  return s;
}

}  // namespace

FuzzCall decode_call(const std::uint8_t* data, std::size_t size, const DecodeMode& mode) {
  ByteReader r(data, size);
  const CallSpec spec = decode_spec(r);
  Options options;
  options.strict = r.below(4) == 0;
  options.threads = static_cast<int>(r.range(1, 2));
  const std::uint64_t seed = r.u64();
  if (mode.verbose) std::fprintf(stderr, "spec: %s seed=%llu\n", test::describe(spec).c_str(), static_cast<unsigned long long>(seed));
  // Dequantized int8 / int4 values stay within (127 + 3) * 1.5 / 64 and (8 + 3) * 1.5 / 8
  // (support/antiquant_builder.hpp: stored integers, offsets within 3, scales within 1.5x).
  const double value_bound = std::max<double>(spec.value_range, test::builder_internal::quantized(spec) ? 3.1 : 0.0);
  FuzzCall fc{test::build_call(spec, seed), options, /*ordinary=*/true, value_bound, /*trace=*/{}};
  std::ostringstream trace;
  trace << test::describe(spec) << " range=" << spec.value_range << " scale=" << fc.call.args.scale << " seed=" << seed
        << (fc.options.strict ? " strict" : "") << " threads=" << fc.options.threads;
  Mutator m{r, fc.call, mode.extreme, spec.value_range, trace};
  for (int k = 0; k < kMaxMutations && !r.done(); ++k)
    if (!m.apply()) fc.ordinary = false;
  fc.trace = trace.str();
  return fc;
}

}  // namespace fia::fuzz
