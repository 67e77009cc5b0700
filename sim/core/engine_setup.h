// What a run is, once its configuration has been validated: the hardware and
// its topology, the model, the workload's shape, the policies, the attention
// source, and which devices play which role. Built by Simulation's
// constructor (sim/engine/engine.cpp) before SimGrid starts; read by the KV store,
// the transfer planner and the layer pipeline while the run goes on.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "models/fpga_ku15p.h"
#include "models/hardware.h"
#include "models/llm.h"
#include "models/thermal.h"
#include "models/topology.h"
#include "policies/common.h"
#include "policies/policy.h"
#include "traces/attention_trace.h"

namespace kvtier {

// The weights' streaming (sim/platform/weight_stream.h) is owned here but
// built and run by the platform, so this file names it only.
class WeightStream;
struct WeightStreamDeleter {
  void operator()(WeightStream* w) const;  // defined beside WeightStream
};
using WeightStreamPtr = std::unique_ptr<WeightStream, WeightStreamDeleter>;

struct EnginePolicies {
  std::unique_ptr<EvictionPolicy> evict;
  std::unique_ptr<PromotionPolicy> promote;
  std::unique_ptr<PlacementPolicy> place;
  std::unique_ptr<PrefetchPolicy> prefetch;
  std::unique_ptr<EvaluationPolicy> eval;
  std::unique_ptr<CompressionPolicy> compress;
  // policies.*: the families `defaults` names (with its default for each
  // one absent), the KV families created from their registries; any other
  // key is a ConfigError naming it.
  void create(json& pol, const json& defaults);
  // Once the block table has its shape: eviction bound to placement, then
  // every policy's setup().
  void setup(const BlockTable& t);
  // Heap bytes the policies keep per block of a table shaped like `shape`,
  // measured on fresh copies of them set up on two small tables (one and two
  // sequences of its layers and blocks): what the real setup will add.
  double state_bytes_per_block(const BlockTable& shape) const;
  // policies.* as created (defaults filled).
  const json& spec() const { return spec_; }

 private:
  json spec_;  // policies.* as created, to make the copies from
};

struct EngineSetup {
  Hardware hw;
  std::unique_ptr<Topology> topo;
  LlmSpec model;

  // The workload: `batch` sequences of `ctx` prompt tokens, `steps` decode steps.
  uint32_t batch = 0, ctx = 0, steps = 0, bt = 0;
  uint32_t warmup = 0;  // decode steps left out of TPOT and tokens/s
  // workload.transfer_unit: whole blocks (paged KV) or the tokens a block
  // holds (FlexGen's tensors): what a block's moves and attention cost.
  bool tokens_unit = false;
  bool prefill_compute = false, prefill_load = false;
  uint32_t query_tokens = 0;
  bool overlap_next_load = false;
  // Serving with the KV in tiers: `batch` is as many sequences as requests
  // can run at once, which need not all fit together; the scheduler admits
  // them against the tiers' capacity, so the KV store does not require room for all.
  bool admitted_by_scheduler = false;
  // Where that is so, what can be live at once bounds the block table: the
  // KV store may cut each sequence's range into chunks of 2^kv_chunk_shift
  // blocks (0: one range per sequence and layer, sized for the longest),
  // of which at most kv_trace_chunks are ever held together (each sequence
  // that can run at once holding the longest requests' chunks).
  uint32_t kv_chunk_shift = 0;
  uint64_t kv_trace_chunks = 0;
  // serving.kv_unit "all_layers": a block holds its tokens' KV of every layer
  // and is placed, evicted, promoted and fetched as one unit (vLLM's swap
  // space, Mooncake Store, LMCache): the block table has one KV layer of
  // model.kv_bytes_per_token() per token. False: a block per layer.
  bool kv_all_layers = false;
  // serving.kv_layers "representative": blocks per layer, but the block table
  // holds layer 0's only, with each tier's room for one layer; layer 0's
  // decisions stand for every layer's and its transfers are issued again for
  // each (LayerPipeline). Exact where every layer decides alike.
  bool kv_representative = false;
  // The layers the block table (and the codecs per tier) has: model.layers,
  // or 1 with whole-model blocks or a representative layer.
  uint32_t kv_layers() const { return kv_all_layers || kv_representative ? 1u : model.layers; }
  // Model layers each block-table layer stands for in counts of blocks
  // (accesses, hits, moves): L with a representative layer, else 1.
  uint32_t represented_layers() const { return kv_representative ? model.layers : 1u; }
  // KV bytes per token of one block-table layer.
  uint64_t kv_unit_bytes_per_token() const {
    return kv_all_layers ? model.kv_bytes_per_token() : model.kv_bytes_per_token_layer();
  }

  EnginePolicies pol;
  std::vector<CompressionSpec> codec;  // per (tier, layer)
  std::unique_ptr<AttentionSource> trace;
  std::string trace_name;

  // A tensor-parallel instance of a cluster: its ranks' GPUs (the first is
  // gpu_dev, which the run follows; the model above is one rank's shard;
  // empty: one GPU), the bytes of one all-reduce per token of an iteration
  // (the hidden state), two all-reduces per layer, through a switch
  // (NVSwitch) or around a ring.
  std::vector<size_t> tp_gpus;
  double tp_allreduce_bytes_per_token = 0;
  bool tp_switch = false;
  bool tp_alone = false;  // nothing else crosses the all-reduces' links (sim/platform/collective.h)

  // Devices by role.
  std::vector<size_t> tier_dev;  // per tier: its device
  size_t gpu_dev = 0;
  bool gpu_tier = false;  // the GPU's memory is tier 0
  double gpu_flops = 0, gpu_mem_Bps = 0, gpu_launch_s = 0;
  const DeviceModel* gpu_model = nullptr;
  DeviceModel::KernelRates gpu_rates;  // per kernel shape, read once (bind_gpu)
  int cpu_dev = -1, fpga_dev = -1;        // scoring and codec devices, if the hardware has them
  int ssd_dev = -1, host_mem_dev = -1;    // APP: the SmartSSD tier next to the FPGA; host memory
  // Host memory a CPU codec works in when the data comes from or goes to
  // storage (the CPU cannot decompress in place on a drive): the first DRAM
  // device, else the CPU's own port; -1 without a CPU.
  int staging_dev = -1;
  // The GPU's memory after reserved_GB and the weights it holds: room for the
  // GPU tier's KV and the staging buffers KV streamed through the GPU lands in.
  double gpu_free_bytes = 0;
  ScoringRates rates;
  double fpga_compute_Bps = 0;  // the FPGA's kernel alone (its NAND read is a transfer)
  // APP with the key copy in the FPGA's memory (ScoringSplit::
  // key_copy_in_fpga_memory): that memory, and the SmartSSD's tier whose
  // blocks' keys it holds (-1: the copy is on NAND).
  FpgaMemory fpga_mem;
  int key_copy_tier = -1;
  // Near-storage attention (ScoringSplit::attends_in_storage): the SmartSSD's
  // tier, whose blocks its FPGA attends in place (-1: none), and the FPGA's
  // attention kernel rate in bytes of KV per second at its nominal clock.
  int storage_attention_tier = -1;
  double fpga_attention_Bps = 0;
  std::unique_ptr<ThermalModel> thermal;
  // policies.weights other than "gpu": where the weights live and how they
  // stream (null: every weight on the GPU, one batch, the default schedule).
  WeightStreamPtr weights;
  // The weights' bytes where they sit (install_weights fills them with
  // `weights`): the GPU's share with the buffers streamed layers land in,
  // and each tier's share below it. Without policies.weights every weight
  // is on the GPU.
  double weight_gpu_bytes = 0;
  std::vector<double> weight_tier_bytes;  // per tier of hardware.tiers
  // policies.weights.compress_cache: the group-wise codec every tier stores the KV with.
  bool weight_cache_compressed = false;
  CompressionSpec weight_cache_codec;
  double gpu_weight_bytes() const { return weights ? weight_gpu_bytes : model.weight_bytes(); }
  double tier_weight_bytes(size_t t) const { return weights && t < weight_tier_bytes.size() ? weight_tier_bytes[t] : 0.0; }

  size_t tiers() const { return tier_dev.size(); }
  // The device hardware.gpu names: its model and rates; ConfigError if it
  // cannot run attention.
  void bind_gpu() {
    gpu_dev = static_cast<size_t>(hw.device_index(hw.gpu));
    gpu_model = hw.devices[gpu_dev].model.get();
    gpu_flops = gpu_model->flops();
    gpu_mem_Bps = gpu_model->memory_Bps();
    gpu_launch_s = gpu_model->launch_overhead_s();
    gpu_rates = gpu_model->kernel_rates();
    if (gpu_flops <= 0 || gpu_mem_Bps <= 0)
      throw ConfigError("hardware.gpu: device '" + hw.gpu + "' cannot run attention (no FLOP/s or memory bandwidth)");
  }
  // The first cpu device, the first FPGA that scores keys, and the host
  // memory a CPU codec stages through (the first DRAM, else the CPU's port).
  void bind_host_devices();
  // Blocks a sequence has per layer once decode step `step` has its token.
  uint32_t blocks_at(uint32_t step) const { return (ctx + step + bt) / bt; }
  // Stored bytes / raw bytes of a block of `layer` in `tier`.
  double fraction(size_t tier, uint32_t layer) const { return codec[tier * kv_layers() + layer].stored_fraction(); }
};

}  // namespace kvtier
