// Least recently used, per tier: insert, touch, remove and victim are O(1)
// and allocate nothing.
#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

// LRU's lists: RecencyLists' doubly linked nodes, made circular through one
// sentinel node per tier after the blocks' nodes. A link and an unlink are
// then the same few stores wherever the block is, without RecencyLists'
// cases for either end of a list; served with the KV below the GPU, every
// access is an access and two moves (three unlinks, three links), so those
// cases were a good part of the policy's cost. The order is RecencyLists':
// the same victims.
class CircularRecencyLists {
 public:
  using Links = RecencyLists::Links;
  void setup(size_t blocks, size_t tiers) {
    blocks_ = static_cast<BlockId>(blocks);
    links_.assign(blocks + tiers, Links{});
    for (size_t t = 0; t < tiers; ++t) {
      const BlockId s = sentinel(static_cast<TierId>(t));
      links_[s] = Links{s, s};
    }
  }
  void push_front(BlockId b, TierId t) {
    const BlockId s = sentinel(t);
    Links& head = links_[s];
    Links& l = links_[b];
    l.prev = s;
    l.next = head.next;
    links_[head.next].prev = b;
    head.next = b;
  }
  // A block in no list (never linked, or unlinked) is left as it is, as
  // RecencyLists leaves it.
  void unlink(BlockId b) {
    Links& l = links_[b];
    if (l.prev == kNoBlock) return;
    links_[l.prev].next = l.next;
    links_[l.next].prev = l.prev;
    l.prev = l.next = kNoBlock;
  }
  BlockId tail(TierId t) const {
    const BlockId s = sentinel(t);
    const BlockId b = links_[s].prev;
    return b == s ? kNoBlock : b;
  }

 private:
  BlockId sentinel(TierId t) const { return blocks_ + t; }
  std::vector<Links> links_;
  BlockId blocks_ = 0;
};

class LruEviction : public EvictionPolicy {
 public:
  static ParamList params() { return {}; }
  explicit LruEviction(const json&) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    lists_.setup(table.size(), table.tiers.size());
  }
  void on_insert(BlockId b, TierId t) override { lists_.push_front(b, t); }
  void on_access(BlockId b, TierId t) override {
    lists_.unlink(b);
    lists_.push_front(b, t);
  }
  void on_remove(BlockId b, TierId) override { lists_.unlink(b); }
  void on_move(BlockId b, TierId, TierId to) override {
    lists_.unlink(b);
    lists_.push_front(b, to);
  }
  bool forgets_departed() const override { return true; }
  BlockId victim(TierId t) override {
    // Accesses move blocks to the front, so if the tail is pinned (used by a
    // layer in progress) every block of the tier is.
    BlockId b = lists_.tail(t);
    if (b == kNoBlock || table_->pinned(b)) return kNoBlock;
    return b;
  }

 private:
  const BlockTable* table_ = nullptr;
  CircularRecencyLists lists_;
};
KVTIER_REGISTER(EvictionPolicy, LruEviction, "lru", "least recently used block leaves; demoted one tier down");

}  // namespace kvtier
