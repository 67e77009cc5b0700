// The stages of a pipeline-parallel model instance (Megatron-LM's pipeline
// parallelism as vLLM serves it, pipeline_parallel_size): stage s holds a
// consecutive run of the model's layers on its own GPUs (a tensor-parallel
// group of one or more), and a forward pass goes stage by stage, each stage
// handing the activations of every token of the batch to the next over the
// route between their GPUs.
//
// Several micro-batches (vLLM's virtual engines, one scheduler each) share
// the stages: a stage computes one micro-batch at a time, the others waiting
// in the order they reached it, so stage s+1 can compute one batch while
// stage s computes the next. That overlap is what pipeline parallelism buys
// for throughput; what it costs is the activation transfers and the time a
// stage waits with nothing to do (the bubble).
//
// A hand-over larger than NCCL's buffer is a rendezvous, as NCCL's send and
// receive on each stage's stream are: stage s sends once it has finished its
// kernels and stage s+1 has finished its previous micro-batch; both stages'
// streams are busy with the transfer until it is in, so it never runs beside
// either stage's kernels or all-reduces. A micro-batch takes stage s+1
// before it frees stage s (stages are always taken in increasing order, so
// no two micro-batches wait on each other). A hand-over whose slice per rank
// fits the buffer (NCCL_BUFFSIZE) goes into stage s+1's buffer once the
// buffer is empty, whatever stage s+1 computes meanwhile (the copy shares
// the links with it), and frees stage s when it is in; the micro-batch then
// waits for stage s+1 holding nothing, and empties the buffer when it takes
// it.
#pragma once

#include <simgrid/s4u.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/counters.h"
#include "sim/core/timeline.h"
#include "sim/platform/collective.h"
#include "sim/platform/gpu_stream.h"
#include "sim/platform/platform.h"

namespace kvtier {

class Platform;

// The layers each of `stages` stages holds, first stage first, as vLLM's
// get_pp_indices splits a model: layers / stages each, and the remainder
// one more each on the stages just before the last (the last also runs the
// final norm and the LM head): 7 layers over 3 stages are 2, 3, 2.
std::vector<uint32_t> stage_layers(uint32_t layers, uint32_t stages);

class PipelineStages {
 public:
  struct Stage {
    std::vector<size_t> gpus;  // its tensor-parallel ranks' GPUs (one without tensor parallelism)
    std::vector<std::string> names;  // their device names (the timeline's tracks)
    uint32_t layers = 0;             // the model layers it holds
  };
  // `activation_bytes_per_token`: what one token's activations between two
  // stages weigh (hidden size x bytes per element x tensors handed over).
  // `buffer_bytes`: NCCL's buffer per connection (0: every hand-over a rendezvous).
  PipelineStages(Platform& platform, Timeline& timeline, std::vector<Stage> stages, double activation_bytes_per_token,
                 double buffer_bytes = 0);
  ~PipelineStages();

  size_t size() const { return stages_.size(); }
  const Stage& stage(size_t s) const { return stages_[s]; }
  // Stage s's compute stream (its first GPU's, mirrored on its other ranks).
  GpuStream& gpu(size_t s) { return *gpus_[s]; }

  // From an actor: a micro-batch enters the pipeline (before stage 0) and
  // leaves it (after the last stage), for the bubble's bookkeeping.
  void begin_batch();
  void end_batch();
  // From an actor: waits until stage s is free (micro-batches take it in
  // the order they ask), then holds it until leave(s).
  void enter(size_t s);
  void leave(size_t s);
  // From an actor holding stages s and s+1: the activations of `tokens`
  // tokens from stage s to stage s+1. With tensor parallelism each rank sends its 1/tp slice to the next
  // stage's rank of the same index (vLLM's send_tensor_dict with its
  // all-gather group); receive() then all-gathers the slices. The flows run
  // on the routes between the GPUs (NVLink in a node, the fabric between
  // nodes) and share every link with other traffic. Returns the seconds it took.
  double send(size_t s, double tokens);
  // Whether a hand-over of `tokens` tokens fits NCCL's buffer (each rank's slice).
  bool buffered(double tokens) const;
  // From an actor holding stage s: waits until stage s+1's buffer is empty,
  // then sends into it as send() does. The micro-batch then leaves stage s,
  // enters stage s+1 and calls taken(s) to empty the buffer.
  double send_buffered(size_t s, double tokens);
  void taken(size_t s);
  // From an actor holding stage s (s > 0): the all-gather of the received
  // slices among its ranks (nothing without tensor parallelism).
  double receive(size_t s, double tokens);
  // A batch of `tokens` handed from the first stage to the last on an
  // otherwise idle platform: every send and all-gather, s.
  double handovers_idle_s(double tokens) const;

  // After the run.
  double busy_s(size_t s) const { return counters_[s].gpu_busy_s; }
  double activation_bytes() const { return activation_bytes_; }  // every flow's bytes, sends and all-gathers
  double activation_s() const { return activation_s_; }  // summed over micro-batches: time spent moving activations
  // Time during which at least one micro-batch was in the pipeline, to `end`.
  double active_s(double end) const;
  // 1 - the stages' busy time / (stages x active time): the share of stage
  // time the pipeline left idle while it had work (0 with one stage that never waits).
  double bubble_fraction(double end) const;
  uint64_t micro_batches() const { return batches_; }

 private:
  CollectivePlan send_plan(size_t s, double tokens) const;
  CollectivePlan receive_plan(size_t s, double tokens) const;
  Platform& platform_;
  std::vector<Stage> stages_;
  double bytes_per_token_ = 0;
  std::vector<EngineCounters> counters_;  // per stage: its compute stream's busy time
  std::vector<std::unique_ptr<GpuStream>> gpus_;
  std::vector<sg4::MutexPtr> busy_;  // per stage: held by the micro-batch it computes
  double buffer_bytes_ = 0;
  std::vector<sg4::SemaphorePtr> buffers_;  // per stage but the last: its buffer at the next stage, 1 while empty
  uint32_t in_flight_ = 0;
  double active_since_ = 0, active_s_ = 0;
  double activation_bytes_ = 0, activation_s_ = 0;
  uint64_t batches_ = 0;
};

}  // namespace kvtier
