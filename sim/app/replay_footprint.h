// What `kvtier replay` will hold, estimated before it reads its input and
// committed to the run's footprint (sim/core/footprint.h), so that a replay
// too large for the machine is refused up front, naming what drives it,
// instead of exhausting memory part way through its input.
//
// The input's shape at its end (requests, block references, distinct
// blocks) is extrapolated from its first requests: a synthetic source's
// `requests`, a trace file's size over the bytes per line of its first
// lines. Held in memory: the dense block stream (4 bytes per reference and
// 16 per request) unless --stream, the block id map (both ways) always, and
// each run's cache state per distinct block (measured on two small replay
// sessions of the run's own configuration): one run at a time in memory,
// every run at once with --stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/replay/replay.h"
#include "traces/request_trace.h"

namespace kvtier {

struct ReplayInputShape {
  double requests = 0, refs = 0, blocks = 0;
  std::string knob;  // the setting that drives the input's size
};

// The input's shape at its end, from its first requests (`open` gives a
// fresh source) and `total_requests` (0: unknown; then from the trace
// file's size).
ReplayInputShape estimate_replay_input(const std::function<std::unique_ptr<RequestSource>()>& open,
                                       const std::string& trace_path, double total_requests, const std::string& knob);

// Commits the block stream (not with `stream`), the dense index's ids and
// the id map; returns the map's bytes.
double commit_replay_input(const ReplayInputShape& shape, bool stream);

// Commits the cache state of `runs` over `blocks` distinct blocks: the
// largest run (one at a time) or all of them (`at_once`, --stream), less
// `released` (memory committed before and freed before the runs: the id
// map, in memory); `refs` for the next-reference times of a policy that
// needs the future.
void commit_replay_state(const std::vector<ReplayConfig>& runs, double blocks, double refs, bool at_once,
                         double released);

// --stack-distance: its Fenwick tree and histograms, 40 bytes per block.
void commit_stack_distances(double blocks);

}  // namespace kvtier
