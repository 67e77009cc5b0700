// What a serving run reports: per request (queueing delay, TTFT, TPOT, end
// to end, finish time, SLOs met, tokens, prefix-cache hits per tier,
// preemptions), per iteration (batch, tokens, queues, KV per tier) and their
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
  // Another engine's counts added to these (instances or virtual engines
  // together); the SLOs are the same setting for all, taken as they are.
  // The end and the GPU's busy time are the caller's to combine.
  void add_counts(const ServingTotals& o) {
    iterations += o.iterations;
    layered_iterations += o.layered_iterations;
    preemptions += o.preemptions;
    swapped_out += o.swapped_out;
    swapped_in += o.swapped_in;
    recomputed += o.recomputed;
    slo_ttft_s = o.slo_ttft_s;
    slo_tpot_s = o.slo_tpot_s;
  }
};

// The configured SLOs (0: no limit) and whether a finished request met them.
struct ServingSlo {
  double ttft_s = 0, tpot_s = 0;
  bool ttft_met(const ServingRequest& r) const;
  bool tpot_met(const ServingRequest& r) const;  // a request of one output token has no TPOT: met
};

// One scheduler iteration as iterations.csv reports it: when it ran, what it
// computed, the queues once it was planned, and each tier's KV after it.
struct IterationRow {
  double start_s = 0, end_s = 0;
  uint32_t batch = 0;                 // requests in the iteration
  uint64_t prefill_tokens = 0, decode_tokens = 0;
  uint32_t running = 0, waiting = 0, swapped = 0;
  std::vector<double> tier_bytes;     // per tier of hardware.tiers, GPU first
};

// mean, p50, p90, p99 (nearest rank) of v.
json distribution(std::vector<double> v);

json serving_metrics(const std::vector<ServingRequest>& reqs, const ServingTotals& tot);

// requests.csv: a header and one line per request; `tiers` names the cache tiers.
// `gpu`: the GPU tier's name where it keeps a prefix cache of its own (a
// last column of its hits), else empty.
// Each row also has the request's finish time and whether it met `slo`.
std::string serving_requests_csv(const std::vector<ServingRequest>& reqs, const ServingSlo& slo,
                                 const std::vector<std::string>& tiers, const std::string& gpu = std::string());

// iterations.csv: a header and one line per iteration; `tiers` names every
// tier of hardware.tiers (the KV-held columns).
std::string serving_iterations_csv(const std::vector<IterationRow>& rows, const std::vector<std::string>& tiers);

}  // namespace kvtier
