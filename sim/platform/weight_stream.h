// A model's weights as data (FlexGen's weight placement): each layer's
// weights sit on the GPU, in host DRAM and on disk in the shares of a
// WeightPlan; the shares not on the GPU are copied to it layer by layer,
// from DRAM directly and from disk through DRAM, on the same Streams as KV
// traffic, so weight loads and KV fetches contend for the links they share.
// The layer pipeline decides when a layer's load is issued (one layer ahead
// with overlap, just before its compute without) and waits for it.
//
// The embedding and the LM head are weights too, placed in the same shares
// (FlexGen's InputEmbed and OutputEmbed are layers of its weight list, each
// weight placed by the policy's percentages; OutputEmbed holds its own copy
// of a tied matrix): the embedding's streamed share loads with the first
// layer's, the head's with the last's.
//
// Homes: the cpu share lives in the first tier below the GPU (host memory),
// the disk share in the lowest tier. Their capacity for KV is what the
// weights (and the buffers they pass through) leave.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/group_quant.h"
#include "models/hardware.h"
#include "models/llm.h"
#include "policies/policy.h"
#include "policies/weights.h"
#include "sim/core/engine_setup.h"
#include "sim/platform/streams.h"

namespace kvtier {

class WeightStream {
 public:
  struct Homes {
    int gpu = -1, dram = -1, disk = -1;          // devices (-1: none)
    int cpu = -1;                                // the CPU that copies pageable memory into pinned buffers
    int dram_tier = -1, disk_tier = -1;          // their tiers
  };
  // `layer_bytes`: one layer's weights as stored (compressed if the plan
  // compresses); `first_bytes`, `last_bytes`: the embedding's and the head's.
  WeightStream(const WeightPlan& plan, double layer_bytes, uint32_t layers, Homes homes, double first_bytes = 0,
               double last_bytes = 0);

  // Validates policies.weights against the hardware, the model and the
  // workload (ConfigError naming the JSON path) and builds the stream.
  // `tiers`: hardware.tiers as device indices; `compression`: the name of
  // policies.compression.
  static WeightStreamPtr from_config(const WeightPlan& plan, const Hardware& hw, const LlmSpec& model,
                                                   const std::vector<size_t>& tiers, size_t gpu_dev, int cpu_dev,
                                                   uint32_t batch, const std::string& compression);

  const WeightPlan& plan() const { return plan_; }
  const Homes& homes() const { return homes_; }
  bool streams() const { return !plan_.all_on_gpu(); }
  // Resident bytes of the whole model on each home.
  double gpu_bytes() const { return plan_.gpu * layer_bytes_ * layers_ + plan_.gpu * ends_bytes(); }
  double dram_bytes() const { return plan_.cpu * layer_bytes_ * layers_ + plan_.cpu * ends_bytes(); }
  double disk_bytes() const { return plan_.disk * layer_bytes_ * layers_ + plan_.disk * ends_bytes(); }
  // GPU buffers for streamed weights: the streamed share of the largest
  // load, and with overlap of the largest two loads in flight at once (the
  // one computing and the next loading), the embedding, the layers and the
  // head taken as FlexGen's consecutive layers.
  double gpu_staging_bytes() const { return (plan_.cpu + plan_.disk) * staged_bytes(); }
  // DRAM buffer a disk share passes through: the same loads' disk share.
  double dram_staging_bytes() const { return plan_.disk * staged_bytes(); }
  // What the load of layer `layer` brings, all shares: the layer's weights,
  // the embedding's with the first, the head's with the last.
  double load_bytes(uint32_t layer) const {
    return layer_bytes_ + (layer == 0 ? first_bytes_ : 0.0) + (layer + 1 == layers_ ? last_bytes_ : 0.0);
  }
  // Bytes tier `tier` gives to weights (resident share and staging).
  double tier_bytes(int tier) const;
  // The KV codec of every tier under compress_cache (group-wise 4-bit, on the GPU).
  CompressionSpec cache_codec(double gpu_mem_Bps) const;
  const GroupQuant& quant() const { return quant_; }

  // Issues the copy of layer `layer`'s streamed share to the GPU; `stream`
  // gives the Stream between two devices. Returns the job the layer's
  // compute waits for (kNoJob when nothing streams). Every copy into the GPU
  // of one layer goes through one Stream in order, so the last one done
  // means all are.
  // `staging` (if given) gets the copy of pageable weights into a pinned buffer (kNoJob: none).
  JobId load(uint32_t layer, int32_t step, JobBoard& board, const std::function<Stream&(size_t, size_t)>& stream,
             JobId* staging = nullptr);
  // The job layer `layer`'s compute waits for, as both engines schedule
  // loads. With overlap (FlexGen's --overlap, DeepSpeed's prefetch), the
  // next layer's load is issued as this one is handed out, when `more_after`
  // (another layer computes after this one: the next of this step, or the
  // first of the next step); the first layer's load has nothing to hide
  // behind. Without, each layer's load is issued when it is asked for.
  JobId issue(uint32_t layer, int32_t step, bool more_after, JobBoard& board,
              const std::function<Stream&(size_t, size_t)>& stream);
  // The load issued ahead by issue(), still to be handed out (kNoJob: none).
  JobId ahead() const { return next_; }
  // With pageable weights (pin_weights false): the CPU's copy of the load
  // issued ahead into a pinned buffer. The thread that copies is the one
  // that launches GPU work, so the current layer's first GPU batch launches
  // after it (kNoJob: none).
  JobId ahead_staging() const { return next_staging_; }
  // The CPU's copy of `bytes` of pageable host memory into a pinned buffer
  // (read and written once, at the host memory's rate), on the CPU's stream;
  // returns its job.
  JobId pin_copy(double bytes, int32_t step, uint32_t layer, JobBoard& board, Stream& cpu_stream);
  // Waits for j, counting the GPU's stall in wait_s.
  void await(JobId j, JobBoard& board);

  // Counters the pipeline adds to.
  double wait_s = 0;           // GPU compute stalled waiting for weights
  double cpu_attention_s = 0;  // CPU busy with attention
  double cpu_flops = 0, cpu_mem_Bps = 0;  // the CPU attention and pinning copies run at (set by from_config)
  double pin_copy_s = 0;                   // CPU busy copying pageable memory into pinned buffers
  double hidden_wait_s = 0;                // GPU waiting for hidden states to go to host memory and back
  json metrics() const;

 private:
  WeightPlan plan_;
  double layer_bytes_;
  uint32_t layers_;
  double first_bytes_ = 0, last_bytes_ = 0;
  double ends_bytes() const { return first_bytes_ + last_bytes_; }
  double staged_bytes() const {
    if (!plan_.overlap) return std::max(layer_bytes_, std::max(first_bytes_, last_bytes_));
    return std::max(2.0 * layer_bytes_,
                    std::max(layer_bytes_ + std::max(first_bytes_, last_bytes_), first_bytes_ + last_bytes_));
  }
  Homes homes_;
  GroupQuant quant_;
  double to_gpu_ = 0, from_disk_ = 0;
  uint64_t loads_ = 0;
  JobId next_ = kNoJob, next_staging_ = kNoJob;
};

// Makes `w` the run's weight stream, with the bytes it keeps on the GPU and
// in each of `tiers` tiers, which the KV store's capacities leave out.
void install_weights(EngineSetup& s, WeightStreamPtr w, size_t tiers);

}  // namespace kvtier
