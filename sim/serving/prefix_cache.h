// The serving prefix cache: the tiers below the GPU keep prompt blocks for
// reuse (each tier with its eviction policy, as `kvtier replay` runs them,
// in blocks of the request trace's hash size), and optionally the GPU's own
// pool keeps the blocks of finished requests (gpu_prefix_cache.h). It says
// what of a prompt is cached where, marks an admitted prompt's blocks used,
// plans their loads into the GPU, and turns what the tiers insert into
// transfers (written down from the GPU, demoted between tiers).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "policies/common.h"
#include "sim/core/engine_setup.h"
#include "sim/core/job.h"
#include "sim/engine/paged_pipeline.h"
#include "sim/serving/scheduler.h"

namespace kvtier {

class GpuPrefixCache;
class JobBoard;
class KvPool;
class ReplaySession;
class TransferPlanner;
struct ReplayConfig;

class PrefixCache {
 public:
  static ParamList params();  // serving.prefix_cache
  // What else the tiers below the GPU hold: the swap space (`swap_bytes` on
  // device `swap_dev`; 0 where preemption recomputes) and, per tier, weights.
  struct Room {
    int swap_dev = -1;
    double swap_bytes = 0;
    std::vector<double> weight_bytes;  // per tier (GPU first)
    double kv_block_bytes = 0;         // a paged block of every layer: hardware.kv_capacity's block
    // The share of each tier's room below the GPU the cache takes (serving.kv
    // "tiered": running sequences' KV takes the rest; 1 with the paged pool).
    double share = 1.0;
  };
  PrefixCache();
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // `pc`: serving.prefix_cache, resolved (its policy in place); `block_tokens`
  // and `distinct_blocks`: the request stream's prefix blocks (0: none to cache).
  void setup(json& pc, const EngineSetup& s, uint32_t block_tokens, uint64_t distinct_blocks, const Room& room,
             uint32_t pool_block_tokens);
  // serving.prefix_cache.warm: the cache starts holding every block of
  // `reqs` (the whole stream), referenced in stream order before time 0, as
  // far as its tiers hold them; no bytes move and nothing counts as written.
  // A pool's member leaves it to the pool (KvPool::warm).
  bool warm_start() const { return warm_; }
  void warm(const std::vector<ServingRequest>& reqs);
  bool write_through() const { return write_through_; }
  bool has_gpu() const { return gpu_ != nullptr; }

  // The prompt tokens the cache holds (the scheduler's lookup).
  uint32_t lookup(ServingRequest& r) const;
  // What a router weighs: the prompt tokens the cache holds, and with a KV
  // pool only those held on this instance's own node (read without
  // crossing the fabric).
  uint32_t routing_tokens(const ServingRequest& r) const;
  // The prompt tokens the cache holds (as lookup counts them), and where each
  // hit would be read from: (device, tokens) in prompt order, one entry per
  // run of blocks on one device (those in the GPU's pool are not listed:
  // they load nothing). Appended to `from`.
  uint32_t hit_sources(const ServingRequest& r, std::vector<std::pair<size_t, uint32_t>>& from) const;
  // The bytes of one token of one layer a load of cached KV moves.
  double load_bytes_per_token_layer() const { return kv_bytes_per_token_layer_; }
  // The prefix hits of the iteration's newly admitted prompts: marked used,
  // and their loads planned into `it` (what the GPU's pool holds loads nothing).
  void plan_loads(const IterationPlan& p, std::vector<ServingRequest>& reqs, PagedIteration& it);
  // serving.kv "tiered": the prompt tokens of an admitted item loaded from
  // each cache tier (`tokens[u]`: from tier u below the GPU; empty if the
  // item loads nothing), its blocks marked used and the bytes counted.
  void take_loads(const IterationItem& item, ServingRequest& r, std::vector<uint32_t>& tokens);
  // The latest write down into the cache: a load of a block written moments ago waits for it.
  JobId last_write() const { return last_write_; }
  // A prompt's new blocks go down to the cache.
  void write_down(const ServingRequest& r);
  // What the tiers inserted since the last call becomes transfers.
  void submit_moves(TransferPlanner& planner, size_t gpu_dev);
  // A finished request's whole prompt blocks stay in the GPU's pool; the
  // pool has `free_blocks` free: what it handed out since is no longer cached.
  void free_to_gpu(const ServingRequest& r);
  void trim_gpu(uint64_t free_blocks);
  uint64_t gpu_pool_blocks() const;

  // cluster.kv_pool "pooled": from now on the cache is member `member` of
  // `pool` (kv_pool.h), whose index replaces its own; `ranks`: the tensor-
  // parallel ranks each of its moves runs on (for the bytes it reports).
  void join(KvPool& pool, uint32_t member, uint32_t ranks);
  // Pooled: the transfers of this cache's instance are jobs of `board`.
  void pool_board(JobBoard& board);
  // The tiers as this cache would keep them alone (null: off), and each one's device.
  const ReplayConfig* replay_config() const { return cfg_.get(); }
  const std::vector<size_t>& devices() const { return dev_; }

  uint32_t tiers() const;  // cache tiers below the GPU (0: off)
  double used_bytes(uint32_t tier) const;
  // result.json's prefix_cache.
  json metrics(const std::vector<ServingRequest>& reqs) const;

 private:
  static constexpr uint32_t kOnGpu = UINT32_MAX;  // for_each_hit's tier of a block in the GPU's pool
  template <class F>
  void for_each_hit(const ServingRequest& r, F&& f) const;
  void setup_tiers(json& pc, const EngineSetup& s, const Room& room);
  void mark_used(const ServingRequest& r);
  // The item's loaded tokens split over the tiers that hold them, less what the GPU's pool holds.
  bool split_loads(const IterationItem& item, ServingRequest& r);
  // Pooled: the item's loaded tokens of each tier by the member holding them.
  void split_by_member(ServingRequest& r, const std::vector<uint32_t>& tier_tokens);
  void plan_pool_loads(PagedIteration& it);

  std::unique_ptr<ReplayConfig> cfg_;
  std::unique_ptr<ReplaySession> cache_;
  ReplaySession* index_ = nullptr;       // what lookups read: cache_, or the pool's index
  KvPool* pool_ = nullptr;
  uint32_t member_ = 0, ranks_ = 1;
  std::vector<double> member_tokens_;    // pooled, per iteration: tier x member, tokens loaded
  std::vector<uint32_t> nodes_seen_;     // scratch: the other nodes a prompt's hits came from
  // Pooled, per iteration: per other member, the last of its writes of a
  // block this iteration loads that has not landed yet (kNoJob: none).
  std::vector<JobId> unlanded_;
  std::vector<uint32_t> unsent_;  // pooled, per iteration: blocks another member has yet to move
  double remote_load_bytes_ = 0, remote_write_bytes_ = 0;  // pooled: across nodes, every rank's
  uint64_t local_hit_tokens_ = 0, remote_hit_tokens_ = 0;
  uint64_t replica_hit_tokens_ = 0;  // pooled: of the local ones, read from this instance's copies of hot blocks
  std::unique_ptr<GpuPrefixCache> gpu_;  // prefix_cache.gpu: freed prompt blocks kept in the pool
  std::vector<size_t> dev_;              // per cache tier: its device
  std::vector<uint64_t> inserted_seen_;  // per cache tier: inserts already turned into transfers
  uint32_t block_tokens_ = 0;            // tokens per prefix-cache block (the trace's hash blocks)
  uint64_t distinct_blocks_ = 0;
  double kv_bytes_per_token_layer_ = 0;
  uint32_t layers_ = 0;
  bool write_through_ = true, inclusive_ = false, match_any_ = false, warm_ = false;
  JobId last_write_ = kNoJob;  // loads of blocks still being written wait for the write
  double write_bytes_ = 0, load_bytes_ = 0;
};

}  // namespace kvtier
