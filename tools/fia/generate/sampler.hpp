// Choosing the next token from logits, as llama2.c's run.c does: greedy argmax at temperature 0,
// otherwise softmax(logits / temperature) with top-p (nucleus) sampling and run.c's xorshift RNG.
#pragma once

#include <cstdint>
#include <vector>

namespace fia::model {

/// run.c's sampler; one per sequence, so a sequence samples the same way alone or in a batch.
class Sampler {
 public:
  /// `temperature` 0 is greedy; `top_p` outside (0, 1) samples from the full distribution.
  Sampler(int vocab_size, float temperature, float top_p, std::uint64_t seed);

  /// The next token for `logits` (vocab_size floats; overwritten with probabilities when
  /// temperature > 0).
  int sample(float* logits);

  /// The index of the largest value, the first one on ties.
  static int argmax(const float* values, int n);

 private:
  float random_f32();

  int vocab_size_;
  float temperature_, top_p_;
  std::uint64_t state_;
  struct ProbIndex {
    float prob;
    int index;
  };
  std::vector<ProbIndex> candidates_;
};

}  // namespace fia::model
