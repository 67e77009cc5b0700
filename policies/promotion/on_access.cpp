// Cache semantics: a block attention reads from a lower tier moves up to the
// top tier (evicting there as needed), as in vLLM-style swap-in.
#include "policies/policy.h"

namespace kvtier {

class PromoteOnAccess : public PromotionPolicy {
 public:
  static ParamList params() { return {}; }
  explicit PromoteOnAccess(const json&) {}
  bool promote(BlockId, TierId, const BlockTable&) override { return true; }
  bool every_block_to_top() const override { return true; }
  // It records nothing of an access (the default tells on_access of each in turn).
  void on_access_run(const BlockId*, size_t, const BlockTable&) override {}
};
KVTIER_REGISTER(PromotionPolicy, PromoteOnAccess, "on_access", "every block read from a lower tier moves to the top tier");

}  // namespace kvtier
