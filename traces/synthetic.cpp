#include "traces/synthetic.h"

#include <algorithm>
#include <cmath>

namespace kvtier {

ParamList SyntheticAttention::params() {
  return {
      integer("sink_blocks", 1, "attention-sink blocks at the start of the sequence, always used"),
      integer("recent_blocks", 2, "newest blocks (local window), always used"),
      num("heavy_fraction", 0.15, "heavy-hitter blocks per layer as a fraction of the context's blocks", 0, 1),
      num("zipf_s", 1.1, "power-law exponent of heavy-hitter mass by rank", 0, 10),
      num("churn", 0.05, "probability per step and layer that one heavy hitter is replaced by a random block", 0, 1),
      num("sink_mass", 0.2, "share of attention mass on the sinks", 0, 1),
      num("recent_mass", 0.3, "share of attention mass on the recent window", 0, 1),
  };
}

SyntheticAttention::SyntheticAttention(json& p, const std::string& where, uint32_t layers, uint32_t context_tokens,
                                       uint32_t steps, uint32_t block_tokens, uint64_t seed)
    : rng_(seed) {
  check_trace_shape(where, layers, context_tokens, steps, block_tokens, 1);
  resolve_params(p, params(), where, {"kind"});
  sinks_ = static_cast<uint32_t>(get_int(p, "sink_blocks"));
  recent_ = static_cast<uint32_t>(get_int(p, "recent_blocks"));
  heavy_fraction_ = get_num(p, "heavy_fraction");
  zipf_s_ = get_num(p, "zipf_s");
  churn_ = get_num(p, "churn");
  sink_mass_ = get_num(p, "sink_mass");
  recent_mass_ = get_num(p, "recent_mass");
  if (sink_mass_ + recent_mass_ > 1.0) throw ConfigError(where + ": sink_mass + recent_mass must not exceed 1");
  header_.layers = layers;
  header_.steps = steps;
  header_.block_tokens = block_tokens;
  header_.context_tokens = context_tokens;
  header_.origin = p;
  header_.origin["generator"] = "kvtier synthetic";
  header_.origin["seed"] = seed;

  const uint32_t ctx_blocks = (context_tokens + block_tokens - 1) / block_tokens;
  const uint32_t n_heavy = std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(heavy_fraction_ * ctx_blocks)));
  double z = 0;
  for (uint32_t r = 0; r < n_heavy; ++r) z += std::pow(r + 1.0, -zipf_s_);
  const double heavy_mass = 1.0 - sink_mass_ - recent_mass_;
  for (uint32_t r = 0; r < n_heavy; ++r) zipf_weight_.push_back(heavy_mass * std::pow(r + 1.0, -zipf_s_) / z);
  heavy_.resize(layers);
  for (auto& h : heavy_) {
    h.resize(n_heavy);
    for (auto& b : h) b = below(ctx_blocks);  // duplicates are merged when a record is built
  }
  seen_.assign(header_.blocks_at(steps), 0);

  // The prompt's own attention, averaged over its queries: the sinks and the
  // heavy hitters draw the same shares as in decode (the heavy set is what
  // the prompt made heavy), while each query's local window covers its own
  // neighbourhood, so summed over every query the local share spreads evenly
  // over the prompt's blocks.
  header_.has_prompt = true;
  prompt_.assign(layers, std::vector<float>(ctx_blocks, 0.f));
  for (uint32_t l = 0; l < layers; ++l) {
    std::vector<double> m(ctx_blocks, recent_mass_ / ctx_blocks);
    const uint32_t s = std::min(sinks_, ctx_blocks);
    for (uint32_t b = 0; b < s; ++b) m[b] += sink_mass_ / s;
    if (s == 0)
      for (auto& x : m) x += sink_mass_ / ctx_blocks;
    for (size_t r = 0; r < heavy_[l].size(); ++r) m[heavy_[l][r]] += zipf_weight_[r];
    for (uint32_t b = 0; b < ctx_blocks; ++b) prompt_[l][b] = static_cast<float>(m[b]);
  }
}

double SyntheticAttention::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

bool SyntheticAttention::next(AttentionRecord& rec) {
  if (step_ >= header_.steps) return false;
  rec.step = step_;
  rec.layer = layer_;
  rec.blocks.clear();
  rec.mass.clear();
  const uint32_t n = header_.blocks_at(step_);
  auto& heavy = heavy_[layer_];
  if (uniform() < churn_) heavy[below(static_cast<uint32_t>(heavy.size()))] = below(n);
  ++stamp_;
  // A block in several groups (a sink that is also recent) gets the sum.
  auto add = [&](uint32_t b, double m) {
    if (seen_[b] == stamp_) {
      for (size_t i = 0; i < rec.blocks.size(); ++i)
        if (rec.blocks[i] == b) rec.mass[i] += static_cast<float>(m);
      return;
    }
    seen_[b] = stamp_;
    rec.blocks.push_back(b);
    rec.mass.push_back(static_cast<float>(m));
  };
  const uint32_t s = std::min(sinks_, n), w = std::min(recent_, n);
  for (uint32_t b = 0; b < s; ++b) add(b, sink_mass_ / s);
  for (uint32_t b = n - w; b < n; ++b) add(b, recent_mass_ / w);
  for (size_t r = 0; r < heavy.size(); ++r) add(heavy[r], zipf_weight_[r]);
  if (++layer_ == header_.layers) {
    layer_ = 0;
    ++step_;
  }
  return true;
}

}  // namespace kvtier
