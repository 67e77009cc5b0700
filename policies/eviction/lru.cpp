// Least recently used, per tier: an intrusive doubly linked list over flat
// prev/next arrays (one node per block, since a block lives in one tier), so
// insert, touch, remove and victim are O(1) and allocate nothing.
#include "policies/policy.h"

namespace kvtier {

class LruEviction : public EvictionPolicy {
 public:
  static ParamList params() { return {}; }
  explicit LruEviction(const json&) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    prev_.assign(table.size(), kNoBlock);
    next_.assign(table.size(), kNoBlock);
    head_.assign(table.tiers.size(), kNoBlock);  // most recent
    tail_.assign(table.tiers.size(), kNoBlock);  // least recent
  }
  void on_insert(BlockId b, TierId t) override { push_front(b, t); }
  void on_access(BlockId b, TierId t) override {
    unlink(b, t);
    push_front(b, t);
  }
  void on_remove(BlockId b, TierId t) override { unlink(b, t); }
  BlockId victim(TierId t) override {
    // Accesses move blocks to the front, so if the tail is pinned (used by a
    // layer in progress) every block of the tier is.
    BlockId b = tail_[t];
    if (b == kNoBlock || table_->pinned(b)) return kNoBlock;
    return b;
  }

 private:
  void push_front(BlockId b, TierId t) {
    prev_[b] = kNoBlock;
    next_[b] = head_[t];
    if (head_[t] != kNoBlock) prev_[head_[t]] = b;
    head_[t] = b;
    if (tail_[t] == kNoBlock) tail_[t] = b;
  }
  void unlink(BlockId b, TierId t) {
    if (prev_[b] != kNoBlock) next_[prev_[b]] = next_[b];
    else head_[t] = next_[b];
    if (next_[b] != kNoBlock) prev_[next_[b]] = prev_[b];
    else tail_[t] = prev_[b];
    prev_[b] = next_[b] = kNoBlock;
  }

  const BlockTable* table_ = nullptr;
  std::vector<BlockId> prev_, next_, head_, tail_;
};
KVTIER_REGISTER(EvictionPolicy, LruEviction, "lru", "least recently used block leaves; demoted one tier down");

}  // namespace kvtier
