#include "sim/engine/paged_pipeline.h"

#include <string>

#include "sim/platform/collective.h"
#include "sim/platform/pipeline_stages.h"
#include "sim/platform/platform.h"
#include "sim/platform/sim_clock.h"
#include "sim/platform/transfer_planner.h"
#include "sim/platform/weight_stream.h"

namespace kvtier {

PagedPipeline::PagedPipeline(const EngineSetup& s, EngineCounters& c, TransferPlanner& planner, Platform& platform,
                             JobBoard& board, Timeline& timeline, uint32_t gpu_track, int swap_dev,
                             uint32_t block_tokens, bool coarsen)
    : s_(s),
      platform_(platform),
      c_(c),
      tp_(planner),
      board_(board),
      gpu_(platform, s.gpu_dev, c, timeline, gpu_track),
      swap_dev_(swap_dev < 0 ? 0 : static_cast<size_t>(swap_dev)),
      block_tokens_(block_tokens),
      coarsen_(coarsen),
      stream_weights_(s.weights && s.weights->streams()) {
  if (s.tp_gpus.size() > 1) {
    std::vector<std::string> names;
    for (size_t k = 1; k < s.tp_gpus.size(); ++k) names.push_back(s.hw.devices[s.tp_gpus[k]].name);
    gpu_.mirror_to(std::vector<size_t>(s.tp_gpus.begin() + 1, s.tp_gpus.end()), names);
  }
}

// Swaps out first; a swap in waits for them (the room it comes into is freed by them).
std::vector<JobId> PagedPipeline::submit_swaps(const PagedIteration& it) {
  std::vector<JobId> before;
  for (double bytes : it.swap_out) before.push_back(tp_.move(s_.gpu_dev, swap_dev_, bytes, {}, "swap out"));
  for (double bytes : it.swap_in) {
    std::vector<JobId> deps(before.begin(), before.end());
    before.push_back(tp_.move(swap_dev_, s_.gpu_dev, bytes, std::move(deps), "swap in"));
  }
  // Pulled KV comes into room the swaps out freed, like a swap in.
  for (const PagedIteration::Load& p : it.pulls) {
    std::vector<JobId> deps(before.begin(), before.end());
    before.push_back(tp_.move(p.from, s_.gpu_dev, p.bytes, std::move(deps), "kv pull"));
  }
  return before;
}

bool PagedPipeline::run(const PagedIteration& it) {
  const size_t L = s_.model.layers;
  const std::vector<JobId> before = submit_swaps(it);
  std::vector<std::vector<JobId>> loads(L);
  for (const PagedIteration::Load& ld : it.loads)
    for (size_t l = 0; l < L; ++l) {
      std::vector<JobId> deps;
      add_dep(deps, it.after);  // a block written moments ago is read once it is there
      loads[l].push_back(tp_.move(ld.from, s_.gpu_dev, ld.bytes, std::move(deps), "prefix load", static_cast<int32_t>(l)));
    }
  for (JobId j : before) board_.wait(j);
  moved_in_s_ = sim_now();
  const double layer_s = iteration_kernel_s(s_, block_tokens_, it.seqs) + weight_restore_s(s_);
  const PassEnds ends = iteration_ends_s(s_, it.seqs);
  if (stages_) return run_stages(it, layer_s, ends, loads);
  return compute(it, layer_s, ends, loads, gpu_, s_.tp_gpus, L);
}

bool PagedPipeline::compute(const PagedIteration& it, double layer_s, const PassEnds& ends,
                            const std::vector<std::vector<JobId>>& loads,
                            GpuStream& gpu, const std::vector<size_t>& group, size_t layers) {
  // A layer's KV leaves when that layer is done: pushing iterations run layer by layer.
  if (merges_layers() && it.loads.empty() && it.pushes.empty()) {
    double total = ends.first_s;
    for (size_t l = 0; l < layers; ++l) total += layer_s;
    total += ends.last_s;
    merged_layers(it, gpu, group, total, -1, 0, layers);
    return false;
  }
  run_layers(it, layer_s, ends, loads, gpu, group, layers);
  return true;
}

// Stage by stage: each waits its turn on its GPUs (another micro-batch may
// hold them), gathers the activations it received (tensor parallelism),
// computes its layers as a whole instance would (the loads into its layers
// are its own GPUs' share of the instance's, made by the transfer planner on
// every rank), then hands the activations on: it takes the next stage's
// GPUs, sends, and only then frees its own (PipelineStages::send); or,
// where they fit NCCL's buffer, sends into the next stage's buffer, frees
// its own and then waits for the next stage's. The loads
// of layer l are the same jobs for every stage: local layer l of each stage.
bool PagedPipeline::run_stages(const PagedIteration& it, double layer_s, const PassEnds& ends,
                               const std::vector<std::vector<JobId>>& loads) {
  PipelineStages& ps = *stages_;
  double tokens = 0;
  for (const KernelSeq& q : it.seqs) tokens += q.tokens;
  bool layered = false;
  ps.begin_batch();
  ps.enter(0);
  stage_first_layer_ = 0;
  for (size_t st = 0; st < ps.size(); ++st) {
    if (st > 0) ps.receive(st, tokens);
    stage_ = st;
    // The embedding is the first stage's, the head the last's.
    PassEnds mine;
    if (st == 0) mine.first_s = ends.first_s;
    if (st + 1 == ps.size()) mine.last_s = ends.last_s;
    layered = compute(it, layer_s, mine, loads, ps.gpu(st), ps.stage(st).gpus, ps.stage(st).layers) || layered;
    stage_first_layer_ += ps.stage(st).layers;
    if (st + 1 < ps.size() && ps.buffered(tokens)) {
      ps.send_buffered(st, tokens);
      ps.leave(st);
      ps.enter(st + 1);
      ps.taken(st);
      continue;
    }
    if (st + 1 < ps.size()) {
      ps.enter(st + 1);
      ps.send(st, tokens);
    }
    ps.leave(st);
  }
  ps.end_batch();
  return layered;
}

// Layers can run as one kernel, their all-reduces after it, in the same
// times: unless weights stream in layer by layer, or a tensor-parallel
// instance's all-reduces share links with other transfers (under contention,
// all-reduces moved after the kernel would meet other flows than they do
// layer by layer).
bool PagedPipeline::merges_layers() const {
  return coarsen_ && !stream_weights_ && (s_.tp_gpus.size() < 2 || s_.tp_alone);
}

// Once every load into the layers still to run is in, nothing can delay them
// any more: they run as one kernel, their all-reduces after it, as an
// iteration with no loads does (the same times; many fewer SimGrid
// activities, since long prompts' loads finish within the first layers).
bool PagedPipeline::loads_in_from(const std::vector<std::vector<JobId>>& loads, size_t l, LoadCursor& c) const {
  // A load found done stays done: each check resumes where the last stopped.
  if (c.layer < l) c = LoadCursor{l, 0};
  for (; c.layer < loads.size(); ++c.layer, c.job = 0)
    for (; c.job < loads[c.layer].size(); ++c.job)
      if (!board_.done(loads[c.layer][c.job])) return false;
  return true;
}

void PagedPipeline::run_layers(const PagedIteration& it, double layer_s, const PassEnds& ends,
                               const std::vector<std::vector<JobId>>& loads,
                               GpuStream& gpu, const std::vector<size_t>& group, size_t L) {
  LoadCursor in;
  for (size_t l = 0; l < L; ++l) {
    if (merges_layers() && it.pushes.empty() && l > 0 && loads_in_from(loads, l, in)) {
      double rest = 0;
      for (size_t k = l; k < L; ++k) rest += layer_s;
      rest += ends.last_s;
      merged_layers(it, gpu, group, rest, static_cast<int64_t>(l), L - 1, L - l);
      return;
    }
    if (stream_weights_) {
      // The next layer's load is issued now, across iterations too while requests remain.
      auto st = [this](size_t a, size_t b) -> Stream& { return tp_.stream(a, b); };
      const JobId w = s_.weights->issue(static_cast<uint32_t>(l), static_cast<int32_t>(it.index),
                                        l + 1 < L || it.more_after, board_, st);
      s_.weights->await(w, board_);
    }
    for (JobId j : loads[l]) board_.wait(j);
    kernel(it, gpu, layer_s + (l == 0 ? ends.first_s : 0.0), static_cast<int64_t>(l), l);
    all_reduce(it, group, 1);
    push_layer(it, static_cast<uint32_t>(l));
  }
  // The head samples after the last layer, whose KV is already on its way.
  if (ends.last_s > 0) kernel(it, gpu, ends.last_s, static_cast<int64_t>(L - 1), L - 1);
}

// The layer's KV of the iteration's chunk exists on every rank once its
// kernel and all-reduces are done (the next layer's input is ready then
// too). What was computed while the receiver had no room goes with it, in
// one transfer.
// Through pipeline stages, the stage computing (stage_) sends from its own
// GPUs its layers' KV.
void PagedPipeline::push_layer(const PagedIteration& it, uint32_t layer) {
  for (const PushChunk& c : it.pushes) {
    KvPush& p = *c.push;
    KvPush::Stage& st = p.stages[stage_];
    st.computed += c.tokens;
    if (!p.room) continue;
    const double bytes = double(st.computed - st.sent) * p.token_layer_bytes;
    st.last = tp_.move_stage(stages_, stage_, s_.gpu_dev, p.to, bytes, "kv push",
                             static_cast<int32_t>(stage_first_layer_ + layer));
    st.sent = st.computed;
  }
}

// The layers' kernels ran one by one would alternate with their
// all-reduces, so their work is spread over the kernel and the all-reduces
// after it: the GPU's power over a window is what the layer-by-layer run
// gives (it would otherwise peak in the merged kernel and drop after it).
void PagedPipeline::merged_layers(const PagedIteration& it, GpuStream& gpu, const std::vector<size_t>& group,
                                  double seconds, int64_t layer, size_t last, size_t layers) {
  const GpuStream::Span k = kernel(it, gpu, seconds, layer, last, false);
  all_reduce(it, group, layers);
  gpu.place_work(seconds, k.t0, sim_now());
}

// On the timeline: "iter <i>" (all layers), "iter <i> L<l>" or "iter <i> L<l>-<last>".
GpuStream::Span PagedPipeline::kernel(const PagedIteration& it, GpuStream& gpu, double seconds, int64_t layer,
                                      size_t last, bool place_work) {
  const GpuStream::Span span = gpu.run(seconds, place_work);
  if (!gpu.traced()) return span;
  std::string name = "iter " + std::to_string(it.index);
  if (layer >= 0) name += " L" + std::to_string(layer);
  if (layer >= 0 && last > static_cast<size_t>(layer)) name += "-" + std::to_string(last);
  json args{{"iteration", it.index}, {"layer", layer}, {"sequences", it.seqs.size()}, {"computed_tokens", it.computed_tokens}};
  if (layer >= 0 && last > static_cast<size_t>(layer)) args["last_layer"] = last;
  gpu.slice(name, span, args);
  return span;
}

// Megatron-style tensor parallelism: the attention block's and the MLP's
// outputs are summed over the ranks, two all-reduces of every token's hidden
// state per layer, on the critical path (nothing overlaps them), as flows
// that share links with the KV's copies. The all-reduces after a kernel go
// as one set of flows carrying all their bytes and latency steps (exact
// while nothing else moves; a flow per all-reduce made an 80-layer model's
// serving hour minutes of SimGrid work). An iteration run as one kernel for
// all layers pays its layers' all-reduces after it.
void PagedPipeline::all_reduce(const PagedIteration& it, const std::vector<size_t>& group, size_t layers) {
  if (group.size() < 2) return;
  double tokens = 0;
  for (const KernelSeq& q : it.seqs) tokens += q.tokens;
  const double bytes = tokens * s_.tp_allreduce_bytes_per_token;
  const CollectiveAlgorithm algo = s_.tp_switch ? CollectiveAlgorithm::Switch : CollectiveAlgorithm::Ring;
  c_.allreduce_s += allreduce_repeated(platform_, group, bytes, algo, 2 * layers, s_.tp_alone);
  c_.allreduce_bytes += bytes * static_cast<double>(2 * layers);
}

}  // namespace kvtier
