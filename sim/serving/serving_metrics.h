// What a serving run reports: per request (queueing delay, TTFT, TPOT, end
// to end, tokens, prefix-cache hits per tier, preemptions) and their
// distributions (mean, P50, P90, P99), throughput and goodput under the
// configured SLOs. Names are the contract in docs/results.md.
#pragma once

#include <string>
#include <vector>

#include "models/param.h"
#include "sim/serving/scheduler.h"

namespace kvtier {

struct ServingTotals {
  double end_s = 0, gpu_busy_s = 0;
  uint64_t iterations = 0, layered_iterations = 0;
  uint64_t preemptions = 0, swapped_out = 0, swapped_in = 0, recomputed = 0;
  double slo_ttft_s = 0, slo_tpot_s = 0;  // 0: no limit
};

// mean, p50, p90, p99 (nearest rank) of v.
json distribution(std::vector<double> v);

json serving_metrics(const std::vector<ServingRequest>& reqs, const ServingTotals& tot);

// requests.csv: a header and one line per request; `tiers` names the cache tiers.
// `gpu`: the GPU tier's name where it keeps a prefix cache of its own (a
// last column of its hits), else empty.
std::string serving_requests_csv(const std::vector<ServingRequest>& reqs, const std::vector<std::string>& tiers,
                                 const std::string& gpu = std::string());

}  // namespace kvtier
