// Cache semantics: a block attention reads from a lower tier moves up to the
// top tier (evicting there as needed), as in vLLM-style swap-in.
#include "policies/policy.h"

namespace kvtier {

class PromoteOnAccess : public PromotionPolicy {
 public:
  static ParamList params() { return {}; }
  explicit PromoteOnAccess(const json&) {}
  bool promote(BlockId, TierId, const BlockTable&) override { return true; }
};
KVTIER_REGISTER(PromotionPolicy, PromoteOnAccess, "on_access", "every block read from a lower tier moves to the top tier");

}  // namespace kvtier
