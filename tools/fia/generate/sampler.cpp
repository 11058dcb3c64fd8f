#include "generate/sampler.hpp"

#include <cmath>
#include <cstdlib>

namespace fia::model {

namespace {

void softmax(float* x, int size) {
  float max_val = x[0];
  for (int i = 1; i < size; ++i)
    if (x[i] > max_val) max_val = x[i];
  float sum = 0.0f;
  for (int i = 0; i < size; ++i) {
    x[i] = std::exp(x[i] - max_val);
    sum += x[i];
  }
  for (int i = 0; i < size; ++i) x[i] /= sum;
}

}  // namespace

Sampler::Sampler(int vocab_size, float temperature, float top_p, std::uint64_t seed)
    : vocab_size_(vocab_size), temperature_(temperature), top_p_(top_p), state_(seed), candidates_(vocab_size) {}

int Sampler::argmax(const float* values, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (values[i] > values[best]) best = i;
  return best;
}

float Sampler::random_f32() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  const auto u32 = static_cast<std::uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
  return static_cast<float>(u32 >> 8) / 16777216.0f;
}

int Sampler::sample(float* logits) {
  if (temperature_ == 0.0f) return argmax(logits, vocab_size_);
  for (int i = 0; i < vocab_size_; ++i) logits[i] /= temperature_;
  softmax(logits, vocab_size_);
  const float coin = random_f32();
  if (top_p_ <= 0.0f || top_p_ >= 1.0f) {
    float cdf = 0.0f;
    for (int i = 0; i < vocab_size_; ++i) {
      cdf += logits[i];
      if (coin < cdf) return i;
    }
    return vocab_size_ - 1;
  }
  // Nucleus: the smallest set of most likely tokens whose probability exceeds top_p. Tokens below
  // (1 - top_p) / (n - 1) cannot be in it and are dropped before sorting.
  const float cutoff = (1.0f - top_p_) / static_cast<float>(vocab_size_ - 1);
  int n0 = 0;
  for (int i = 0; i < vocab_size_; ++i)
    if (logits[i] >= cutoff) candidates_[n0++] = {logits[i], i};
  // qsort with run.c's comparator, so that ties come out in the same order as there.
  std::qsort(candidates_.data(), n0, sizeof(ProbIndex), [](const void* a, const void* b) {
    const float pa = static_cast<const ProbIndex*>(a)->prob, pb = static_cast<const ProbIndex*>(b)->prob;
    return pa > pb ? -1 : (pa < pb ? 1 : 0);
  });
  float cumulative = 0.0f;
  int last = n0 - 1;
  for (int i = 0; i < n0; ++i) {
    cumulative += candidates_[i].prob;
    if (cumulative > top_p_) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  for (int i = 0; i <= last; ++i) {
    cdf += candidates_[i].prob;
    if (r < cdf) return candidates_[i].index;
  }
  return candidates_[last].index;
}

}  // namespace fia::model
