// The paged pipeline: one serving iteration with running sequences' KV in
// the GPU's paged pool. The swaps the scheduler decided run first (as
// vLLM's cache operations run before the forward pass); then every layer's
// kernel, each layer waiting for the prefix-cache loads into it, so that
// loads overlap the layers before (CachedAttention's layer-wise preload).
// An iteration with nothing to load and no streamed weights runs as one
// kernel for all layers (its layers cannot overlap anything), and one with
// loads runs its remaining layers as one kernel once their loads are all in
// (a tensor-parallel instance only where nothing else crosses its
// all-reduces' links); `coarsen` false runs every layer on its own, to check
// both give the same times. The
// serving driver plans what an iteration holds; this runs it.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/engine_setup.h"
#include "sim/core/job.h"
#include "sim/engine/kernel_cost.h"
#include "sim/engine/kv_push.h"
#include "sim/platform/gpu_stream.h"

namespace kvtier {

class JobBoard;
class PipelineStages;
class Platform;
class TransferPlanner;

struct PagedIteration {
  uint64_t index = 0;
  bool more_after = false;  // another iteration follows (weights for it may load during the last layer)
  // Bytes of each sequence swapped out to, and back in from, the swap device.
  std::vector<double> swap_out, swap_in;
  // Prefix-cache hits: from device `from`, `bytes` into every layer, once `after` is done.
  struct Load {
    size_t from = 0;
    double bytes = 0;
  };
  std::vector<Load> loads;
  // Prompts prefilled on another GPU (a disaggregated cluster's prefill
  // instance): their KV, `bytes` from device `from`, comes in with the swaps.
  std::vector<Load> pulls;
  // Prompts whose prefill this iteration completes and whose KV streams to
  // their decode GPU layer by layer: each layer's share goes when that
  // layer's kernel (and all-reduce) is done, where the receiver has room.
  std::vector<PushChunk> pushes;
  JobId after = kNoJob;
  std::vector<KernelSeq> seqs;  // what the kernel computes
  uint64_t computed_tokens = 0;
};

class PagedPipeline {
 public:
  PagedPipeline(const EngineSetup& s, EngineCounters& c, TransferPlanner& planner, Platform& platform, JobBoard& board,
                Timeline& timeline, uint32_t gpu_track, int swap_dev, uint32_t block_tokens, bool coarsen);
  // Runs iteration `it` from the GPU's actor; whether it ran layer by layer.
  bool run(const PagedIteration& it);
  // When the last iteration's swaps and pulls were all in: the compute
  // started then.
  double moved_in_s() const { return moved_in_s_; }
  // A pipeline-parallel instance (sim/platform/pipeline_stages.h): every
  // iteration runs stage by stage on `stages` (shared with the instance's
  // other micro-batches) instead of on this GPU alone; each stage runs its
  // own layers as this pipeline runs all of them without stages.
  void run_on_stages(PipelineStages* stages) { stages_ = stages; }

 private:
  std::vector<JobId> submit_swaps(const PagedIteration& it);
  // The iteration's kernels for `layers` layers on `gpu`, its all-reduces
  // among `group`: one kernel where nothing is loaded into them (returns
  // false), else layer by layer while loads are pending.
  // `ends`: the embedding's time before the first of them, the head's after the last.
  bool compute(const PagedIteration& it, double layer_s, const PassEnds& ends, const std::vector<std::vector<JobId>>& loads,
               GpuStream& gpu, const std::vector<size_t>& group, size_t layers);
  void run_layers(const PagedIteration& it, double layer_s, const PassEnds& ends,
                  const std::vector<std::vector<JobId>>& loads, GpuStream& gpu, const std::vector<size_t>& group,
                  size_t layers);
  bool run_stages(const PagedIteration& it, double layer_s, const PassEnds& ends,
                  const std::vector<std::vector<JobId>>& loads);
  // Layers `layer` .. `last` in one kernel (layer -1: all of them).
  GpuStream::Span kernel(const PagedIteration& it, GpuStream& gpu, double seconds, int64_t layer, size_t last,
                         bool place_work = true);
  // Layers `layer`..`last` as one kernel on `gpu` (layer -1: all of them,
  // `layers` in all), then their all-reduces among `group`.
  void merged_layers(const PagedIteration& it, GpuStream& gpu, const std::vector<size_t>& group, double seconds,
                     int64_t layer, size_t last, size_t layers);
  bool merges_layers() const;
  // The first load of layers l.. not known to be done.
  struct LoadCursor {
    size_t layer = 0, job = 0;
  };
  bool loads_in_from(const std::vector<std::vector<JobId>>& loads, size_t l, LoadCursor& c) const;
  // A tensor-parallel instance's all-reduces among `group` after `layers` layers' kernels.
  void all_reduce(const PagedIteration& it, const std::vector<size_t>& group, size_t layers);
  // Layer `layer` is computed: each push with room sends what it has not sent.
  void push_layer(const PagedIteration& it, uint32_t layer);

  const EngineSetup& s_;
  Platform& platform_;
  EngineCounters& c_;
  TransferPlanner& tp_;
  JobBoard& board_;
  GpuStream gpu_;
  size_t swap_dev_ = 0;  // where swapped-out sequences go (unused without swapping)
  uint32_t block_tokens_ = 0;
  bool coarsen_ = true;
  bool stream_weights_ = false;  // policies.weights streams layers in: every iteration runs layer by layer
  double moved_in_s_ = 0;
  PipelineStages* stages_ = nullptr;
  size_t stage_ = 0;               // the stage computing now (0 without stages)
  size_t stage_first_layer_ = 0;   // its first layer in the model
};

}  // namespace kvtier
