// Every weight on the GPU, one batch, no streaming: the schedule kvtier runs
// by default (the model's weights are part of the GPU's memory use).
#include "policies/weights.h"

namespace kvtier {

class GpuWeights : public WeightPolicy {
 public:
  static ParamList params() { return {}; }
  explicit GpuWeights(const json&) {}
  WeightPlan plan() const override { return WeightPlan{}; }
};
KVTIER_REGISTER(WeightPolicy, GpuWeights, "gpu", "all weights on the GPU (the default)");

}  // namespace kvtier
