// Least recently used, per tier: insert, touch, remove and victim are O(1)
// and allocate nothing. `watermark` below 1 also demotes the least recently
// used blocks in the background, after each step, while a tier other than the
// last holds more than that fraction of its capacity.
#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

class LruEviction : public EvictionPolicy {
 public:
  static ParamList params() {
    ParamSpec w = positive("watermark", 1.0,
                           "every tier but the last: demote in the background above this fraction of capacity; "
                           "1 = only on demand");
    w.max = 1.0;
    return {w};
  }
  explicit LruEviction(const json& p) : watermark_(get_num(p, "watermark")) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    lists_.setup(table.size(), table.tiers.size());
  }
  void on_insert(BlockId b, TierId t) override { lists_.push_front(b, t); }
  void on_access(BlockId b, TierId t) override {
    lists_.unlink(b);
    lists_.push_front(b, t);
  }
  void on_access_run(BlockId first, uint32_t n, TierId t) override { lists_.push_front_run(first, n, t); }
  void on_remove(BlockId b, TierId) override { lists_.unlink(b); }
  void on_move(BlockId b, TierId, TierId to) override {
    lists_.unlink(b);
    lists_.push_front(b, to);
  }
  // Pushed as a run: the same order as a push of each in turn, cut out at
  // once where they lie together.
  void on_move_range(BlockId first, uint32_t n, TierId, TierId to) override { lists_.push_front_run(first, n, to); }
  bool pinned_moves_commute() const override { return true; }
  bool forgets_departed() const override { return true; }
  BlockId victim(TierId t) override {
    // Accesses move blocks to the front, so if the tail is pinned (used by a
    // layer in progress) every block of the tier is.
    BlockId b = lists_.tail(t);
    if (b == kNoBlock || table_->pinned(b)) return kNoBlock;
    return b;
  }
  // The tail and the blocks before it, as far as the first pinned one.
  // Blocks that came in as a run lie in it as consecutive ids, so the next
  // one is guessed to be b + 1 (RecencyLists::prev_guessing): the walk
  // then does not wait for each link to load before the next block's.
  uint32_t victims(TierId t, uint32_t n, BlockId* out) override {
    uint32_t c = 0;
    for (BlockId b = lists_.tail(t); c < n && b != kNoBlock && !table_->pinned(b); b = lists_.prev_guessing(b))
      out[c++] = b;
    return c;
  }
  double watermark(TierId t) const override { return t + 1u < table_->tiers.size() ? watermark_ : 1.0; }

 private:
  double watermark_;
  const BlockTable* table_ = nullptr;
  RecencyLists lists_;
};
KVTIER_REGISTER(EvictionPolicy, LruEviction, "lru", "least recently used block leaves; demoted one tier down");

}  // namespace kvtier
