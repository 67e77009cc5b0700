// Where a model's weights live and how a decode step streams them (FlexGen's
// policy, Sheng et al. ICML'23): per layer, fractions of the weights on the
// GPU, in host DRAM and on disk; the batch split into GPU batches that one
// weight load serves (the zig-zag block schedule); whether loads overlap
// compute; where attention over host-resident KV runs; activations' home;
// group-wise 4-bit weight compression. One interface and a registry, like
// the policy families in policies/policy.h.
#pragma once

#include <cstdint>
#include <memory>

#include "models/registry.h"

namespace kvtier {

struct WeightPlan {
  // Shares of each layer's weights, summing to 1.
  double gpu = 1, cpu = 0, disk = 0;
  // The batch runs as gpu_batches GPU batches of batch / gpu_batches
  // sequences; layer by layer, one weight load serves all of them.
  uint32_t gpu_batches = 1;
  // Weights of layer l+1 load while layer l computes (FlexGen --overlap);
  // false: each layer's load waits for the previous layer's compute.
  bool overlap = true;
  // Attention over KV that lives in host DRAM (or on disk, read into DRAM)
  // runs on the CPU; only activations cross PCIe (FlexGen --cpu-cache-compute).
  bool cpu_attention = false;
  // Hidden states between layers live in host DRAM (FlexGen act_cpu 100).
  bool activations_on_cpu = false;
  // Group-wise 4-bit weights (FlexGen --compress-weight): stored and moved
  // compressed, restored on the GPU at every use (models/group_quant.h).
  bool compress_weights = false;
  // Group-wise 4-bit K and V in every tier, the GPU's included (FlexGen
  // --compress-cache): moved compressed, quantized on the GPU when written,
  // restored on the GPU whenever attention reads them.
  bool compress_cache = false;
  // The host memory the weights' DRAM share and host-resident KV sit in is
  // pinned (page-locked), so the GPU copies from it directly. Pageable
  // memory is first copied into a pinned buffer by the CPU thread that
  // launches the GPU's work (PyTorch's pin_memory(), as FlexGen does for
  // weights with --pin-weight 0 and always for its CPU cache), which holds
  // back the next launch.
  bool pin_weights = true;
  bool pin_cache = true;
  bool all_on_gpu() const { return cpu == 0 && disk == 0; }
};

class WeightPolicy {
 public:
  virtual ~WeightPolicy() = default;
  virtual WeightPlan plan() const = 0;
};
KVTIER_REGISTRY_FAMILY(WeightPolicy, "weight policy")

}  // namespace kvtier
