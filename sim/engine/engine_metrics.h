// The metrics a run reports from what it counted (sim/core/counters.h):
// result.json's "metrics", whose names are the contract in docs/results.md.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/counters.h"
#include "sim/core/engine_setup.h"

namespace kvtier {

class KvStore;
class Platform;

// Per link: bytes, busy_fraction (some transfer active), utilization (bytes /
// (bandwidth x time)).
json link_metrics(Platform& platform, double end);
// Each link's busy seconds up to now, a transfer in progress included.
std::vector<double> link_busy_now(Platform& platform, double now);

// The KV store's counters, under the names both engines report them by:
// flat in a single-batch run's metrics, under "kv" in a serving run with
// its KV in tiers. `block_bytes`: one layer's block (kv_block_bytes).
json kv_counter_metrics(const EngineCounters& c, uint64_t block_bytes);

// The metrics of a run that ended at simulated time `end`.
json engine_metrics(const EngineSetup& s, EngineCounters& c, const KvStore& kv, Platform& platform, double end);

}  // namespace kvtier
