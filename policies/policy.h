// The policy families. Each is an interface plus a registry; an implementation
// is one file under policies/<family>/ with one KVTIER_REGISTER line.
//
// Lifecycle (after MQSim): construct from resolved params -> setup(table) once
// the shape is known -> event callbacks during the run.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "models/registry.h"
#include "policies/block_table.h"

namespace kvtier {

class PlacementPolicy;

// Which block leaves a full tier, and whether it is demoted one tier down or
// dropped. Callbacks keep the policy's own order (lists, counters) current.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual void setup(const BlockTable& table) = 0;
  virtual void on_insert(BlockId b, TierId t) = 0;  // b now lives in t
  virtual void on_access(BlockId b, TierId t) = 0;  // attention used b while in t
  // Attention used blocks first, first+1, ..., first+n-1, in that order, all
  // in t: what on_access of each in turn does (the default), which a policy
  // keeping lists may do for the run at once.
  virtual void on_access_run(BlockId first, uint32_t n, TierId t) {
    for (uint32_t i = 0; i < n; ++i) on_access(first + i, t);
  }
  virtual void on_remove(BlockId b, TierId t) = 0;  // b left t
  // A block to move out of full tier t, never a pinned one; kNoBlock if all
  // are pinned (the engine then streams instead of caching).
  virtual BlockId victim(TierId t) = 0;
  // Up to `n` victims of tier t into out[]: what victim() would answer in
  // turn if each answer left t (on_move or on_remove) before the next
  // question; how many. A policy whose next victim does not depend on
  // where the last one went (a list's tail, walked forwards) names them at
  // once; the default names one, and the caller asks again once it is gone.
  virtual uint32_t victims(TierId t, uint32_t n, BlockId* out) {
    if (n == 0) return 0;
    out[0] = victim(t);
    return out[0] != kNoBlock ? 1 : 0;
  }
  // True: victims are discarded (H2O, StreamingLLM) and their attention mass
  // is lost; false: they are demoted to the next tier down.
  virtual bool drops() const { return false; }
  // True: victims are chosen by attention mass (H2O), which only an
  // attention trace gives (serving has none; it refuses such a policy).
  virtual bool reads_attention() const { return false; }

  // --- Additions; every one has a default, so older policies and
  // engines keep working.

  // Tiers hold copies (BlockTable::copies): a block read up keeps its copy
  // in the tier it came from until that tier needs the room, and demoting a
  // block whose copy is still below moves no bytes. True: exclusive tiers
  // instead (a block lives in one tier only; every demotion writes it down).
  virtual bool exclusive() const { return false; }
  // The run's placement policy, bound once before setup(): its holds() says
  // which blocks must stay where they are (HKM's time pinning), so that one
  // parameter drives placement and eviction alike.
  virtual void bind_placement(const PlacementPolicy* placement) { (void)placement; }
  // Budget policies (H2O, StreamingLLM) limit the blocks a (seq, layer) keeps
  // whatever the tiers' capacity. After the engine creates a block of
  // (seq, layer) (prefill or decode) it calls this until it returns kNoBlock;
  // each returned block leaves now (dropped if drops(), else demoted).
  // Never a pinned block. Default: no budget.
  virtual BlockId budget_victim(uint32_t seq, uint32_t layer) {
    (void)seq;
    (void)layer;
    return kNoBlock;
  }
  // Fraction of tier t's capacity above which the engine demotes victims in
  // the background (off the critical path, after a step) until the tier is at
  // or below it. 1.0 (default): evict only on demand, when t is full.
  // HillInfer's HKM demotes asynchronously to keep DRAM use bounded.
  virtual double watermark(TierId t) const {
    (void)t;
    return 1.0;
  }
  // True: the policy keeps nothing of a block once it has left every tier
  // it was in (no ghost lists, no counts that outlive it), so the block's
  // place in the table may be given to another block. A cache of a few
  // blocks out of millions then needs state for what it holds only.
  virtual bool forgets_departed() const { return false; }
  // b's sequence is gone and b's place may be given to a new block (serving
  // takes a finished request's places again): whatever the policy keeps of
  // b beyond its tiers (ghost entries, counters, a group's length) goes, so
  // that the next block there starts new. Called once b has left its tiers.
  virtual void on_release(BlockId b) { (void)b; }
  // b left tier `from` for tier `to` (a read up or a demotion): one call
  // where the store moves a block, which a policy whose removal and
  // insertion are list operations can do at once. Default: on_remove, then
  // on_insert.
  virtual void on_move(BlockId b, TierId from, TierId to) {
    on_remove(b, from);
    on_insert(b, to);
  }
  // first, first + 1, ..., first + n - 1 left tier `from` for tier `to`,
  // in that order (a run read up as one copy, a run of victims demoted):
  // what on_move of each in turn does (the default), which a policy keeping
  // lists may do at once.
  virtual void on_move_range(BlockId first, uint32_t n, TierId from, TierId to) {
    for (uint32_t i = 0; i < n; ++i) on_move(first + i, from, to);
  }
  // True: the victims the policy names do not depend on where in its order
  // pinned blocks lie (a recency list whose victims come from the tail,
  // which a pinned block, used most recently, reaches only when every block
  // of the tier is pinned). The store then tells it of a run of pinned
  // blocks read up once room for all of them is made (on_move_range), not
  // between their rooms: the same victims.
  virtual bool pinned_moves_commute() const { return false; }
};
KVTIER_REGISTRY_FAMILY(EvictionPolicy, "eviction policy")

// Whether a block that attention reads from a lower tier moves up into the
// top tier (a cache) or is read through a staging buffer and stays (offload).
class PromotionPolicy {
 public:
  virtual ~PromotionPolicy() = default;
  virtual void setup(const BlockTable& table) { (void)table; }
  virtual bool promote(BlockId b, TierId from, const BlockTable& table) = 0;

  // Whether promote() accepts every block and promote_to() is tier 0 for
  // each, whatever the block: then callers need not ask per block.
  virtual bool every_block_to_top() const { return false; }

  // --- Additions.
  // Where a block that promote() accepted goes: tier 0 (default) or an
  // intermediate tier (HKM promotes a cold SSD block to the DRAM warm pool).
  // Always < from.
  virtual TierId promote_to(BlockId b, TierId from, const BlockTable& table) const {
    (void)b;
    (void)from;
    (void)table;
    return 0;
  }
  // Every block attention uses, in whatever tier (t), once per (step, layer),
  // before promote() is asked about it. Policies that track hit rates (HKM)
  // record here; promote() alone only sees reads from lower tiers.
  virtual void on_access(BlockId b, TierId t, const BlockTable& table) {
    (void)b;
    (void)t;
    (void)table;
  }
  // on_access of blocks[0..n) in turn, each in its own tier: the store
  // tells a sequence's uses at once, after their history is noted.
  virtual void on_access_run(const BlockId* blocks, size_t n, const BlockTable& table) {
    for (size_t i = 0; i < n; ++i) on_access(blocks[i], table.tier(blocks[i]), table);
  }
  // b's sequence is gone and its place may hold a new block: what the
  // policy recorded of b (hit history) goes (EvictionPolicy::on_release).
  virtual void on_release(BlockId b, const BlockTable& table) {
    (void)b;
    (void)table;
  }
};
KVTIER_REGISTRY_FAMILY(PromotionPolicy, "promotion policy")

// Where a newly allocated block (prefill or decode) goes.
class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual void setup(const BlockTable& table) { (void)table; }
  virtual TierId place(BlockId b, const BlockTable& table) = 0;

  // --- Additions.
  // place() when the engine knows how many blocks (seq, layer) will have once
  // this allocation is done (prefill allocates the whole prompt at once):
  // `final_blocks` > index_of(b). Time pinning needs it to tell which prompt
  // blocks are among the newest. Default: place(b, table).
  virtual TierId place_in(BlockId b, uint32_t final_blocks, const BlockTable& table) {
    (void)final_blocks;
    return place(b, table);
  }
  // True: b must stay in tier t now (HKM time pinning of the newest tokens in
  // the warm tier). An engine or eviction policy may use it as a veto on
  // victims; eviction "hkm" applies the same rule itself.
  virtual bool holds(BlockId b, TierId t, const BlockTable& table) const {
    (void)b;
    (void)t;
    (void)table;
    return false;
  }
};
KVTIER_REGISTRY_FAMILY(PlacementPolicy, "placement policy")

// What the evaluator is given for one (step, layer, sequence).
struct SelectInput {
  uint32_t step = 0, layer = 0, seq = 0;
  uint32_t n_blocks = 0;                          // blocks that exist now (0 .. n_blocks-1)
  const std::vector<uint32_t>* trace_blocks = nullptr;  // what attention used, per the trace (null: no trace)
  const std::vector<float>* trace_mass = nullptr;
};

// Prefetch quality, counted by the engine (policies do not count): a block
// is "prefetched" when fetched ahead of the layer that needs it (layer-ahead
// selection or predict()), "used" when attention then read it before it left
// the tier, "needed" for every block attention read from the fetch target
// tier, "covered" when a needed block was there thanks to a prefetch.
struct PrefetchStats {
  uint64_t prefetched_blocks = 0;
  uint64_t used_blocks = 0;      // prefetched and then used
  uint64_t needed_blocks = 0;    // read by attention from the fetch target tier
  uint64_t covered_blocks = 0;   // needed and present because prefetched
  uint64_t wasted_bytes = 0;     // bytes of prefetched blocks never used
  double accuracy() const { return prefetched_blocks ? double(used_blocks) / double(prefetched_blocks) : 0.0; }
  double coverage() const { return needed_blocks ? double(covered_blocks) / double(needed_blocks) : 0.0; }
};

// How far ahead (in layers) the engine selects and fetches: 0 fetches a
// layer's blocks only when the GPU reaches it; d overlaps the fetch for layer
// l+d with the compute of layer l.
class PrefetchPolicy {
 public:
  virtual ~PrefetchPolicy() = default;
  virtual void setup(const BlockTable& table) { (void)table; }
  virtual uint32_t depth() const = 0;

  // --- Additions.
  // Predictor: extra block indices of (next.seq, next.layer) to fetch ahead
  // for the step next.step, beyond what the evaluation selects. The engine
  // calls it right after it selects a layer ahead (same SelectInput; its
  // trace fields are NOT to be read by a real predictor and are ignored by
  // the built-in ones), de-duplicates against the selection and what is
  // resident, and appends the rest to the fetch. `out` is cleared by the
  // engine. Default: nothing extra.
  virtual void predict(const SelectInput& next, const BlockTable& table, std::vector<uint32_t>& out) {
    (void)next;
    (void)table;
    (void)out;
  }
  // Feedback: after attention ran for (done.step, done.layer, done.seq) the
  // engine passes what it actually used: done.trace_blocks = the block
  // indices attention read (the selection), done.trace_mass = their attention
  // mass from the trace (may be null). Predictors learn from it.
  virtual void observe(const SelectInput& done, const BlockTable& table) {
    (void)done;
    (void)table;
  }
  // b's sequence is gone (called for each of its blocks, index 0 first) and
  // its (seq, layer) may be a new sequence's: what was learnt of it goes.
  virtual void on_release(BlockId b, const BlockTable& table) {
    (void)b;
    (void)table;
  }
  // Adaptive depth: the engine calls it once per decode step, before the
  // step, with the GPU compute stream's and the fetch link's busy fractions
  // over the previous step (0..1); returns the depth for this step, which
  // depth() then also returns. Default: the fixed depth().
  virtual uint32_t adapt_depth(double gpu_busy, double link_busy) {
    (void)gpu_busy;
    (void)link_busy;
    return depth();
  }
  // True: predict()/observe() learn from the attention the engine observes
  // (engines without attention refuse the policy rather than run it blind).
  virtual bool reads_attention() const { return false; }
  // True: adapt_depth() adapts to per-step busy fractions, which only the
  // single-batch engine's decode steps give.
  virtual bool adapts_depth() const { return false; }
};
KVTIER_REGISTRY_FAMILY(PrefetchPolicy, "prefetch policy")

// Where importance scoring runs, after HillInfer's APP. Keys are scored
// where they live: the host CPU scores the keys held in host memory, the
// SmartSSD's FPGA those on its NAND, the GPU those in its hot pool. The split
// beta = M_c / (M_c + M_s) is a capacity allocation: a split that wants
// another beta than residence gives moves keys between the two sides, and the
// engine simulates those moves. Exposed by EvaluationPolicy::scoring().
struct ScoringRates {
  double f_c = 0;  // CPU scoring throughput, bytes of keys (at the scoring precision) per second
  double f_s = 0;  // FPGA scoring throughput (compute; its NAND read is simulated as a transfer)
  double b_c = 0;  // bandwidth of the host path to the GPU (selected KV from DRAM)
  double b_s = 0;  // bandwidth of the SmartSSD's path to the GPU
};
struct ScoringPlan {
  double bytes_cpu = 0;      // M_c: key bytes scored on the CPU (resident + moved in)
  double bytes_fpga = 0;     // M_s: key bytes scored on the FPGA
  double moved_to_cpu = 0;   // key bytes read from the SmartSSD into host memory first
  double moved_to_fpga = 0;  // key bytes sent from host memory to the FPGA first
  double beta = 0;           // M_c / (M_c + M_s) of this plan
};
class ScoringSplit {
 public:
  virtual ~ScoringSplit() = default;
  // Called once, after setup(), with the device-derived rates.
  virtual void configure(const ScoringRates& r) = 0;
  // This layer's plan for the key bytes resident on each side.
  virtual ScoringPlan plan(double cpu_resident_bytes, double fpga_resident_bytes) = 0;
  // Measured durations of the two sides for the last plan() (seconds); a
  // rebalancing split updates its beta from them, the others ignore it.
  virtual void report(double t_cpu_measured, double t_fpga_measured) = 0;
  virtual double beta() const = 0;  // the split's current target M_c/M
  virtual int bits() const = 0;     // precision keys are scored in (stored as such beside the FP16 KV)
  // Whether keys are scored at decode step `step` (between scorings the
  // last selection is reused).
  virtual bool scores_at(uint32_t step) const = 0;
  // Where the INT8/INT4 copy of the keys of the SmartSSD's blocks lives.
  // false: on its NAND beside the FP16 KV, read by the FPGA at every
  // scoring. true: in the FPGA's own memory (models/fpga_ku15p.h
  // FpgaMemory) as far as it fits, kept up to date as blocks are written to
  // the drive; the rest stays on NAND.
  virtual bool key_copy_in_fpga_memory() const { return false; }
  // true: the FPGA does not score but computes exact attention over the
  // SmartSSD's blocks inside the drive (near-storage attention, InstInfer):
  // the engine keeps those blocks off the GPU, sends the FPGA the layer's
  // query and gets back the partial attention output; plan() and report()
  // are then not called, and key_copy_in_fpga_memory() says whether the
  // drive's FP16 KV is read from the FPGA's memory (as far as it fits).
  virtual bool attends_in_storage() const { return false; }
  // With attends_in_storage: bytes of K and V per second the attention
  // kernel the system loads into the FPGA processes at its clock.
  virtual double attention_Bps() const { return 0; }
};

// Importance evaluation: which blocks a step actually loads. Writes block
// indices (within the sequence and layer) to `out`, which the engine clears.
class EvaluationPolicy {
 public:
  virtual ~EvaluationPolicy() = default;
  virtual void setup(const BlockTable& table) { (void)table; }
  virtual void select(const SelectInput& in, const BlockTable& table, std::vector<uint32_t>& out) = 0;

  // --- Additions.
  // Non-null when scoring is split between CPU and a near-data FPGA (APP):
  // on a scoring step the engine calls scoring()->plan() per layer with the
  // key bytes resident on each side, simulates the moves, the CPU's work,
  // the FPGA's NAND read and work, and the GPU's scoring of its own keys;
  // the layer's fetches wait for all of it; then it reports the measured
  // times. Null (default): scoring is free (or folded into the selection).
  virtual ScoringSplit* scoring() { return nullptr; }
  // False only for a selection that needs no attention data (dense
  // attention): engines without attention traces (serving) take only those.
  virtual bool reads_attention() const { return true; }
  // True only for a selection of every block that exists (dense attention):
  // the same blocks at every layer, so that whole-model blocks
  // (serving.kv_unit "all_layers") can be selected once for all layers.
  virtual bool dense() const { return false; }
  // b's sequence is gone and its place may hold a new block: what a
  // selection remembered of b goes.
  virtual void on_release(BlockId b, const BlockTable& table) {
    (void)b;
    (void)table;
  }
};
KVTIER_REGISTRY_FAMILY(EvaluationPolicy, "evaluation policy")

// How a block of a given layer is stored in a given tier: compression ratio
// and (de)compression cost, keys and values apart (each is half of
// block_bytes). Ratios follow models/compression.h's Codec: uncompressed /
// stored bytes (>= 1; 2.5 means 60% less data). Throughputs are aggregate
// (all engines the system gives the codec), in uncompressed bytes per second;
// 0 means free. The codec figures themselves (zstd, int8, int4 speeds and
// ratios, with sources) live in models/compression.h; a compression policy
// decides which applies where.
struct CompressionSpec {
  double key_ratio = 1.0;
  double value_ratio = 1.0;
  double compress_Bps = 0;    // when a block is written into the tier
  double decompress_Bps = 0;  // when it is read out of the tier
  bool on_gpu = false;        // where the work runs: GPU (quantization kernels, nvCOMP) or CPU (zstd)
  // A CPU codec's threads: the rates above are those of this many threads
  // running at once, and the engine runs them on min(threads, cores) of the
  // cpu device's cores, shared with whatever else the CPU does. 0: the rates
  // are the whole CPU's.
  uint32_t threads = 0;
  // Stored bytes / uncompressed bytes of a whole block (K and V halves).
  double stored_fraction() const { return 0.5 / key_ratio + 0.5 / value_ratio; }
};

class CompressionPolicy {
 public:
  virtual ~CompressionPolicy() = default;
  virtual void setup(const BlockTable& table) { (void)table; }
  // How a block of `layer` (0-based) is stored in tier t. Cheap and
  // allocation-free; engines may still tabulate it per (tier, layer) at setup.
  virtual CompressionSpec spec(TierId t, uint32_t layer) const = 0;
  // Stored bytes of a block of `block_bytes` uncompressed bytes.
  double stored_bytes(TierId t, uint32_t layer, double block_bytes) const {
    return spec(t, layer).stored_fraction() * block_bytes;
  }
  // Seconds to compress (write into t) / decompress (read out of t) `bytes`
  // uncompressed bytes of `layer`.
  double compress_s(TierId t, uint32_t layer, double bytes) const {
    CompressionSpec s = spec(t, layer);
    return s.compress_Bps > 0 ? bytes / s.compress_Bps : 0.0;
  }
  double decompress_s(TierId t, uint32_t layer, double bytes) const {
    CompressionSpec s = spec(t, layer);
    return s.decompress_Bps > 0 ? bytes / s.decompress_Bps : 0.0;
  }
};
KVTIER_REGISTRY_FAMILY(CompressionPolicy, "compression policy")

}  // namespace kvtier
