// A seeded synthetic attention trace built from named patterns, each with its
// own parameters (docs/traces.md), so that a pattern measured on a real model
// (`kvtier trace fit`) can be generated at any context length, step count and
// layer count:
//   sinks       the first sink_blocks blocks take sink_mass;
//   window      the newest window_blocks blocks take window_mass;
//   heavy       heavy hitters, heavy_fraction of the context's blocks, whose
//               mass falls with rank as a power law (exponent zipf_s);
//   spans       heavy hitters come in runs of consecutive blocks of mean
//               length span_blocks (retrieval of a passage);
//   drift       each step a heavy span moves to a new place with probability
//               drift (the heavy set changes slowly over steps);
//   bursts      with probability burst_rate per step a distant span of
//               burst_blocks blocks takes burst_mass for burst_steps steps
//               (needle in a haystack);
//   background  background_mass spread evenly over every other block;
//   jitter      each listed block's mass varies from step to step by a
//               log-normal factor of log-standard-deviation jitter;
//   layers      sink_mass, window_mass, heavy_fraction, zipf_s and
//               background_mass are a number (every layer) or an array over
//               depth, first layer to last, interpolated linearly to the
//               trace's layer count (early layers broad, later sparse);
//   sequences   with sequences > 1 every sequence draws its own pattern.
#pragma once

#include <cstdint>
#include <vector>

#include "traces/attention_trace.h"

namespace kvtier {

class PatternAttention : public AttentionSource {
 public:
  static ParamList params();
  // `p` is validated against params() in place (keys "kind" and annotations pass).
  PatternAttention(json& p, const std::string& where, uint32_t layers, uint32_t context_tokens, uint32_t steps,
                   uint32_t block_tokens, uint32_t sequences, uint64_t seed);
  // Bytes the generator holds at this shape, from its parameters (`p` as
  // given; resolved on a copy): each (layer, sequence)'s heavy spans (twice:
  // as placed and as drifted; geometric lengths of mean span_blocks, a half
  // more of them counted), one step's dense record and one prompt.
  static double state_bytes(const json& p, const std::string& where, uint32_t layers, uint32_t context_tokens,
                            uint32_t steps, uint32_t block_tokens, uint32_t sequences);
  const AttentionHeader& header() const override { return header_; }
  bool next(AttentionRecord& rec) override;
  const std::vector<float>* prompt(uint32_t seq, uint32_t layer) const override;

  // A per-layer parameter's value at `layer` of `layers` (number, or array over depth).
  static double at_depth(const json& v, uint32_t layer, uint32_t layers);

 private:
  struct Span {
    uint32_t start, len;
  };
  struct Lane {  // one (layer, sequence)
    uint64_t rng;
    std::vector<Span> spans;  // heavy spans, most important first
    std::vector<Span> prompt_spans;  // as placed in the prompt, before any drift
    uint32_t burst_start = 0, burst_left = 0;
  };
  struct LayerShape {
    double sink_mass, window_mass, heavy_fraction, zipf_s, background_mass, recent_mass, recent_decay;
  };
  double uniform(Lane& l);
  uint32_t below(Lane& l, uint32_t n) { return static_cast<uint32_t>(uniform(l) * n); }
  uint32_t span_length(Lane& l);
  Span place(Lane& l, uint32_t len, uint32_t lo, uint32_t hi);
  void fill(Lane& lane, const LayerShape& s, uint32_t n, bool prompt, std::vector<double>& m) const;

  AttentionHeader header_;
  uint32_t sinks_, window_, recent_, burst_blocks_, burst_steps_;
  double span_blocks_, drift_, burst_rate_, burst_mass_, jitter_;
  std::vector<LayerShape> shape_;
  std::vector<Lane> lanes_;                 // [layer * sequences + seq]
  // The prompt a call of prompt() computed: one at a time, since all of
  // them (layers x sequences x prompt blocks) may be terabytes at the
  // documented maxima.
  mutable std::vector<double> prompt_m_;
  mutable std::vector<float> prompt_;
  uint32_t ctx_blocks_ = 0;
  std::vector<double> dense_;
  uint32_t step_ = 0, layer_ = 0, seq_ = 0;
};

}  // namespace kvtier
