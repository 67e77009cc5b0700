// HillInfer's HKM eviction/demotion (arXiv 2602.18750; seed 000): the DRAM
// warm pool keeps the newest tokens (time pinning) and the blocks with a high
// hit rate; when it is full, or above its watermark (asynchronous demotion
// keeps DRAM use bounded), the least useful block by hit rate moves down to
// the SmartSSD cold pool. Blocks the placement policy holds (HKM time
// pinning: its alpha is the one parameter) never leave their tier, and
// pinned blocks (in use by a layer in flight) never leave any tier. In the
// GPU hot pool the same rule applies: the least useful block goes first, to
// the highest tier below that still holds a copy (no bytes move for a clean
// one). The watermark applies to the tiers between the top and the bottom
// (the DRAM warm pool on HillInfer's testbed).
//
// Hit rate: HitRateTable (policies/hkm.h), hits in the last `window` steps,
// updated from on_access. Finding the least useful block exactly would need a
// scan of the tier, because hit rates decay with time without events; we
// instead take, among the `candidates` least recently used eligible blocks
// of the tier, the one with the lowest hit rate (Redis-style sampled LFU).
// This is exact whenever the LRU end holds a block with no hit in the window
// (rate 0, the minimum), the common case once the pool is warm.
#include "policies/hkm.h"
#include "policies/policy.h"

namespace kvtier {

class HkmEviction : public EvictionPolicy {
 public:
  static ParamList params() {
    ParamList p;
    p.push_back(integer("window", 16, "hit-rate window in decode steps (the table keeps 16 steps of history)", 1, 16));
    p.push_back(integer("candidates", 16,
                        "eligible least-recently-used blocks compared by hit rate when choosing a victim", 1));
    p.push_back(num("watermark", 0.9,
                    "middle tiers (the warm pool): demote in the background above this fraction of capacity "
                    "(bounded DRAM use); 1 = only on demand",
                    0.0, 1.0));
    return p;
  }
  explicit HkmEviction(const json& p)
      : window_(uint32_t(get_int(p, "window"))),
        candidates_(uint32_t(get_int(p, "candidates"))),
        watermark_(get_num(p, "watermark")) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    size_t n = table.size();
    hits_.setup(n, window_);
    lists_.setup(n, table.tiers.size());
  }
  void on_insert(BlockId b, TierId t) override { lists_.push_front(b, t); }
  void on_access(BlockId b, TierId t) override {
    hits_.hit(b, table_->step);
    lists_.unlink(b);
    lists_.push_front(b, t);
  }
  void on_remove(BlockId b, TierId) override { lists_.unlink(b); }
  // A new block in b's place has no hits yet.
  void on_release(BlockId b) override { hits_.forget(b); }
  // A move between tiers is a removal and an insertion: one call, not two.
  void on_move(BlockId b, TierId, TierId to) override {
    lists_.unlink(b);
    lists_.push_front(b, to);
  }

  BlockId victim(TierId t) override {
    const BlockTable& tb = *table_;
    BlockId best = kNoBlock;
    uint32_t best_hits = 0, seen = 0;
    for (BlockId b = lists_.tail(t); b != kNoBlock && seen < candidates_; b = lists_.prev(b)) {
      if (!eligible(b, t)) continue;
      uint32_t h = hits_.hits(b, tb.step);
      if (best == kNoBlock || h < best_hits) {
        best = b;
        best_hits = h;
        if (h == 0) break;  // cannot do better; the LRU-most such block
      }
      ++seen;
    }
    return best;
  }

  double watermark(TierId t) const override {
    return t > 0 && t + 1u < table_->tiers.size() ? watermark_ : 1.0;
  }
  void bind_placement(const PlacementPolicy* p) override { placement_ = p; }
  double hit_rate(BlockId b) const { return hits_.rate(b, table_->step); }
  uint64_t table_bytes() const { return HitRateTable::table_bytes(*table_); }

 private:
  bool eligible(BlockId b, TierId t) const {
    if (table_->pinned(b)) return false;
    return !placement_ || !placement_->holds(b, t, *table_);
  }

  const PlacementPolicy* placement_ = nullptr;
  uint32_t window_, candidates_;
  double watermark_;
  const BlockTable* table_ = nullptr;
  HitRateTable hits_;
  RecencyLists lists_;
};
KVTIER_REGISTER(EvictionPolicy, HkmEviction, "hkm",
                "HillInfer HKM: demote the lowest-hit-rate block, never one the placement holds (time pinning)");

}  // namespace kvtier
