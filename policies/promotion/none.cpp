// Offload semantics: blocks stay where they are and attention reads lower
// tiers through a staging buffer each step (FlexGen, plain DRAM/SSD offload).
#include "policies/policy.h"

namespace kvtier {

class NoPromotion : public PromotionPolicy {
 public:
  static ParamList params() { return {}; }
  explicit NoPromotion(const json&) {}
  bool promote(BlockId, TierId, const BlockTable&) override { return false; }
};
KVTIER_REGISTER(PromotionPolicy, NoPromotion, "none", "blocks never move up; lower tiers are read through a staging buffer");

}  // namespace kvtier
