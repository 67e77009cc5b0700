// Promote after repeated use: a block read from a lower tier moves up only
// once attention has used it at least `min_accesses` times (counting this
// use, as BlockTable::access_count has it when the engine asks); before that
// it is read through a staging buffer. Filters one-off reads out of the
// cache, like a frequency-threshold admission filter (TinyLFU-style, without
// the sketch).
#include "policies/policy.h"

namespace kvtier {

class ThresholdPromotion : public PromotionPolicy {
 public:
  static ParamList params() {
    return {integer("min_accesses", 2, "uses by attention (BlockTable::access_count) before a block moves up", 1),
            integer("to", 0, "tier the block moves to (clamped to one above where it is)", 0, 253)};
  }
  explicit ThresholdPromotion(const json& p)
      : min_(uint32_t(get_int(p, "min_accesses"))), to_(TierId(get_int(p, "to"))) {}
  bool promote(BlockId b, TierId from, const BlockTable& table) override {
    return from > 0 && table.access_count(b) >= min_;
  }
  TierId promote_to(BlockId, TierId from, const BlockTable&) const override {
    return to_ < from ? to_ : TierId(from - 1);
  }

 private:
  uint32_t min_;
  TierId to_;
};
KVTIER_REGISTER(PromotionPolicy, ThresholdPromotion, "threshold",
                "a block read from a lower tier moves up once its use count reaches min_accesses");

}  // namespace kvtier
