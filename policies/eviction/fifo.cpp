// First in, first out, per tier: the block that entered the tier earliest
// leaves first; uses do not change the order. O(1), allocation-free.
#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

class FifoEviction : public EvictionPolicy {
 public:
  static ParamList params() { return {}; }
  explicit FifoEviction(const json&) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    lists_.setup(table.size(), table.tiers.size());
  }
  void on_insert(BlockId b, TierId t) override { lists_.push_front(b, t); }
  void on_access(BlockId, TierId) override {}
  void on_remove(BlockId b, TierId) override { lists_.unlink(b); }
  bool forgets_departed() const override { return true; }
  BlockId victim(TierId t) override {
    // Unlike LRU, a use does not move a block, so pinned blocks can sit
    // anywhere: walk from the oldest to the first unpinned one.
    for (BlockId b = lists_.tail(t); b != kNoBlock; b = lists_.prev(b))
      if (!table_->pinned(b)) return b;
    return kNoBlock;
  }

 private:
  const BlockTable* table_ = nullptr;
  RecencyLists lists_;
};
KVTIER_REGISTER(EvictionPolicy, FifoEviction, "fifo", "first in, first out: the oldest block of the tier leaves");

}  // namespace kvtier
