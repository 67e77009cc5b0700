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
// The driver plans; the engine runs: an iteration of the paged pool through
// sim/engine/paged_pipeline.h, one of KV in tiers (serving.kv "tiered")
// through the layer pipeline (sim/engine/layer_pipeline.h). The prefix cache
// is sim/serving/prefix_cache.h, the request stream sim/serving/requests.h.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/counters.h"
#include "sim/core/engine_setup.h"
#include "sim/core/validation_cache.h"
#include "sim/serving/scheduler.h"
#include "sim/serving/serving_metrics.h"

namespace kvtier {

class Platform;
class JobBoard;
class Timeline;
class TransferPlanner;
class KvStore;
class LayerPipeline;
class PagedPipeline;
class PipelineStages;
class PrefixCache;
class InvariantChecker;
class AttentionSource;
class Wakeup;
struct KvPush;
struct RequestStream;

ParamList serving_params();

class ServingSimulation {
 public:
  // Validates everything; cfg is resolved in place. With `validating`, as
  // Simulation's (sim/engine/engine.h): validation only, hardware given parsed.
  explicit ServingSimulation(json& cfg, ValidationCache* validating = nullptr,
                             std::shared_ptr<const ParsedHardware> hardware = nullptr);
  // A model instance of a cluster (sim/cluster/): its requests come one by
  // one from the cluster's router (accept) out of `stream`, whose prefix
  // blocks and request checks it takes; the platform and the timeline are
  // the cluster's (attach). cfg's hardware names this instance's GPU and tiers.
  ServingSimulation(json& cfg, const RequestStream& stream, std::shared_ptr<const ParsedHardware> hardware);
  ~ServingSimulation();
  json run(const std::string& timeline_path);

  // As a cluster's instance. Before SimGrid runs: this instance's engines on
  // the shared platform, its tracks named after its GPU.
  void attach(Platform& platform, Timeline& timeline);
  // The instance's actor body: serves what it is handed until close() and done.
  void serve();
  // The router hands over a request at its arrival (its id is replaced by
  // this instance's own); close(): no more will come.
  void accept(ServingRequest r);
  // A request another instance prefilled (disaggregated prefill and decode):
  // its first token is out; its prompt's KV is pulled from device `from`
  // when this instance admits it, and its first token reaches the user
  // once the KV is in (TTFT includes the transfer).
  void accept_prefilled(ServingRequest r, size_t from);
  // Layer-wise KV streaming (cluster.kv_transfer "layerwise"), the decode
  // side: a request another instance is prefilling now, whose KV `push`
  // streams here. Its blocks are reserved when this instance's scheduler
  // has room (on_reserved then, with its id here); kv_in() once the last
  // layer has landed: its first token is out then (TTFT: the later of the
  // prefill's first token and the KV's arrival), and it decodes.
  void accept_streamed(ServingRequest r);
  void on_reserved(std::function<void(uint32_t)> hook) { on_reserved_ = std::move(hook); }
  void kv_in(uint32_t id, double first_token_s);
  // The prefill side: request `id`'s KV streams as `push` says; the pipeline
  // sends each layer as it is computed while push.room holds, and the
  // request's blocks stay held after it finishes until release_kv(id).
  void stream_kv(uint32_t id, KvPush* push);
  // The receiver has room now: the layers computed so far go in one
  // transfer (the rest as they are computed).
  void push_computed(KvPush& push);
  // Calls `then` the moment push's last transfer has landed.
  void when_pushed(const KvPush& push, std::function<void()> then);
  void release_kv(uint32_t id);
  // Before attach: the GPUs this instance pushes KV to (a stream to each).
  void pushes_to(const std::vector<size_t>& devices) { push_devices_ = devices; }
  // Called with a request's id here when it is first scheduled (the
  // cluster picks its decode instance then).
  void on_schedule(std::function<void(uint32_t)> hook) { on_schedule_ = std::move(hook); }
  // Before attach: a tensor-parallel instance (sim/core/engine_setup.h's
  // tp_*): its ranks' GPUs, the all-reduce bytes per token, through a
  // switch or a ring, and each device's part on ranks 1..T-1 for its copies.
  void tensor_parallel(std::vector<size_t> gpus, double allreduce_bytes_per_token, bool through_switch,
                       std::vector<std::vector<size_t>> rank_devices);
  // Before attach: one micro-batch of a pipeline-parallel instance (vLLM's
  // virtual engine): its iterations run through `stages`, which the
  // instance's other micro-batches share; the model in cfg is one stage's
  // share of the layers, and tensor_parallel's rank_devices list every
  // stage's ranks, so each stage's GPUs make their share of every copy.
  void pipeline_stages(PipelineStages* stages) { stages_ = stages; }
  // Before attach: nothing but this instance's all-reduces crosses their
  // links (the cluster engine checks), so they run as closed forms.
  void allreduce_alone(bool alone) { s_.tp_alone = alone; }
  // Before attach: its ranks' copies may run as one folded flow each
  // (TransferPlanner::fold_ranks).
  void fold_ranks(bool on) { fold_ranks_ = on; }
  // Before attach: the devices prefilled KV may be pulled from (each gets a stream to this GPU).
  void pulls_from(const std::vector<size_t>& devices) { pull_devices_ = devices; }
  // Before attach: a KV pool's member (sim/serving/kv_pool.h): the device
  // pairs its prefix cache copies between besides its own tiers (other
  // members' shares), and the drives among them with the tier they stand for.
  void pool_streams(std::vector<std::pair<size_t, size_t>> pairs, std::vector<std::pair<size_t, size_t>> drives) {
    pool_pairs_ = std::move(pairs);
    pool_drives_ = std::move(drives);
    pooled_ = true;
  }
  PrefixCache& prefix_cache() { return *cache_; }
  // Called with a request's id here when it finishes (a prefill instance's
  // hand-over to a decode instance, at once, in this instance's actor).
  void on_finish(std::function<void(uint32_t)> hook) { on_finish_ = std::move(hook); }
  void close();
  // After the router's hand-overs of one moment: the instance looks at what
  // it was handed (a wake-up is a scheduling point of SimGrid's, so the
  // requests of one moment are all handed over before it).
  void wake();
  // For routing: the prompt and output tokens of the requests it was handed
  // that have not finished, and the prompt tokens of `r` its prefix cache
  // holds now.
  uint64_t outstanding_tokens() const { return outstanding_tokens_; }
  uint64_t unfinished() const { return unfinished_; }
  // The arriving prompt's tokens a router weighs (PrefixCache::routing_tokens).
  uint32_t cached_prefix_tokens(const ServingRequest& r) const;
  // For routing by estimated first token: one layer's kernel for a lone
  // prefill of `tokens` after `cached` tokens already in place; the same for
  // the prompts handed here whose prefill has not completed, summed (each as
  // if alone and uncached: the estimate a router can make at arrival); and
  // where the prefix cache would read r's cached tokens from
  // (PrefixCache::hit_sources, with the bytes of a token of a layer).
  double prefill_layer_s(uint32_t cached, uint32_t tokens) const;
  // The same prompt's embedding and LM head, once per pass (model.vocab_size).
  double prefill_ends_s(uint32_t cached, uint32_t tokens) const;
  double queued_prefill_layer_s() const { return queued_prefill_layer_s_ > 0 ? queued_prefill_layer_s_ : 0.0; }
  // Their embeddings and LM heads (prefill_ends_s), once each.
  double queued_prefill_ends_s() const { return queued_prefill_ends_s_ > 0 ? queued_prefill_ends_s_ : 0.0; }
  uint32_t prefix_hit_sources(const ServingRequest& r, std::vector<std::pair<size_t, uint32_t>>& from) const;
  double prefix_load_bytes_per_token_layer() const;
  // One layer's load of `bytes` a rank from device `dev` on an otherwise
  // idle platform, every rank reading its share at once.
  double prefix_load_layer_s(size_t dev, double bytes) const;
  size_t queued() const;
  // After the run: this instance's metrics, without the platform's links and
  // energy (the cluster reports those once).
  json instance_metrics(double end);
  // The run's counts (iterations, preemptions, GPU busy time) at `end`.
  ServingTotals totals(double end) const;
  const std::vector<ServingRequest>& requests() const { return reqs_; }
  const std::vector<std::string>& tier_names() const { return s_.hw.tiers; }
  bool gpu_prefix_cache() const;
  const EngineSetup& setup() const { return s_; }
  const EngineCounters& counters() const { return c_; }
  // One line per request (requests.csv beside result.json).
  std::string requests_csv() const;
  // One line per iteration (iterations.csv, with sim.step_csv).
  std::string iterations_csv() const;

 private:
  void accept_prefilled_elsewhere(ServingRequest r);
  void init(ValidationCache* validating, std::shared_ptr<const ParsedHardware> hardware, const RequestStream* stream);
  void read_limits(const json& sv);
  void configure_attention(json& sv);
  void configure_gpu();
  double configure_swap(const json& sv);  // the swap space's bytes
  void configure_prefix_cache(json& pc, double swap_bytes, uint32_t prefix_block_tokens, uint64_t distinct_blocks);
  void drive();
  // Blocks until a request may have arrived: the next of the stream's
  // arrivals, or the router's next hand-over.
  void wait_for_arrival(size_t next);
  void attach_engines(bool own_links);
  void start_pipelines();
  void iteration(const IterationPlan& p, uint64_t index, bool more_after);
  void paged_iteration(const IterationPlan& p, uint64_t index, bool more_after);
  void tiered_iteration(const IterationPlan& p, uint64_t index, bool more_after);
  void check_whole_model_blocks() const;
  void after_iteration(const IterationPlan& p, uint64_t& done);
  IterationRow planned_row(const IterationPlan& p, double start) const;
  void bind_policies();
  void bind_kv_policies();
  void build_kv_store(ValidationCache* validating);
  uint32_t kv_slots() const;
  // serving.kv "tiered": the block-table sequence request `id` keeps its KV in.
  uint32_t take_slot(uint32_t id);
  void give_back_slot(uint32_t id);
  void start_engines(const std::string& timeline_path);
  AttentionSource* attention_of(const ServingRequest& r);
  double weight_bytes_in(size_t dev) const;  // weights (policies.weights) a device below the GPU holds
  void sample_occupancy();
  void check_iteration(double now);
  void check_end() const;
  json metrics(double end) const;
  json tier_metrics(double end, const json& prefix_cache) const;

  json& cfg_;
  EngineSetup s_;
  EngineCounters c_;
  SchedulerLimits limits_;
  std::vector<ServingRequest> reqs_;
  std::string source_name_;
  std::unique_ptr<PrefixCache> cache_;  // the tiers below the GPU and the GPU's pool keeping prompt blocks
  bool coarsen_ = true;
  bool tiered_ = false;  // serving.kv "tiered": running KV in the block table over every tier
  double cache_share_ = 0;  // serving.kv "tiered": the prefix cache's share of each tier below the GPU (0: no cache)
  std::vector<std::vector<uint32_t>> cached_tokens_;  // per item of the iteration: tokens loaded from each cache tier
  json attention_cfg_;   // serving.attention ({}: none)
  uint64_t seed_ = 0;
  std::vector<std::unique_ptr<AttentionSource>> attention_;  // per request, while it runs
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  std::vector<uint32_t> slot_of_;     // per request: its block-table sequence while it holds KV
  std::vector<uint32_t> free_slots_;  // block-table sequences no request holds (a min-heap)
  double slo_ttft_s_ = 0, slo_tpot_s_ = 0;
  int swap_dev_ = -1;              // the host memory that holds swapped-out sequences

  // Run state. The platform and timeline are the run's own, or the
  // cluster's (owned_* empty).
  std::unique_ptr<Platform> owned_platform_;
  std::unique_ptr<Timeline> owned_timeline_;
  Platform* platform_ = nullptr;
  Timeline* timeline_ = nullptr;
  std::unique_ptr<JobBoard> board_;
  // A cluster's instance: fed by its router.
  bool fed_ = false, closed_ = false;
  std::unique_ptr<Wakeup> wakeup_;
  uint64_t outstanding_tokens_ = 0, unfinished_ = 0;
  // Fed: the prefill layer-seconds of handed prompts not yet prefilled and
  // the seconds of their embeddings and heads, and each one's share.
  double queued_prefill_layer_s_ = 0, queued_prefill_ends_s_ = 0;
  struct QueuedPrefill {
    double layer_s = 0, ends_s = 0;
  };
  std::vector<QueuedPrefill> queued_of_;
  std::vector<size_t> pull_devices_;
  std::vector<std::pair<size_t, size_t>> pool_pairs_, pool_drives_;
  bool pooled_ = false;
  bool fold_ranks_ = false;
  std::vector<std::vector<size_t>> rank_devices_;  // tensor parallelism: each device's part on the other ranks
  PipelineStages* stages_ = nullptr;               // pipeline parallelism: the instance's stages
  // GPUs that each make their share of every copy (tensor and pipeline ranks).
  double ranks() const {
    return rank_devices_.empty() ? double(std::max<size_t>(s_.tp_gpus.size(), 1)) : double(rank_devices_[s_.gpu_dev].size() + 1);
  }
  std::vector<int32_t> pull_from_;  // per request: the device its prefilled KV is pulled from (-1: none)
  std::vector<size_t> push_devices_;
  std::vector<KvPush*> push_of_;     // prefill side, per request: its KV's layer-wise push (null: none)
  std::vector<uint8_t> streamed_in_;  // decode side, per request: its KV streams in (accept_streamed)
  std::function<void(uint32_t)> on_finish_, on_schedule_, on_reserved_;
  std::unique_ptr<TransferPlanner> planner_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<KvStore> kv_;              // serving.kv "tiered"
  std::unique_ptr<LayerPipeline> pipeline_;  // serving.kv "tiered"
  std::unique_ptr<PagedPipeline> paged_;     // serving.kv "paged"
  std::unique_ptr<InvariantChecker> checker_;
  uint32_t gpu_track_ = 0;
  std::vector<uint32_t> occ_track_;
  uint64_t iterations_ = 0, layered_iterations_ = 0;
  uint64_t swapped_out_ = 0, swapped_in_ = 0, recomputed_ = 0;
  double swap_bytes_ = 0;
  std::vector<double> occ_area_;   // per tier (GPU first): bytes x seconds, for the time-averaged occupancy
  std::vector<double> occ_peak_;
  double occ_t_ = 0;
  std::vector<double> occ_now_;
  double last_check_t_ = 0;
  bool record_iterations_ = false;  // sim.step_csv: iterations.csv
  std::vector<IterationRow> iteration_rows_;
};

}  // namespace kvtier
