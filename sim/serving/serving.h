// The serving engine: a stream of requests through one GPU's paged KV pool
// and a tiered prefix cache, iteration by iteration, on SimGrid.
//
// Requests arrive at their trace times (scaled by `time_scale`); the
// scheduler (sim/serving/scheduler.h) forms each iteration's batch by continuous
// batching and preempts by swap or recompute. A newly admitted prompt's
// blocks found in the prefix cache (the hardware's tiers below the GPU:
// DRAM, CXL, SSD, SmartSSD, each with its eviction policy, as `kvtier
// replay` runs them) are loaded into the GPU layer by layer, overlapped with
// that iteration's compute (CachedAttention's layer-wise preload); the rest
// is computed. New prompt blocks are written down to the cache when their
// prefill completes (write-through) or when the request leaves the GPU
// (on_finish); blocks the cache demotes move down between its tiers. Every
// move is a transfer on the same streams and links as the decode engine's.
//
// Iterations with nothing to load run as one kernel for all layers (their
// layers cannot overlap anything); others run layer by layer, each layer
// waiting for its loads. Both give the same times for the same work
// (`coarsen: false` runs every iteration layer by layer, to check it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/engine/engine_metrics.h"
#include "sim/core/engine_setup.h"
#include "sim/serving/scheduler.h"
#include "sim/platform/streams.h"

namespace kvtier {

class Platform;
class JobBoard;
class Timeline;
class TransferPlanner;
class ReplaySession;
class GpuPrefixCache;
class KvStore;
class LayerPipeline;
class AttentionSource;
struct ReplayConfig;

ParamList serving_params();

class ServingSimulation {
 public:
  explicit ServingSimulation(json& cfg);  // validates everything; cfg is resolved in place
  ~ServingSimulation();
  json run(const std::string& timeline_path);
  // One line per request (requests.csv beside result.json).
  std::string requests_csv() const;

 private:
  void drive();
  uint32_t lookup(ServingRequest& r);
  void iteration(const IterationPlan& p, uint64_t index, bool more_after);
  void bind_policies();
  void bind_kv_policies();
  void build_kv_store();
  void tiered_iteration(const IterationPlan& p, uint64_t index, bool more_after);
  AttentionSource* attention_of(const ServingRequest& r);
  double weight_bytes_in(size_t dev) const;  // weights (policies.weights) a device below the GPU holds
  void write_down(ServingRequest& r);
  void submit_cache_moves();
  // One layer's kernel; `read`: per item, the tokens of KV its attention reads (default: all its pages).
  double layer_kernel_s(const IterationPlan& p, const std::vector<uint64_t>* read = nullptr) const;
  void sample_occupancy();
  void record_write(size_t dev, double bytes);
  void free_to_gpu_cache(const ServingRequest& r);
  void check_iteration(double now);

  json& cfg_;
  EngineSetup s_;
  EngineCounters c_;
  SchedulerLimits limits_;
  std::vector<ServingRequest> reqs_;
  std::string source_name_;
  uint32_t prefix_bt_ = 0;         // tokens per prefix-cache block (the trace's hash blocks)
  uint64_t distinct_blocks_ = 0;
  std::unique_ptr<GpuPrefixCache> gpu_cache_;  // prefix_cache.gpu: freed prompt blocks kept in the pool
  bool cache_on_ = false, write_through_ = true, inclusive_ = false, coarsen_ = true, match_any_ = false;
  bool tiered_ = false;  // serving.kv "tiered": running KV in the block table over every tier
  json attention_cfg_;   // serving.attention ({}: none)
  uint64_t seed_ = 0;
  std::vector<std::unique_ptr<AttentionSource>> attention_;  // per request, while it runs
  double slo_ttft_s_ = 0, slo_tpot_s_ = 0;
  int swap_dev_ = -1;              // the host memory that holds swapped-out sequences
  std::vector<size_t> cache_dev_;  // per cache tier: its device
  std::unique_ptr<ReplayConfig> cache_cfg_;
  std::unique_ptr<ReplaySession> cache_;
  std::vector<uint64_t> inserted_seen_;  // per cache tier: inserts already turned into transfers

  // Run state.
  std::unique_ptr<Platform> platform_;
  std::unique_ptr<JobBoard> board_;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<TransferPlanner> planner_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<KvStore> kv_;              // serving.kv "tiered"
  std::unique_ptr<LayerPipeline> pipeline_;  // serving.kv "tiered"
  uint32_t gpu_track_ = 0;
  std::vector<uint32_t> occ_track_;
  uint64_t iterations_ = 0, layered_iterations_ = 0;
  uint64_t swapped_out_ = 0, swapped_in_ = 0, recomputed_ = 0;
  double cache_write_bytes_ = 0, cache_load_bytes_ = 0, swap_bytes_ = 0;
  std::vector<double> occ_area_;   // per tier (GPU first): bytes x seconds, for the time-averaged occupancy
  std::vector<double> occ_peak_;
  double occ_t_ = 0;
  std::vector<double> occ_now_;
  JobId last_write_ = kNoJob;
  double last_check_t_ = 0;      // loads of blocks still being written wait for the write
};

}  // namespace kvtier
