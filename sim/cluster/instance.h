// One model instance of a cluster as the cluster engine keeps it (private
// to sim/cluster/): where it runs, its role, its serving engines (one, or
// with pipeline parallelism one per micro-batch) and the requests it was
// handed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/platform/pipeline_stages.h"
#include "sim/serving/serving.h"

namespace kvtier {

struct ClusterSimulation::Instance {
  json cfg;  // this instance's configuration: its GPU and tiers in hardware
  std::string gpu;
  size_t gpu_dev = 0;
  // Its ranks' GPUs, stage after stage (pipeline parallelism), each stage's
  // tensor-parallel ranks in order; the first is gpu_dev.
  std::vector<size_t> gpus;
  std::vector<std::vector<size_t>> rank_tiers;  // per rank: its tier devices
  std::string role = "both";  // or "prefill", "decode"
  // Its engines: one, or with pipeline parallelism one per micro-batch
  // (vLLM's virtual engines: each its own scheduler, share of the KV pool
  // and prefix cache), all running on `stages`.
  std::unique_ptr<ServingSimulation> sim;
  std::vector<std::unique_ptr<ServingSimulation>> more;  // virtual engines 1..pp-1
  std::vector<std::unique_ptr<json>> more_cfg;           // and their configurations (each engine resolves its own)
  std::vector<PipelineStages::Stage> stage_plan;          // pipeline parallelism: each stage's GPUs and layers
  std::unique_ptr<PipelineStages> stages;
  std::vector<std::vector<uint32_t>> global;  // per engine, per request it was handed: its index in the stream
  size_t engines() const { return 1 + more.size(); }
  ServingSimulation& engine(size_t v) { return v == 0 ? *sim : *more[v - 1]; }
  const ServingSimulation& engine(size_t v) const { return v == 0 ? *sim : *more[v - 1]; }
  uint64_t outstanding_tokens() const {
    uint64_t t = 0;
    for (size_t v = 0; v < engines(); ++v) t += engine(v).outstanding_tokens();
    return t;
  }
  uint64_t unfinished() const {
    uint64_t u = 0;
    for (size_t v = 0; v < engines(); ++v) u += engine(v).unfinished();
    return u;
  }
  // The engine a new request goes to: the one with the fewest unfinished
  // requests, the first among equals (vLLM's add_request over its virtual
  // engines' schedulers).
  size_t least_busy_engine() const {
    size_t best = 0;
    for (size_t v = 1; v < engines(); ++v)
      if (engine(v).unfinished() < engine(best).unfinished()) best = v;
    return best;
  }
};

}  // namespace kvtier
