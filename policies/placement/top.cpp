// New KV goes to the top tier, where it is produced; eviction makes room.
#include "policies/policy.h"

namespace kvtier {

class TopPlacement : public PlacementPolicy {
 public:
  static ParamList params() { return {}; }
  explicit TopPlacement(const json&) {}
  TierId place(BlockId, const BlockTable&) override { return 0; }
};
KVTIER_REGISTER(PlacementPolicy, TopPlacement, "top", "new blocks go to the top tier; the eviction policy makes room");

}  // namespace kvtier
