// The serving scheduler: which requests run in the next iteration, by
// continuous batching (Orca, vLLM): running sequences decode one token each;
// waiting requests are admitted while the iteration's limits allow (running
// sequences, batched tokens) and the GPU's paged KV pool has the blocks
// their prompt needs, and with chunked prefill a long prompt is computed a
// budget's worth of tokens at a time. When a running sequence needs a block
// and none is free, the lowest-priority running sequence is preempted: its
// KV is swapped out to host memory (and back in before it runs again) or
// dropped and recomputed (vLLM's two modes). Preempted sequences resume
// before new requests are admitted.
//
// Pure bookkeeping: no SimGrid, no time passes here; the serving engine
// (sim/serving/serving.h) turns a plan into transfers and kernels.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace kvtier {

enum class QueueOrder { Fcfs, ShortestPrompt };
enum class PreemptionMode { Swap, Recompute };

struct SchedulerLimits {
  uint32_t max_running = 256;         // sequences in one iteration (vLLM max_num_seqs)
  uint32_t max_batched_tokens = 8192; // tokens computed in one iteration (max_num_batched_tokens)
  bool chunked_prefill = false;
  // An iteration that admits new prompts computes them alone; the running
  // sequences' decode steps wait for the next iteration without any (vLLM
  // V0's scheduler). Otherwise prompts join the decode steps' iterations.
  bool prefill_first = false;
  QueueOrder order = QueueOrder::Fcfs;
  PreemptionMode preemption = PreemptionMode::Swap;
  uint32_t block_tokens = 16;         // tokens per paged KV block on the GPU
  uint64_t gpu_blocks = 0;            // the GPU's KV pool
  uint64_t swap_blocks = 0;           // host memory for swapped-out sequences (vLLM swap_space)
  double watermark = 0.01;            // fraction of the pool kept free at admission (vLLM's default)
};

struct ServingRequest {
  uint32_t id = 0;
  double arrival_s = 0;
  uint32_t input_tokens = 0, output_tokens = 0;
  std::vector<uint32_t> prefix_blocks;  // dense ids of the prompt's prefix-cache blocks

  // Incoming: prefilled elsewhere, its KV streaming into blocks it holds here.
  enum class State { Future, Waiting, Running, Swapped, Incoming, Done };
  State state = State::Future;
  uint32_t prefill_target = 0;  // tokens to prefill: the prompt, plus generated tokens after a recompute
  uint32_t ctx = 0;             // tokens whose KV is on the GPU
  uint32_t generated = 0;       // output tokens produced
  uint64_t gpu_blocks = 0;      // paged blocks held on the GPU
  // Its KV streams to a decode GPU (a disaggregated cluster's prefill side):
  // when it finishes its blocks stay held (held_blocks) until the last
  // layer has left.
  bool hold_kv = false;
  uint64_t held_blocks = 0;
  bool looked_up = false;       // prefix cache consulted (once per admission)
  // Metrics.
  double first_scheduled_s = -1, first_token_s = -1, finish_s = -1;
  uint32_t preemptions = 0;
  uint64_t computed_tokens = 0;        // prompt tokens computed (not loaded)
  std::vector<uint32_t> hit_tokens;    // per cache tier, loaded instead of computed
  uint32_t gpu_hit_tokens = 0;         // found in the GPU's own pool (prefix_cache.gpu): neither loaded nor computed
  // cluster.kv_pool "pooled": of hit_tokens, those read from a share on
  // another node, and how many other nodes they came from.
  uint32_t remote_hit_tokens = 0, remote_nodes = 0;
  bool prefilling() const { return ctx < prefill_target; }
};

// One request's work in an iteration.
struct IterationItem {
  uint32_t req = 0;
  uint32_t past = 0;     // tokens whose KV already exists (attention reads them)
  uint32_t tokens = 0;   // tokens computed now (a prefill chunk, or 1 when decoding)
  uint32_t loaded = 0;   // prompt tokens loaded from the prefix cache before this chunk
  bool prefill = false;
  bool completes_prefill = false;  // this iteration produces the request's next token
};

struct IterationPlan {
  std::vector<IterationItem> items;
  std::vector<uint32_t> swapped_out, swapped_in, recomputed;  // request ids
  std::vector<uint32_t> pulled_in;  // prefilled elsewhere: their prompt's KV comes in now
  std::vector<uint32_t> reserved;   // prefilled elsewhere: blocks now held for their streamed KV
  uint64_t computed_tokens = 0;
};

class Scheduler {
 public:
  // `lookup` is called once when a request is first admitted (and again
  // after a recompute): it returns the prompt tokens the prefix cache holds,
  // which are loaded instead of computed (at most the prompt less one token:
  // the last one is computed to produce the next token).
  using Lookup = std::function<uint32_t(ServingRequest&)>;
  Scheduler(const SchedulerLimits& limits, std::vector<ServingRequest>& reqs, Lookup lookup);

  void arrive(uint32_t id);  // the request joins the waiting queue
  // A request whose prompt another instance prefilled (a disaggregated
  // cluster's decode side): its first token is out and its prompt's KV is
  // there to pull (ctx tokens). It is admitted, before new prompts, when its
  // blocks and the watermark are free, and decodes in the iteration that pulls it.
  void arrive_prefilled(uint32_t id);
  // A request whose prompt another instance is prefilling and whose KV it
  // streams here layer by layer: its blocks are reserved (in arrival order,
  // after swapped-out sequences, keeping the watermark free) before the
  // KV may come; plan() lists the reservations it makes. kv_in(): the last
  // layer is here; it decodes from the next iteration on, in its blocks.
  void arrive_streamed(uint32_t id);
  void kv_in(uint32_t id);
  // Blocks reserved for KV still on its way (reserved, not yet kv_in).
  uint64_t awaiting_kv() const { return in_flight_; }
  // The sender's side: a finished request marked hold_kv keeps its blocks
  // (held_blocks) until release(); their sum is held_blocks().
  void release(uint32_t id);
  uint64_t held_blocks() const { return held_blocks_; }
  // The next iteration's plan; blocks are taken from the pool as planned.
  const IterationPlan& plan();
  // After the iteration: tokens produced, requests done (blocks freed).
  // Returns the ids of requests that finished.
  const std::vector<uint32_t>& complete(double now);
  // Requests the planned iteration will finish (complete() will return them).
  uint64_t finishing() const;

  bool idle() const {
    return running_.empty() && waiting_.empty() && swapped_.empty() && pulled_.empty() && reserving_.empty() &&
           ready_.empty();
  }
  uint64_t free_blocks() const { return limits_.gpu_blocks - used_blocks_; }
  uint64_t used_blocks() const { return used_blocks_; }
  uint64_t swapped_blocks() const { return swapped_blocks_; }
  size_t running() const { return running_.size(); }
  size_t waiting() const { return waiting_.size() + pulled_.size() + reserving_.size() + ready_.size(); }
  size_t swapped() const { return swapped_.size(); }
  uint64_t preemptions() const { return preemptions_; }
  uint64_t watermark_blocks() const { return static_cast<uint64_t>(limits_.watermark * double(limits_.gpu_blocks)); }
  uint64_t blocks_for(uint64_t tokens) const { return (tokens + limits_.block_tokens - 1) / limits_.block_tokens; }

 private:
  // Step 3 of plan(): new (and recomputing) requests, in queue order, while they fit.
  void admit_waiting(uint64_t& budget);
  bool before(uint32_t a, uint32_t b) const;
  void preempt(uint32_t id);
  void insert_waiting(uint32_t id);

  SchedulerLimits limits_;
  std::vector<ServingRequest>& reqs_;
  Lookup lookup_;
  std::deque<uint32_t> running_;   // in priority order (admission order)
  std::deque<uint32_t> waiting_;   // in queue order
  std::deque<uint32_t> swapped_;   // in priority order
  std::deque<uint32_t> pulled_;    // prefilled elsewhere, in arrival order
  std::deque<uint32_t> reserving_; // streamed here: waiting for blocks, in arrival order
  std::deque<uint32_t> ready_;     // streamed here: KV in, in its blocks, waiting to run
  uint64_t used_blocks_ = 0, swapped_blocks_ = 0, preemptions_ = 0;
  uint64_t in_flight_ = 0, held_blocks_ = 0;
  IterationPlan plan_;
  std::vector<uint32_t> finished_;
};

}  // namespace kvtier
