// Fits the patterns generator (traces/synthetic_patterns.h) to a trace, in one
// streaming pass, so that a pattern measured on a real model can be generated
// at any context length, step count and layer count (docs/traces.md).
// Per layer: sink_mass and window_mass are the mean shares on the first
// sink_blocks and newest window_blocks; of the other blocks, the heavy set is
// the fewest that hold `coverage` of their mass, leaving out blocks with less
// than heavy_ratio times the median block's mass (a flat background is no
// heavy hitter), heavy_fraction its size over the context's blocks, background_mass the mass outside it, and zipf_s the
// least-squares slope of log mass over log rank within it. Over all layers:
// span_blocks is the mean run of consecutive heavy blocks; drift is one
// minus the share of a step's heavy set kept from the previous step (with
// jitter, the drift whose generated trace keeps that share, by bisection;
// with match_stats, span_blocks and drift both reproduce those statistics);
// jitter the spread of a heavy block's log mass from one step to the next
// (from the median absolute log-ratio, robust to spans that move). A burst
// is a run of 2+ heavy blocks, none of them or their neighbours heavy at the
// previous step, whose blocks each hold more than the mean persisting heavy
// block: burst_rate is their number per (step, layer, sequence) without a burst under way,
// burst_blocks their mean length, burst_mass their mean share and
// burst_steps how long their first block stays heavy. With a recency
// profile (a pass of its own, recency_profile()): the recent blocks are the
// distances before the window whose mean share, in some layer, stays above
// heavy_ratio times the mean block's between the sinks and the window (as a
// heavy hitter stands out from the median block); recent_mass is their share per layer
// and recent_decay the geometric ratio with the profile's mass-weighted mean
// distance; the heavy set is then measured on the blocks before them.
#pragma once

#include <vector>

#include "traces/attention_trace.h"

namespace kvtier {

// Per layer, the mean share of a decode record's mass at distance d = 1..max
// before the local window (share[layer][d - 1]), and the mean share of a
// block between the sinks and the window (block[layer]).
struct RecencyProfile {
  std::vector<std::vector<double>> share;
  std::vector<double> block;
};
RecencyProfile recency_profile(AttentionSource& src, uint32_t sink_blocks, uint32_t window_blocks,
                               uint32_t max_distance = 32);

struct AttentionFitOptions {
  uint32_t sink_blocks = 1;
  uint32_t window_blocks = 1;
  double coverage = 0.9;
  double heavy_ratio = 2.0;
  // When given: attention_stats() of the same trace with these sink_blocks,
  // window_blocks and coverage; span_blocks and drift are then set by
  // simulation to reproduce its mean_span_blocks and reuse.
  const json* match_stats = nullptr;
  // When given: the recency pattern is fitted from it (see above).
  const RecencyProfile* recency = nullptr;
};

// The "patterns" parameters (with "kind": "patterns") that reproduce `src`.
json fit_patterns(AttentionSource& src, const AttentionFitOptions& opt = {}, const std::string& name = "");

}  // namespace kvtier
