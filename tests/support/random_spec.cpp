#include "support/random_spec.hpp"

#include <algorithm>
#include <random>

namespace fia::test {

namespace {

template <class T>
T pick(std::mt19937_64& rng, std::initializer_list<T> options) {
  return *(options.begin() + rng() % options.size());
}

std::int64_t uniform(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

bool chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }

}  // namespace

CallSpec random_spec(std::uint64_t seed, const SpecAxes& axes) {
  std::mt19937_64 rng(seed * 7919 + 17);
  CallSpec s;
  s.layout = pick<std::string>(rng, {"BSH", "BSND", "BNSD", "TND", "NTD", "BNSD_BSND", "BSH_BNSD", "BSND_BNSD",
                                     "NTD_TND", "TND_NTD"});
  const bool token = s.layout.find('T') != std::string::npos;
  s.dtype = pick(rng, {DType::F16, DType::BF16, DType::F32});
  const auto heads = pick<std::pair<int, int>>(rng, {{1, 1}, {2, 1}, {4, 2}, {6, 3}, {8, 1}, {4, 4}, {5, 5}});
  s.num_heads = heads.first;
  s.num_kv_heads = heads.second == heads.first && chance(rng, 0.5) ? 0 : heads.second;
  s.qk_dim = pick<std::int64_t>(rng, {8, 16, 32, 64, 40});
  s.v_dim = chance(rng, 0.25) ? pick<std::int64_t>(rng, {8, 16, 24}) : 0;
  s.batch = uniform(rng, 1, 4);
  s.q_seq = chance(rng, 0.4) ? 1 : uniform(rng, 2, axes.max_q_seq);
  s.kv_seq = uniform(rng, 1, axes.max_kv_seq);
  s.lse = chance(rng, 0.6);

  // Storage.
  if (axes.storage_modes) {
    const int r = static_cast<int>(rng() % 10);
    if (r < 2) {
      s.storage = KvStorage::kPaged;
      s.block_size = pick<std::int64_t>(rng, {4, 16, 128});
      s.paged_bnbsd = chance(rng, 0.5);
    } else if (r < 3 && !token && s.batch > 1) {
      s.storage = KvStorage::kTensorList;
    }
  }
  const bool rope = s.storage != KvStorage::kTensorList && chance(rng, 0.15);
  if (rope) s.rope_dim = pick<std::int64_t>(rng, {8, 16});
  const std::int64_t vd = s.v_dim ? s.v_dim : s.qk_dim;
  const bool legacy = !token && (s.layout == "BSH" || s.layout == "BSND" || s.layout == "BNSD") && s.q_seq == 1 &&
                      vd == s.qk_dim && !rope;

  // Lengths: token layouts always carry them; others sometimes, including zeros.
  if (token || s.storage == KvStorage::kPaged || chance(rng, 0.5)) {
    std::vector<std::int64_t> kv(s.batch);
    for (auto& v : kv) v = chance(rng, 0.1) ? 0 : uniform(rng, 1, s.kv_seq);
    s.act_kv = kv;
  }
  if (token || (!legacy && chance(rng, 0.5))) {
    std::vector<std::int64_t> q(s.batch);
    for (auto& v : q) v = chance(rng, 0.1) ? 0 : uniform(rng, 1, s.q_seq);
    s.act_q = q;
  }
  if (token) {
    s.q_seq = std::max<std::int64_t>(1, *std::max_element(s.act_q->begin(), s.act_q->end()));
  }
  if (axes.storage_modes && !token && !rope && s.storage == KvStorage::kContiguous && chance(rng, 0.2)) {
    const std::int64_t max_q = s.act_q ? *std::max_element(s.act_q->begin(), s.act_q->end()) : s.q_seq;
    const std::int64_t max_kv = s.act_kv ? *std::max_element(s.act_kv->begin(), s.act_kv->end()) : s.kv_seq;
    if (s.act_q && chance(rng, 0.7)) s.query_padding = chance(rng, 0.2) ? -1 : uniform(rng, 0, s.q_seq - max_q);
    if (s.act_kv && chance(rng, 0.7)) s.kv_padding = chance(rng, 0.2) ? -1 : uniform(rng, 0, s.kv_seq - max_kv);
  }
  const bool padding = s.query_padding || s.kv_padding;
  if (axes.storage_modes && !token && !rope && !padding && chance(rng, 0.2)) {
    s.prefix_seq = uniform(rng, 1, 40);
    if (chance(rng, 0.5)) s.prefix_len = uniform(rng, 0, s.prefix_seq);
  }

  // Visibility.
  const std::int64_t span = s.kv_seq + s.prefix_seq + 4;
  auto random_tokens = [&] { return chance(rng, 0.3) ? kIntMax : uniform(rng, -span, span); };
  const int mode_pick = static_cast<int>(rng() % 6);
  if (legacy) {
    if (mode_pick < 3) {
      s.mask = MaskKind::kFull;
      s.sparse_mode = pick<std::int64_t>(rng, {0, 1});
    }
    s.pre_tokens = random_tokens();  // ignored in legacy decode
    s.next_tokens = random_tokens();
  } else if (mode_pick == 1) {
    s.mask = MaskKind::kFull;
    s.pre_tokens = random_tokens();
    s.next_tokens = random_tokens();
  } else if (mode_pick == 2) {
    s.mask = MaskKind::kFull;
    s.sparse_mode = 1;
  } else if (mode_pick >= 3) {
    s.mask = MaskKind::kCompressed;
    s.sparse_mode = mode_pick - 1;  // 2, 3, 4
    if (s.sparse_mode == 4) {
      s.pre_tokens = random_tokens();
      s.next_tokens = random_tokens();
    }
  }
  if (s.mask == MaskKind::kFull) {
    s.mask_rank = static_cast<int>(uniform(rng, 2, 4));
    s.mask_batch_broadcast = chance(rng, 0.4);
    s.mask_density = pick(rng, {0.0, 0.2, 0.6, 1.0});
    s.mask_dtype = pick(rng, {DType::Bool, DType::I8, DType::U8});
  }
  s.pse = !token && chance(rng, 0.3);
  s.pse_batch_broadcast = chance(rng, 0.5);
  s.sink = chance(rng, 0.3);
  s.inner_precise = legacy ? uniform(rng, 0, 1) : uniform(rng, 0, 3);
  s.value_range = pick(rng, {1.0f, 3.0f});
  return s;
}

CallSpec storage_spec(std::mt19937_64& rng, KvStorage storage) {
  CallSpec s;
  s.layout = "BNSD";
  s.batch = 2 + static_cast<std::int64_t>(rng() % 3);
  s.num_kv_heads = 1 + static_cast<std::int64_t>(rng() % 2);
  s.num_heads = s.num_kv_heads * (1 + static_cast<std::int64_t>(rng() % 3));
  s.qk_dim = 16 << (rng() % 3);
  s.q_seq = rng() % 3 == 0 ? 1 : 1 + static_cast<std::int64_t>(rng() % 20);
  s.kv_seq = 1 + static_cast<std::int64_t>(rng() % 90);
  std::vector<std::int64_t> kv(s.batch);
  for (auto& v : kv) v = static_cast<std::int64_t>(rng() % (s.kv_seq + 1));
  s.act_kv = kv;
  s.storage = storage;
  s.block_size = 1 + static_cast<std::int64_t>(rng() % 20);
  s.paged_bnbsd = rng() % 2;
  s.lse = true;
  s.sink = rng() % 3 == 0;
  s.pse = rng() % 3 == 0;
  switch (rng() % 4) {
    case 0: break;
    case 1: s.mask = MaskKind::kFull; s.mask_rank = 4; s.sparse_mode = 1; break;
    case 2: s.mask = MaskKind::kCompressed; s.sparse_mode = s.q_seq > 1 ? 3 : 0; break;
    default:
      s.mask = MaskKind::kCompressed;
      s.sparse_mode = s.q_seq > 1 ? 4 : 0;
      s.pre_tokens = static_cast<std::int64_t>(rng() % 30);
      s.next_tokens = static_cast<std::int64_t>(rng() % 10) - 3;
      break;
  }
  if (s.mask == MaskKind::kCompressed && s.sparse_mode == 0) s.mask = MaskKind::kNone;
  return s;
}

CallSpec storage_spec(std::uint64_t seed, KvStorage storage) {
  std::mt19937_64 rng(seed);
  CallSpec s = storage_spec(rng, storage);
  s.dtype = seed % 2 ? DType::BF16 : DType::F16;
  return s;
}

}  // namespace fia::test
