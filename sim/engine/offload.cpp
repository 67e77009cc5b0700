#include "sim/engine/offload.h"

#include "models/cpu_attention.h"
#include "sim/engine/kernel_cost.h"
#include "sim/platform/sim_clock.h"
#include "sim/platform/weight_stream.h"

namespace kvtier {

WeightOffload::WeightOffload(EngineSetup& s, TransferPlanner& planner, JobBoard& board)
    : s_(s), tp_(planner), board_(board) {}

// Pageable host memory (FlexGen's CPU cache): the thread that launches the
// kernels copies what a layer reads from host memory into pinned buffers, a
// GPU batch's share at a time, each before it launches the next kernel
// (run_layer). The first share is copied now and the layer's transfer
// starts after it; the others follow the kernels.
void WeightOffload::pin_first_share(double host_read_bytes, uint64_t step, uint32_t layer, size_t gpu_ep) {
  if (s_.weights->plan().pin_cache) return;
  const uint32_t G = s_.weights->plan().gpu_batches;
  const JobId first = pin_now(host_read_bytes / G, step, layer);
  pin_rest_bytes_ += host_read_bytes * (G - 1) / G;
  tp_.depend(static_cast<size_t>(s_.weights->homes().dram_tier), gpu_ep, first);
}

// Blocks predicted for a later step are read from pageable host memory as
// demand reads are: through a pinned buffer the same thread fills. The
// layer's predicted bytes are copied as one share, all before their
// transfer starts: they are one transfer from host memory, and no GPU batch
// of this layer reads them, so there is no later kernel to copy a part
// before. That is the simplest model in which no byte moves before its copy.
void WeightOffload::pin_predicted(double host_read_bytes, uint64_t step, uint32_t layer) {
  if (s_.weights->plan().pin_cache) return;
  tp_.depend_prefetch(static_cast<size_t>(s_.weights->homes().dram_tier), pin_now(host_read_bytes, step, layer));
}

// The copying thread launches the kernels: the next kernel launches after
// every copy issued before it (run_layer waits for pins_).
JobId WeightOffload::pin_now(double bytes, uint64_t step, uint32_t layer) {
  const JobId j = s_.weights->pin_copy(bytes, static_cast<int32_t>(step), layer, board_, cpu_stream());
  pins_.push_back(j);
  return j;
}

// A prefill kernel's weights: the layer's load first (with the first
// sequences of the layer), pageable weights' copy of the next layer into a
// pinned buffer before this launch, and hidden states out and back at both
// sub-layers (as in decode). Returns the restore pass of compressed weights
// to add to the kernel, once per GPU batch.
double WeightOffload::before_prefill_kernel(uint32_t layer, bool first_chunk, double tokens) {
  double extra = 0;
  if (first_chunk) {
    wait_weights(layer, -1);
    if (s_.weights->plan().overlap) s_.weights->await(s_.weights->ahead_staging(), board_);
    const WeightPlan& p = s_.weights->plan();
    if (p.compress_weights) extra = p.gpu_batches * weight_restore_s(s_);
  }
  if (s_.weights->plan().activations_on_cpu) move_hidden(2.0 * 2.0 * s_.model.model_dim() * tokens, -1, layer);
  return extra;
}

// compress_cache: the prompt KV that stays on the GPU is quantized there,
// by the next kernel.
void WeightOffload::compress_kept_prompt(double tokens) {
  if (s_.weights->plan().compress_cache && s_.prefill_compute)
    codec_s_ += s_.weights->quant().compress_s(tokens * double(s_.model.kv_bytes_per_token_layer()), s_.gpu_mem_Bps);
}

void WeightOffload::wait_weights(uint32_t layer, int32_t step) { await_weights(issue_weights(layer, step)); }

JobId WeightOffload::issue_weights(uint32_t layer, int32_t step) {
  auto st = [this](size_t a, size_t b) -> Stream& { return tp_.stream(a, b); };
  return s_.weights->issue(layer, step, ++issued_ < iterations_, board_, st);
}

void WeightOffload::await_weights(JobId j) { s_.weights->await(j, board_); }

void WeightOffload::run_layer(const LayerSlot& slot, uint64_t k, JobId weights, const Kernel& kernel) {
  const uint32_t L = s_.model.layers, layer = static_cast<uint32_t>(k % L);
  const int32_t step = static_cast<int32_t>(k / L);
  await_weights(weights);
  WeightStream& w = *s_.weights;
  const WeightPlan& p = w.plan();
  const GroupQuant& q = w.quant();
  // The batch as gpu_batches GPU batches (FlexGen's zig-zag): each reads the
  // layer's weights from GPU memory and its own share of the KV.
  const double G = p.gpu_batches;
  const double tok = static_cast<double>(s_.model.kv_bytes_per_token_layer());
  const double d = s_.model.model_dim();
  const double gpu_tokens = static_cast<double>(slot.kv_tokens) / G, cpu_tokens = static_cast<double>(slot.cpu_tokens) / G;
  const double wb = s_.model.weight_bytes_per_layer();
  const double restore_w = weight_restore_s(s_);
  const double restore_kv = p.compress_cache ? q.decompress_s(gpu_tokens * tok, s_.gpu_mem_Bps) : 0.0;
  const double seqs = static_cast<double>(s_.batch) / G;
  for (uint32_t g = 0; g < p.gpu_batches; ++g) {
    // Pageable host memory (FlexGen's CPU cache; weights with --pin-weight
    // 0): the thread that launches this GPU batch first copies into pinned
    // buffers what the GPU reads next from host memory (FlexGen: the next
    // layer's weights with the first GPU batch, then a GPU batch's KV), and
    // only then launches the kernel.
    if (g == 0 && p.overlap) w.await(w.ahead_staging(), board_);
    // The KV copies into pinned buffers (select issued the first share of
    // each layer it selected since the last kernel, and the blocks it
    // predicted; the other shares go one before each later GPU batch).
    if (g == 0) {
      for (JobId j : pins_) board_.wait(j);
      pins_.clear();
    } else if (pin_rest_bytes_ > 0) {
      board_.wait(w.pin_copy(pin_rest_bytes_ / (G - 1), step, layer, board_, cpu_stream()));
    }
    // Hidden states in host memory: FlexGen stores the previous GPU batch's
    // output and loads the next one's input on the kernels' own CUDA stream,
    // just before this GPU batch's kernels, at each of the layer's two
    // sub-layers (attention, MLP): d FP16 values per sequence each way.
    if (p.activations_on_cpu) move_hidden(2.0 * 2.0 * d * seqs, step, layer);
    const double gemm = s_.model.weight_flops_per_token_layer() * seqs, attn = 4.0 * gpu_tokens * d;
    // Each GPU batch goes through the embedding before the first layer and
    // the head after the last, as through every layer (FlexGen's InputEmbed
    // and OutputEmbed), the head reading its whole matrix each time.
    const double ends = (layer == 0 ? embedding_kernel_s(s_, KernelPhase::Decode, seqs) : 0.0) +
                        (layer + 1 == L ? head_kernel_s(s_, KernelPhase::Decode, seqs) : 0.0);
    kernel(kernel_s(s_, KernelPhase::Decode, gemm, attn, wb, gpu_tokens * tok) + ends + restore_w + restore_kv +
           (g == 0 ? slot.extra_gpu_s : 0.0));
    if (p.cpu_attention && cpu_tokens > 0) {
      // Between the QKV projection and the output projection: the query
      // goes to the CPU (the new K and V go with the append), the output
      // comes back, and the GPU waits for it.
      cpu_attention(cpu_tokens, 2.0 * d * seqs, 2.0 * d * seqs, step, layer);
    }
    // FlexGen synchronises every stream at the end of each (layer, GPU
    // batch) iteration (flex_opt.py: sync() in the generation loop), so the
    // next layer's weights, issued with this layer's first GPU batch, must
    // have arrived before the second one starts.
    if (g == 0 && p.overlap && p.gpu_batches > 1) w.await(w.ahead(), board_);
  }
  pin_rest_bytes_ = 0;
}

void WeightOffload::cpu_attention(double tokens, double query_bytes, double output_bytes, int32_t step, uint32_t layer) {
  WeightStream& w = *s_.weights;
  const double d = s_.model.model_dim();
  const double sec = cpu_attention_s(cpu_attention_cost(tokens, d, static_cast<double>(s_.model.kv_bytes_per_token_layer())),
                                     w.cpu_flops, w.cpu_mem_Bps);
  const size_t gpu = s_.gpu_dev, host = static_cast<size_t>(w.homes().dram);
  auto submit = [&](Stream& st, TransferJob job) {
    job.step = step;
    job.layer = static_cast<int32_t>(layer);
    const JobId id = job.id;
    st.submit(std::move(job));
    return id;
  };
  const JobId q = submit(tp_.activations(true), TransferJob{board_.create(), gpu, host, query_bytes, {}, -1, 0, "activations"});
  const JobId a = submit(cpu_stream(), TransferJob{board_.create(), 0, 0, 0, {q}, s_.cpu_dev, sec, "attention"});
  const JobId out = submit(tp_.activations(false), TransferJob{board_.create(), host, gpu, output_bytes, {a}, -1, 0, "activations"});
  board_.wait(out);
  w.cpu_attention_s += sec;
}

void WeightOffload::move_hidden(double bytes, int32_t step, uint32_t layer) {
  const size_t gpu = s_.gpu_dev, host = static_cast<size_t>(s_.weights->homes().dram);
  TransferJob out{board_.create(), gpu, host, bytes, {}, -1, 0, "hidden"};
  TransferJob in{board_.create(), host, gpu, bytes, {out.id}, -1, 0, "hidden"};
  out.step = in.step = step;
  out.layer = in.layer = static_cast<int32_t>(layer);
  const JobId done = in.id;
  tp_.activations(true).submit(std::move(out));
  tp_.activations(false).submit(std::move(in));
  const double t0 = sim_now();
  board_.wait(done);
  s_.weights->hidden_wait_s += sim_now() - t0;
}

}  // namespace kvtier
