// SIEVE (Zhang et al., NSDI'24), per tier: blocks sit in insertion order
// (newest at the head); a use sets the block's visited bit. A hand moves
// from the tail towards the head, clearing visited bits, wraps to the tail,
// and evicts the first unvisited block; it then rests on that block's newer
// neighbour. Uses never move blocks, so a hit is one store.
#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

class SieveEviction : public EvictionPolicy {
 public:
  static ParamList params() { return {}; }
  explicit SieveEviction(const json&) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    lists_.setup(table.size(), table.tiers.size());
    visited_.assign(table.size(), 0);
    hand_.assign(table.tiers.size(), kNoBlock);
    size_.assign(table.tiers.size(), 0);
  }
  void on_insert(BlockId b, TierId t) override {
    lists_.push_front(b, t);
    visited_[b] = 0;
    ++size_[t];
  }
  void on_access(BlockId b, TierId) override { visited_[b] = 1; }
  void on_remove(BlockId b, TierId t) override {
    if (hand_[t] == b) hand_[t] = lists_.prev(b);
    lists_.unlink(b);
    --size_[t];
  }
  BlockId victim(TierId t) override {
    BlockId b = hand_[t] != kNoBlock ? hand_[t] : lists_.tail(t);
    if (b == kNoBlock) return kNoBlock;
    // Two sweeps clear every visited bit; a third finds nothing only if every
    // block is pinned.
    for (uint64_t i = 0, limit = 2 * size_[t] + 1; i < limit; ++i) {
      if (!visited_[b] && !table_->pinned(b)) {
        hand_[t] = lists_.prev(b);
        return b;
      }
      visited_[b] = 0;
      b = lists_.prev(b) != kNoBlock ? lists_.prev(b) : lists_.tail(t);
    }
    return kNoBlock;
  }

 private:
  const BlockTable* table_ = nullptr;
  RecencyLists lists_;
  std::vector<uint8_t> visited_;
  std::vector<BlockId> hand_;
  std::vector<uint64_t> size_;
};
KVTIER_REGISTER(EvictionPolicy, SieveEviction, "sieve",
                "SIEVE: a hand sweeps from old to new, sparing visited blocks once; hits do not reorder");

}  // namespace kvtier
