// HillInfer's HKM promotion. The GPU is the hot pool: every block attention
// reads from below moves up to the GPU (as far as it fits; its copy stays
// below, so demoting it again is free). A cold block whose hit rate over the
// last `window` steps reaches `threshold` ("when a cold token's access
// frequency jumps, it moves to host DRAM at once", seed 000) goes up to the
// warm tier first, and from there on to the GPU.
//
// The hit-rate table (policies/hkm.h) is recorded from on_access, which the
// engine calls for every use, and from promote() itself (a hit is idempotent
// within a step), so it also works when the engine only calls promote().
#include "policies/hkm.h"
#include "policies/policy.h"

namespace kvtier {

class HkmPromotion : public PromotionPolicy {
 public:
  static ParamList params() {
    return {integer("window", 16, "hit-rate window in decode steps (at most the table's 16)", 1, 16),
            num("threshold", 0.25, "hit rate (hits / window) at or above which a cold block is promoted", 0.0, 1.0),
            integer("warm_tier", 1, "tier cold blocks are promoted to (host DRAM when the GPU is tier 0)", 0, 253)};
  }
  explicit HkmPromotion(const json& p)
      : window_(uint32_t(get_int(p, "window"))), threshold_(get_num(p, "threshold")), warm_(TierId(get_int(p, "warm_tier"))) {}

  void setup(const BlockTable& table) override { hits_.setup(table.size(), window_); }
  void on_access(BlockId b, TierId, const BlockTable& table) override { hits_.hit(b, table.step); }
  void on_release(BlockId b, const BlockTable&) override { hits_.forget(b); }
  bool promote(BlockId b, TierId from, const BlockTable& table) override {
    hits_.hit(b, table.step);
    return from > 0;
  }
  TierId promote_to(BlockId b, TierId from, const BlockTable& table) const override {
    return from > warm_ && hits_.rate(b, table.step) >= threshold_ - 1e-12 ? warm_ : 0;
  }

  double hit_rate(BlockId b, uint32_t step) const { return hits_.rate(b, step); }

 private:
  uint32_t window_;
  double threshold_;
  TierId warm_;
  HitRateTable hits_;
};
KVTIER_REGISTER(PromotionPolicy, HkmPromotion, "hkm",
                "HillInfer HKM: blocks read move up to the GPU hot pool; a cold block with a hit-rate jump goes by the warm tier");

}  // namespace kvtier
