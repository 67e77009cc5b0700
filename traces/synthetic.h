// A seeded synthetic attention trace with the structure measured in real
// models: attention sinks (the first blocks), a local window (the newest
// blocks), and heavy hitters whose mass follows a power law (H2O, Zhang et
// al. 2023); heavy-hitter sets differ per layer and drift over steps
// (retrieval bursts replace a heavy hitter with a random older block).
#pragma once

#include <random>

#include "traces/attention_trace.h"

namespace kvtier {

class SyntheticAttention : public AttentionSource {
 public:
  static ParamList params();
  // `p` is validated against params() in place. Shape from the arguments.
  SyntheticAttention(json& p, const std::string& where, uint32_t layers, uint32_t context_tokens, uint32_t steps,
                     uint32_t block_tokens, uint64_t seed);
  const AttentionHeader& header() const override { return header_; }
  bool next(AttentionRecord& rec) override;
  const std::vector<float>* prompt(uint32_t seq, uint32_t layer) const override {
    (void)seq;
    return layer < prompt_.size() ? &prompt_[layer] : nullptr;
  }

 private:
  double uniform();  // [0, 1), the same on every platform
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(uniform() * n); }

  AttentionHeader header_;
  uint32_t sinks_, recent_;
  double heavy_fraction_, zipf_s_, churn_, sink_mass_, recent_mass_;
  std::mt19937_64 rng_;
  std::vector<std::vector<uint32_t>> heavy_;  // per layer: block indices, most important first
  std::vector<double> zipf_weight_;           // per rank, normalised to heavy mass
  std::vector<std::vector<float>> prompt_;    // per layer: the prompt's attention per prompt block
  std::vector<uint32_t> seen_;
  uint32_t stamp_ = 0;
  uint32_t step_ = 0, layer_ = 0;
};

}  // namespace kvtier
