// Layer-ahead prefetch (HiFC, AIOS, FlexGen's overlap): while layer l
// computes, the blocks of layer l+depth are selected and fetched.
#include "policies/policy.h"

namespace kvtier {

class LayerAheadPrefetch : public PrefetchPolicy {
 public:
  static ParamList params() { return {integer("depth", 1, "layers fetched ahead of the one computing", 0, 64)}; }
  explicit LayerAheadPrefetch(const json& p) : depth_(static_cast<uint32_t>(get_int(p, "depth"))) {}
  uint32_t depth() const override { return depth_; }

 private:
  uint32_t depth_;
};
KVTIER_REGISTER(PrefetchPolicy, LayerAheadPrefetch, "layer_ahead", "fetch layer l+depth while layer l computes");

}  // namespace kvtier
