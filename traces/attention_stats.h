// Statistics of an attention trace (docs/traces.md), computed in one streaming
// pass: memory grows with layers x sequences x blocks, not with steps.
//   top_1/5/20pct   share of a record's mass in its top 1, 5 and 20% of the
//                   blocks that exist at that step (at least one block)
//   sink, window    share on the first sink_blocks / newest window_blocks
//   heavy_fraction  the record's heavy set, the fewest blocks that hold
//                   `coverage` of its mass, as a fraction of the blocks that
//                   exist (sparsity is 1 minus it)
//   reuse           share of a step's heavy set that was in the previous
//                   step's heavy set (same layer and sequence)
//   spans           runs of consecutive blocks in the heavy set: runs per
//                   record, mean run length, share of heavy blocks in runs of 2+
// Every figure is a mean over records, overall and per layer; the prompt
// records (when present) get top_*pct, sink and heavy_fraction too.
#pragma once

#include "traces/attention_trace.h"

namespace kvtier {

struct StatsOptions {
  uint32_t sink_blocks = 1;
  uint32_t window_blocks = 1;
  double coverage = 0.9;
};

json attention_stats(AttentionSource& src, const StatsOptions& opt = {});

// A fixed-width table of the figures of one or more stats objects side by side.
std::string stats_table(const std::vector<std::pair<std::string, json>>& columns);

}  // namespace kvtier
