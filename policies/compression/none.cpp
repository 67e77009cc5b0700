// No compression: every tier stores FP16 KV as is.
#include "policies/policy.h"

namespace kvtier {

class NoCompression : public CompressionPolicy {
 public:
  static ParamList params() { return {}; }
  explicit NoCompression(const json&) {}
  CompressionSpec spec(TierId, uint32_t) const override { return {}; }
};
KVTIER_REGISTER(CompressionPolicy, NoCompression, "none", "KV stored uncompressed in every tier");

}  // namespace kvtier
