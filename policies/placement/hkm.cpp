// HillInfer's HKM time pinning (seed 000: new tokens are "volatile" and
// pinned in host DRAM): the newest alpha fraction of each (seq, layer)'s
// blocks is placed in the warm tier and held there (holds() is true while a
// block is among the newest; eviction "hkm" never demotes such a block out
// of the warm tier). Older prompt blocks go to the cold tier.
//
// During decode every new block is the newest, so place() sends it to the
// warm tier. For a prompt allocated at once, place_in(b, final_blocks)
// knows where b ends up and sends the older (1 - alpha) to the cold tier.
// As generation goes on, blocks age out of the pinned window and become
// ordinary warm-pool blocks, which eviction demotes by hit rate.
#include "policies/hkm.h"
#include "policies/policy.h"

namespace kvtier {

class HkmPlacement : public PlacementPolicy {
 public:
  static ParamList params() {
    ParamList p = TimePin::params();
    p.push_back(integer("cold_tier", -1, "tier for the older prompt blocks; -1 = the lowest tier", -1, 253));
    return p;
  }
  explicit HkmPlacement(const json& p) : pin_(TimePin::from(p)), cold_(int(get_int(p, "cold_tier"))) {}

  void setup(const BlockTable& table) override {
    int n = int(table.tiers.size());
    warm_ = TierId(n == 0 ? 0 : std::min<int>(pin_.warm, n - 1));
    cold_tier_ = TierId(cold_ < 0 || cold_ >= n ? std::max(n - 1, 0) : cold_);
  }
  TierId place(BlockId, const BlockTable&) override { return warm_; }  // the newest block is pinned
  TierId place_in(BlockId b, uint32_t final_blocks, const BlockTable& table) override {
    uint32_t i = table.index_of(b);
    uint32_t n = final_blocks > i ? final_blocks : i + 1;
    return pin_.pinned(b, n, table) ? warm_ : cold_tier_;
  }
  bool holds(BlockId b, TierId t, const BlockTable& table) const override {
    return t == warm_ && pin_.pinned(b, table);
  }

 private:
  TimePin pin_;
  int cold_;
  TierId warm_ = 1, cold_tier_ = 2;
};
KVTIER_REGISTER(PlacementPolicy, HkmPlacement, "hkm",
                "HillInfer HKM time pinning: the newest alpha of each (seq, layer) goes to and stays in the warm tier");

}  // namespace kvtier
