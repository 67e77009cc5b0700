// The layer pipeline: what the GPU's compute stream does, layer by layer.
// Prefill (computed, loaded from flash, or assumed in place), then every
// decode step: for layer l, select the blocks attention uses (evaluation
// policy, APP scoring where they live), fetch what is below the GPU (one
// transfer per source tier, promotions, predictions behind the demand
// fetches), wait for it, run the layer's kernel, append the new token's KV.
// Selection runs `depth` layers ahead of compute (layer-ahead prefetch).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/engine/engine_metrics.h"
#include "sim/core/engine_setup.h"
#include "sim/engine/invariants.h"
#include "sim/engine/kernel_cost.h"
#include "sim/engine/layer_slot.h"
#include "sim/engine/offload.h"
#include "sim/engine/prefill_output.h"
#include "sim/engine/scoring.h"
#include "sim/kv/kv_store.h"
#include "sim/platform/gpu_stream.h"
#include "sim/platform/transfer_planner.h"

namespace kvtier {

class LayerPipeline {
 public:
  LayerPipeline(EngineSetup& s, EngineCounters& c, KvStore& kv, TransferPlanner& planner, Platform& platform,
                JobBoard& board, Timeline& timeline, uint32_t gpu_track);
  // The whole run; called from the GPU's compute actor.
  void drive();
  void check_with(InvariantChecker* c) { check_ = c; }
  // serving.coarsen: with serving.kv_unit "all_layers", an iteration's L
  // kernels, which nothing loads into once layer 0's fetches are in, run as
  // one activity of their summed time (false: one per layer).
  void set_coarsen(bool on) { coarsen_ = on; }

  // Serving with the KV in tiers (serving.kv "tiered", sim/serving/serving.h): each
  // request is block-table sequence `seq`, and an iteration runs every layer
  // for its sequences through the selection, fetch, compute and append of
  // decode, with selection `depth` layers ahead within the iteration. A
  // decode sequence appends one token at `past`; a prefill chunk computes
  // `tokens` after `past` (attention reads the KV before it) and its KV goes
  // where placement puts it once the layer has computed it.
  struct IterationSeq {
    uint32_t seq = 0, past = 0, tokens = 0;
    bool prefill = false;
    bool ends_prompt = false;  // a prefill chunk that ends its prompt (the head samples its first token)
    // The request's attention (serving.attention; null: none): the record of
    // each decode step `step` (0 = the first token after prefill), every
    // layer in order, and the prompt's attention for its prefill blocks.
    AttentionSource* attention = nullptr;
    uint32_t step = 0;
    bool predict = false;  // another decode step follows (predictions for it may be fetched)
    // A prompt admitted with prefix-cache hits (its first chunk, past > 0):
    // its first `past` tokens are read from the cache, in order,
    // cached_tokens[u] of them from tier cache_tier0 + u, once `cached_after`
    // (the cache's latest write) is done. Null: nothing cached.
    const std::vector<uint32_t>* cached_tokens = nullptr;
    TierId cache_tier0 = 1;
    JobId cached_after = kNoJob;
  };
  // `more_after`: another iteration follows (the next layer's weights may
  // load across). Each layer's kernel is timed from the sequences' shapes and
  // the KV their attention reads (sim/engine/kernel_cost.h).
  void run_iteration(uint64_t index, const std::vector<IterationSeq>& seqs, bool more_after);
  // `seq` now holds a request whose KV grows to `tokens` tokens (KvStore::expect).
  void expect(uint32_t seq, uint64_t tokens) { kv_.expect(seq, tokens); }
  // Every block of `seq` leaves its tier (the request finished, or its KV is dropped to be recomputed).
  void release(uint32_t seq);
  // serving.kv_layers "representative": why the run may differ from one of
  // every layer ("" while nothing says it does).
  const std::string& representative_why() const { return rep_why_; }

 private:
  using Slot = LayerSlot;
  void prefill();
  void seed_prompt_attention(uint32_t l, uint32_t ctx_blocks);
  double place_prompt(uint32_t l, uint32_t s0, uint32_t k, uint32_t ctx_blocks, PrefillOutput::StagedWrites& out);
  void note_staging(double staged);
  void select(uint64_t k);
  // A slot of the ring for layer computation k, emptied for its selection.
  Slot& open_slot(uint64_t k);
  void note_on_gpu(Slot& slot);
  void select_iteration(uint64_t index, uint32_t layer, const std::vector<IterationSeq>& seqs);
  // The blocks before q.past of `layer`, placed and read from the prefix cache.
  void load_cached(const IterationSeq& q, uint32_t layer);
  void append_iteration(uint32_t layer, const std::vector<IterationSeq>& seqs);
  // serving.kv_unit "all_layers": the iteration with whole-model blocks.
  void run_iteration_whole_blocks(uint64_t index, const std::vector<IterationSeq>& seqs, double restore_s,
                                  const PassEnds& ends);
  // Once an iteration's layers are done: background demotion, the moves submitted, the invariants.
  void end_iteration(uint64_t index, const std::vector<IterationSeq>& seqs);
  // Pass 1 for one sequence of `n` blocks: what attention uses, into sel_.
  // `dense`: every block, whatever the evaluation policy (prefill reads the whole past).
  void use_blocks(uint32_t step, uint32_t layer, uint32_t s, uint32_t n, const AttentionRecord* rec, bool dense = false);
  // Predictions of block indices of (s, layer) for step `step1` (`n1` blocks then), fetched behind the demand fetches.
  // Returns the raw bytes of those read from pageable host memory.
  double predict_for(uint32_t step1, uint32_t layer, uint32_t s, uint32_t n1);
  // The tier of pageable host memory (policies.weights with pin_cache false), else -1.
  int pageable_tier() const;
  // Pass 2: what of sel_ is below the GPU is fetched or promoted.
  void fetch_selected(Slot& slot, uint32_t layer);
  double crossing_bytes(TierId t, uint32_t layer, double raw) const;
  void append(uint64_t k);
  void compute_layer(Slot& slot, uint64_t k, JobId weights_job);
  void start_depth_adaptation();
  void adapt_depth();  // adaptive prefetch, once a step has ended
  // `layers` > 1: the kernels of layers layer .. layer + layers - 1 run as one activity.
  void compute(double seconds, const char* phase, int64_t step, uint32_t layer, uint64_t kv_blocks, uint32_t layers = 1);
  void load_next_request();
  // Samples tier occupancy, then submits every open transfer.
  void flush(Slot* slot);

  EngineSetup& s_;
  EngineCounters& c_;
  KvStore& kv_;
  const BlockTable& t_;
  TransferPlanner& tp_;
  Platform& platform_;
  JobBoard& board_;
  Timeline& timeline_;
  GpuStream gpu_;
  PrefillOutput output_;  // prompt KV computed on the GPU until written below it
  uint32_t depth_ = 0;
  double step_t0_ = 0, gpu_busy_t0_ = 0;  // when the last step started, and the GPU's busy time then
  std::vector<uint32_t> fetch_links_;     // the links fetches into the GPU cross
  std::vector<double> link_bytes_t0_;     // per link: its bytes when the last step started
  InvariantChecker* check_ = nullptr;
  std::unique_ptr<AppScoring> scoring_;  // APP (the evaluation policy splits scoring), else null
  std::unique_ptr<WeightOffload> offload_;  // policies.weights other than "gpu", else null
  std::vector<Slot> ring_;
  std::vector<AttentionRecord> recs_;  // this (step, layer)'s records, one per trace sequence
  AttentionRecord iter_rec_;           // serving: the record of one request at one layer
  std::vector<float> mass_of_;         // per block index: the current record's mass
  std::vector<BlockId> sel_;
  std::vector<BlockId> run_;      // fetch_selected: the blocks of the run of promotions being gathered
  std::vector<uint8_t> run_read_;  // and whether each was read up
  std::vector<uint32_t> idx_;
  std::vector<uint32_t> pred_;
  std::vector<float> obs_mass_;
  std::vector<float> used_mass_;  // use_blocks: the masses of the blocks used, in order
  std::vector<KernelSeq> shape_;          // serving: the iteration's kernel shape (reused)
  uint64_t clock_base_ = 0;               // serving: layer computations of the iterations so far
  bool coarsen_ = false;

  // A layer's selection and new KV in the iteration's loop: the store's own,
  // or with a representative layer, layer 0's in the store and layer 0's
  // batches issued again for the others.
  void select_layer(uint64_t index, uint32_t layer, const std::vector<IterationSeq>& seqs);
  void append_layer(uint32_t layer, const std::vector<IterationSeq>& seqs);
  // serving.kv_layers "representative": layer 0 selects, fetches and appends
  // in the block table; what its flushes issued is issued again for layer l
  // where the full run issues layer l's, its jobs mapped to layer l's.
  void begin_representative();
  void note_representative_exactness();
  void forget_done_layer_jobs();
  void reissue_select(uint32_t layer);
  void reissue_append(uint32_t layer);
  // Layer l's job for layer 0's job j (j itself where it is no layer's: a
  // prefix cache write every layer waits for).
  JobId layer_job(JobId j, uint32_t layer) const;
  void add_layer_jobs(uint32_t layer, const std::vector<std::pair<JobId, JobId>>& ids);
  // Layer 0's job as any layer's, found once an iteration (source_of).
  struct JobSource {
    JobId self = kNoJob;
    const std::vector<JobId>* of_layers = nullptr;  // layers 1..L-1's, as issued; null: no layer's, `self` for all
    JobId job_of(uint32_t layer) const;
  };
  JobSource source_of(JobId j) const;
  // Done for every layer (no layer's and done): nothing need wait for it.
  bool settled(const JobSource& src) const { return !src.of_layers && board_.done(src.self); }
  // A job a logged batch waits for: a batch of the same log, or a source.
  struct AskedSource {
    uint32_t batch = 0;  // the log's batch that asked
    uint32_t in_log = UINT32_MAX;
    JobSource src;
  };
  void resolve_log(const std::vector<TransferPlanner::Issued>& log, std::vector<AskedSource>& into);
  // Layer l's names for the asked jobs of a log (reused storage).
  const std::vector<TransferPlanner::Asked>& asked_for(const std::vector<AskedSource>& srcs, uint32_t layer);
  std::vector<TransferPlanner::Asked> asked_now_;
  // Tells the prefill output what GPU tier the full run has with `selected`
  // layers selected and `appended` appended (each layer's as layer 0's).
  void represent_gpu(uint32_t selected, uint32_t appended);
  bool rep_appended_ = false;  // layer 0's append of this iteration is done
  struct Representative {
    std::vector<TransferPlanner::Issued> select_log, append_log;
    std::vector<JobId> select_waits;  // layer 0's waits before its flush, each as asked (done or not)
    std::vector<JobSource> select_wait_srcs;              // the same, found once
    std::vector<AskedSource> select_asked, append_asked;  // the logs' asked jobs, found once
    std::vector<uint64_t> seq_tokens;
    uint64_t kv_blocks = 0, kv_tokens = 0;
    std::vector<PrefillOutput::StagedWrites> staged;  // layer 0's prefill output written below
    uint64_t gpu_start = 0, gpu_selected = 0, gpu_appended = 0;  // GPU tier blocks: at the start, after select, after append
  } rep_;
  std::vector<std::pair<JobId, JobId>> rep_ids_;
  std::vector<JobId> rep_waits_;
  std::unordered_map<JobId, std::vector<JobId>> layer_jobs_;  // layer 0's job -> layers 1..L-1's
  std::string rep_why_;
};

}  // namespace kvtier
