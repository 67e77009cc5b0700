// The decode engine: replays an attention trace through the device models
// with the configured policies, on SimGrid.
//
// Lifecycle (after MQSim): the constructor validates the whole configuration
// and builds every component (throwing ConfigError before anything runs or is
// written); run() builds the SimGrid platform, runs the simulation and
// returns the metrics.
//
// Concurrency mirrors the hardware: the GPU compute stream is the driver
// actor; every copy direction between two devices is its own Stream actor.
// All actors live on one controller host so that hand-offs cost nothing
// (see shared/reference/simgrid-3.32.md); transfers are sendto_async between
// device hosts and compute runs on the GPU host.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/hardware.h"
#include "models/llm.h"
#include "models/flash_wear.h"
#include "models/thermal.h"
#include "models/topology.h"
#include "policies/common.h"
#include "policies/policy.h"
#include "sim/streams.h"
#include "traces/attention_trace.h"

namespace kvtier {

class Simulation {
 public:
  explicit Simulation(json& cfg);  // cfg is resolved in place (defaults filled)
  ~Simulation();
  json run(const std::string& timeline_path);
  // Decode step end times (seconds), for steps.csv.
  const std::vector<double>& step_ends() const { return step_end_; }
  double decode_start() const { return decode_start_; }

 private:
  struct Slot {  // what one selected (step, layer) hands to the GPU
    std::vector<JobId> waits;
    uint64_t kv_blocks = 0;
    uint64_t kv_tokens = 0;            // tokens those blocks hold (whole blocks unless transfer_unit is tokens)
    double extra_gpu_s = 0;            // decompression on the GPU before attention
    JobId score_cpu = kNoJob, score_fpga = kNoJob;  // APP scoring of this layer
    JobId score_read = kNoJob, score_move_cpu = kNoJob;  // the FPGA's NAND read; keys moved to the host
  };
  // Transfers between two endpoints (tiers 0..n-1, and the GPU as endpoint
  // n) batched per selected layer: one SimGrid transfer per pair.
  struct Batch {
    JobId id = kNoJob;
    double bytes = 0;      // on the wire (compressed where the tier stores compressed)
    double codec_s = 0;    // (de)compression work for these bytes
    bool decompress = false;
    bool codec_before_write = false;  // a host codec at the GPU's side: the copy moves uncompressed bytes
    std::vector<JobId> deps;
  };

  void drive();
  void prefill();
  void select(uint64_t k);
  void append(uint64_t k);
  void allocate(BlockId b, uint32_t final_blocks, TierId* written_to);
  void enforce_budget(uint32_t seq, uint32_t layer);
  void drop(BlockId b);
  bool make_room(TierId t);
  void move(BlockId b, TierId from, TierId to);
  void demote(BlockId b, TierId from);
  // Copies below a block's own tier (BlockTable::copies): each tier keeps its
  // copies in a list, oldest at the tail, dropped first when it needs room.
  void add_copy(BlockId b, TierId t);
  void drop_copy(BlockId b, TierId t);
  void invalidate_copies(BlockId b);
  // b has a valid copy below its tier: demoting it moves no bytes (it goes
  // to the highest tier holding one).
  bool free_demotion(BlockId b) const { return !evict_->exclusive() && t_.copies[b] != 0; }
  // Whether b can leave tier t: freely, or into room made in the tier below.
  bool room_below(BlockId b, TierId t) {
    return free_demotion(b) || (t + 1u < t_.tiers.size() && make_room(static_cast<TierId>(t + 1)));
  }
  // Drops the oldest copy kept in tier t for a block above; false if none.
  bool drop_oldest_copy(TierId t);
  JobId add_to_batch(size_t from_ep, size_t to_ep, BlockId b, double raw_bytes, bool wait_for_block);
  void flush(Slot* slot);
  void background_demotion();
  void score(Slot& slot, uint32_t step, uint32_t layer, uint32_t n);
  void compute(double seconds, const char* phase, int64_t step, uint32_t layer, uint64_t kv_blocks);
  double fraction(size_t tier, uint32_t layer) const;
  double kernel_s(double flops, double bytes) const;
  Stream& stream(size_t from_dev, size_t to_dev);
  uint32_t blocks_at(uint32_t step) const { return (ctx_ + step + bt_) / bt_; }
  static void add_dep(std::vector<JobId>& deps, JobId j);

  json& cfg_;
  Hardware hw_;
  std::unique_ptr<Topology> topo_;
  LlmSpec model_;
  uint32_t batch_, ctx_, steps_, bt_;
  uint32_t warmup_ = 0;  // decode steps left out of TPOT and tokens/s
  bool defer_budget_ = false;  // prefill: budgets apply once the whole prompt is allocated
  // workload.transfer_unit: whole blocks (paged KV) or the tokens a block
  // holds (FlexGen's tensors): what a block's moves and attention cost.
  bool tokens_unit_ = false;
  uint64_t tokens_now_ = 0;  // tokens each sequence has at the layer being selected
  uint64_t held_tokens(BlockId b) const {
    if (!tokens_unit_) return bt_;
    const uint64_t first = uint64_t(t_.index_of(b)) * bt_;
    return tokens_now_ > first ? std::min<uint64_t>(bt_, tokens_now_ - first) : 1;
  }
  double data_bytes(BlockId b) const { return double(held_tokens(b)) * double(model_.kv_bytes_per_token_layer()); }
  bool prefill_compute_, prefill_load_;
  uint32_t query_tokens_ = 0;
  bool overlap_next_load_ = false;
  double next_load_end_ = -1;
  void load_next_request();
  size_t next_dst_dev_ = 0;     // where the next request's load lands
  double next_load_bytes_ = 0;  // and how many bytes it brings
  std::unique_ptr<EvictionPolicy> evict_;
  std::unique_ptr<PromotionPolicy> promote_;
  std::unique_ptr<PlacementPolicy> place_;
  std::unique_ptr<PrefetchPolicy> prefetch_;
  std::unique_ptr<EvaluationPolicy> eval_;
  std::unique_ptr<CompressionPolicy> compress_;
  std::vector<CompressionSpec> codec_;  // per (tier, layer)
  std::unique_ptr<AttentionSource> trace_;
  std::string trace_name_;

  BlockTable t_;
  std::vector<size_t> tier_dev_;
  size_t gpu_dev_ = 0;
  bool gpu_tier_ = false;  // the GPU's memory is tier 0
  double gpu_flops_ = 0, gpu_mem_Bps_ = 0, gpu_launch_s_ = 0;
  const DeviceModel* gpu_model_ = nullptr;
  int cpu_dev_ = -1, fpga_dev_ = -1;  // scoring and codec devices, if the hardware has them
  int ssd_dev_ = -1, host_mem_dev_ = -1;  // APP: the SmartSSD tier next to the FPGA; host memory
  ScoringRates rates_;
  double fpga_compute_Bps_ = 0;  // the FPGA's kernel alone (its NAND read is a transfer)
  uint32_t depth_ = 0;

  // Run state.
  std::unique_ptr<Platform> platform_;
  std::unique_ptr<JobBoard> board_;
  std::unique_ptr<Timeline> timeline_;
  std::vector<std::unique_ptr<Stream>> owned_streams_;
  std::vector<Stream*> streams_;  // n x n by (from, to) device; pairs may share a stream (GPU copy engines)
  sg4::Host* gpu_host_ = nullptr;
  uint32_t gpu_track_ = 0;
  std::vector<uint32_t> occupancy_track_;  // per tier: a timeline counter of its bytes in use
  std::vector<double> occupancy_value_;    // the values of the latest instant, not yet written
  double occupancy_t_ = -1;
  void emit_occupancy();
  std::vector<JobId> pending_;  // per block: the job moving it, if any
  // Per block, while pending_ is a write down (demotion, prefill output):
  // the endpoint still holding the data (kNoSource: the move is a read up,
  // and a reader must wait for it).
  static constexpr uint8_t kNoSource = 255;
  std::vector<uint8_t> pending_src_;
  std::vector<RecencyLists> copy_lists_;  // per tier
  std::vector<Slot> ring_;
  std::vector<AttentionRecord> recs_;  // this (step, layer)'s records, one per trace sequence
  std::vector<float> mass_of_;  // per block index: the current record's mass
  std::vector<BlockId> sel_;
  std::vector<uint32_t> idx_;
  std::vector<Batch> batches_;           // (n+1) x (n+1) endpoints
  std::vector<Batch> prefetch_batches_;  // per tier: predicted blocks, off the critical path
  std::vector<uint32_t> pred_;
  std::vector<float> obs_mass_;
  std::vector<uint8_t> prefetched_;  // per block: brought to the GPU by a prediction, not used yet
  std::vector<TierId> prefetch_src_;  // per block: the tier a prediction brought it from
  PrefetchStats pstats_;
  double gpu_extra_s_ = 0;           // GPU codec work waiting for the next compute
  std::unique_ptr<ThermalModel> thermal_;
  double thermal_t_ = 0, thermal_peak_C_ = 0, throttled_s_ = 0;
  std::vector<FlashWear> wear_;      // per tier (storage tiers only matter)

  // Metrics.
  double decode_start_ = 0, prefill_end_ = 0, gpu_busy_s_ = 0;
  std::vector<double> step_end_;
  double total_mass_ = 0, used_mass_ = 0;
  uint64_t accesses_ = 0, dropped_accesses_ = 0, dropped_blocks_ = 0, demoted_blocks_ = 0, promoted_blocks_ = 0;
  uint64_t written_back_blocks_ = 0, copies_dropped_ = 0;
  std::vector<uint64_t> hits_, peak_blocks_;
  double ssd_bytes_written_ = 0, fetched_bytes_ = 0;
  double beta_sum_ = 0, cpu_score_s_ = 0, fpga_score_s_ = 0, cpu_idle_s_ = 0, fpga_idle_s_ = 0;
  uint64_t scored_layers_ = 0;
  double key_bytes_scored_cpu_ = 0, key_bytes_scored_fpga_ = 0, key_bytes_scored_gpu_ = 0, key_bytes_moved_ = 0;
};

}  // namespace kvtier
