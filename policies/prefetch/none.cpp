// No prefetch: a layer's blocks are fetched when the GPU reaches that layer.
#include "policies/policy.h"

namespace kvtier {

class NoPrefetch : public PrefetchPolicy {
 public:
  static ParamList params() { return {}; }
  explicit NoPrefetch(const json&) {}
  uint32_t depth() const override { return 0; }
};
KVTIER_REGISTER(PrefetchPolicy, NoPrefetch, "none", "fetch a layer's blocks only when the GPU reaches it");

}  // namespace kvtier
