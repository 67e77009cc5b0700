// FlexGen's placement and block schedule (flex_opt.py's Policy): the weight
// percentages w_gpu / w_cpu / w_disk of every layer, num_gpu_batches GPU
// batches per weight load, --overlap, --cpu-cache-compute, the activations'
// home, --compress-weight, --compress-cache and --pin-weight (with the
// CPU cache's pageable memory). Percentages must add up to 100.
#include <cmath>
#include <string>

#include "policies/weights.h"

namespace kvtier {

class OffloadWeights : public WeightPolicy {
 public:
  static ParamList params() {
    return {
        num("gpu_percent", 0.0, "share of each layer's weights kept on the GPU, percent", 0, 100),
        num("cpu_percent", 100.0, "share in host DRAM, streamed to the GPU layer by layer, percent", 0, 100),
        num("disk_percent", 0.0, "share on disk, read into DRAM and on to the GPU layer by layer, percent", 0, 100),
        integer("gpu_batches", 1, "GPU batches per weight load (FlexGen num_gpu_batches); must divide workload.batch", 1, 4096),
        boolean("overlap", true, "load layer l+1's weights while layer l computes (FlexGen --overlap)"),
        boolean("cpu_attention", false,
                "attention over KV in host memory (or on disk, read into it) runs on the CPU (FlexGen --cpu-cache-compute)"),
        str("activations", "gpu", "where hidden states live between layers (FlexGen act_gpu/act_cpu 100)", {"gpu", "cpu"}),
        str("compress_weights", "none",
            "weight compression: none, or int4 (group-wise 4-bit, group 64; FlexGen --compress-weight); needs 16-bit weights",
            {"none", "int4"}),
        str("compress_cache", "none",
            "KV compression in every tier: none, or int4 (group-wise 4-bit, group 64; FlexGen --compress-cache); needs 16-bit KV",
            {"none", "int4"}),
        boolean("pin_weights", true,
                "the DRAM share of the weights is in pinned host memory (FlexGen --pin-weight); false: the CPU first "
                "copies each layer's share into a pinned buffer, and the layer's first GPU batch launches after that"),
        boolean("pin_cache", true,
                "KV in host memory is pinned; false (FlexGen's CPU cache, never pinned): the CPU copies each GPU batch's KV "
                "read from host memory into a pinned buffer before its kernel launches"),
    };
  }
  explicit OffloadWeights(const json& p) {
    const double g = get_num(p, "gpu_percent"), c = get_num(p, "cpu_percent"), d = get_num(p, "disk_percent");
    if (std::fabs(g + c + d - 100.0) > 1e-9)
      throw ConfigError("policies.weights: gpu_percent + cpu_percent + disk_percent = " + std::to_string(g + c + d) +
                        "; expected 100");
    plan_.gpu = g / 100.0;
    plan_.cpu = c / 100.0;
    plan_.disk = d / 100.0;
    plan_.gpu_batches = static_cast<uint32_t>(get_int(p, "gpu_batches"));
    plan_.overlap = p.at("overlap").get<bool>();
    plan_.cpu_attention = p.at("cpu_attention").get<bool>();
    plan_.activations_on_cpu = p.at("activations") == "cpu";
    plan_.compress_weights = p.at("compress_weights") == "int4";
    plan_.compress_cache = p.at("compress_cache") == "int4";
    plan_.pin_weights = p.at("pin_weights").get<bool>();
    plan_.pin_cache = p.at("pin_cache").get<bool>();
  }
  WeightPlan plan() const override { return plan_; }

 private:
  WeightPlan plan_;
};
KVTIER_REGISTER(WeightPolicy, OffloadWeights, "offload",
                "FlexGen: weights split over GPU/DRAM/disk and streamed per layer, GPU batches per load, CPU attention");

}  // namespace kvtier
