// FlexGen-style offload (policies.weights other than "gpu"): the weights
// stream from where they live layer by layer, a layer's batch runs as
// gpu_batches GPU batches sharing one weight load, pageable host memory is
// copied into pinned buffers by the thread that launches the kernels, hidden
// states may live in host memory, and attention over host-resident KV may
// run on the CPU. Owns the pinned copies in flight and the count of weight
// loads; the layer pipeline launches the kernels it times.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/core/engine_setup.h"
#include "sim/core/job.h"
#include "sim/engine/layer_slot.h"
#include "sim/platform/transfer_planner.h"

namespace kvtier {

class WeightOffload {
 public:
  WeightOffload(EngineSetup& s, TransferPlanner& planner, JobBoard& board);
  // Layer computations in the run (prefill and decode): the last one issues
  // no load of a next layer.
  void set_iterations(uint64_t n) { iterations_ = n; }
  // Waits for layer `layer`'s weights, issuing the next layer's load first
  // when loads overlap compute; its two halves: issue (returns the job the
  // layer waits for) and await.
  void wait_weights(uint32_t layer, int32_t step);
  JobId issue_weights(uint32_t layer, int32_t step);
  void await_weights(JobId j);
  // Launches one kernel of `seconds` on the GPU (the pipeline's compute stream).
  using Kernel = std::function<void(double seconds)>;
  // One decode layer (layer computation k): gpu_batches kernels that share
  // one weight load (`weights`, from issue_weights), each after its pinned
  // copies and hidden states and followed by its CPU attention where that is on.
  void run_layer(const LayerSlot& slot, uint64_t k, JobId weights, const Kernel& kernel);
  // Pageable KV: the first GPU batch's share of what a layer reads from host
  // memory is copied into pinned buffers now, the rest before later batches.
  // The layer's transfer into `gpu_ep` (the GPU tier, or the GPU as an endpoint) waits for that first share.
  void pin_first_share(double host_read_bytes, uint64_t step, uint32_t layer, size_t gpu_ep);
  // Pageable KV a prefetch policy predicted (of layer `layer`, for a later
  // step): copied into pinned buffers now, whole; the transfer of the
  // predicted blocks from host memory waits for the copy.
  void pin_predicted(double host_read_bytes, uint64_t step, uint32_t layer);
  // Before a prefill kernel of `tokens` tokens: the layer's weights (with
  // its first chunk), hidden states; returns the restore pass of
  // compressed weights the kernel adds.
  double before_prefill_kernel(uint32_t layer, bool first_chunk, double tokens);
  // compress_cache: `tokens` of prompt KV kept on the GPU are quantized by the next kernel.
  void compress_kept_prompt(double tokens);
  // GPU codec work waiting for the next kernel.
  double take_codec_s() {
    const double s = codec_s_;
    codec_s_ = 0;
    return s;
  }

 private:
  // Attention of `tokens` cached tokens on the CPU: the query to host
  // memory, the CPU's pass, the output back; the GPU waits for the output.
  void cpu_attention(double tokens, double query_bytes, double output_bytes, int32_t step, uint32_t layer);
  // Hidden states in host memory (policies.weights.activations "cpu"):
  // `bytes` to host memory, then `bytes` back, one after the other on the
  // activation streams; the GPU waits for both.
  void move_hidden(double bytes, int32_t step, uint32_t layer);
  // The CPU's copy of `bytes` of pageable host memory into pinned buffers,
  // issued now; the next kernel launches after it. Returns its job.
  JobId pin_now(double bytes, uint64_t step, uint32_t layer);
  // The work queue of the CPU (attention, copies into pinned buffers).
  Stream& cpu_stream() { return tp_.stream(static_cast<size_t>(s_.cpu_dev), static_cast<size_t>(s_.cpu_dev)); }

  EngineSetup& s_;
  TransferPlanner& tp_;
  JobBoard& board_;
  // pin_cache false: the KV copies into pinned buffers issued since the
  // last kernel (each selected layer's first share, each layer's predicted
  // blocks), and the bytes of the other shares, copied one before each
  // later GPU batch.
  std::vector<JobId> pins_;
  double pin_rest_bytes_ = 0;
  uint64_t issued_ = 0, iterations_ = 0;  // weight loads issued so far, and layer computations in the run
  double codec_s_ = 0;                     // GPU codec work for the next kernel
};

}  // namespace kvtier
