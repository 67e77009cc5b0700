// Belady's MIN (offline optimal for equal-size blocks): the block whose next
// reference is furthest in the future leaves; one never referenced again
// goes first. It needs the future, so it only runs where the driver knows
// every block's next reference time (NextAccessEviction in hints.h; `kvtier
// replay` precomputes them from the whole stream). One indexed binary
// max-heap per tier keyed by the next reference time: O(log n) per use.
#include "policies/eviction/hints.h"
#include "policies/policy.h"

namespace kvtier {

class BeladyEviction : public EvictionPolicy, public NextAccessEviction {
 public:
  static ParamList params() { return {}; }
  explicit BeladyEviction(const json&) {}

  void set_next_access(const uint64_t* next) override { next_ = next; }
  void setup(const BlockTable& table) override {
    table_ = &table;
    // Without the future (a driver that does not implement
    // NextAccessEviction) every block counts as never used again, so the
    // choice is arbitrary: Belady is only meaningful in replay.
    if (!next_) {
      unknown_.assign(table.size(), kNeverAgain);
      next_ = unknown_.data();
    }
    heaps_.assign(table.tiers.size(), Heap{});
  }
  void on_insert(BlockId b, TierId t) override {
    Heap& h = at(t);
    h.key[b] = next_[b];
    h.pos[b] = uint32_t(h.items.size());
    h.items.push_back(b);
    sift_up(h, h.pos[b]);
  }
  void on_access(BlockId b, TierId t) override {
    Heap& h = at(t);
    if (h.pos[b] == kNoBlock) return;
    h.key[b] = next_[b];  // a later time: the key only grows
    sift_up(h, h.pos[b]);
  }
  void on_remove(BlockId b, TierId t) override {
    Heap& h = at(t);
    uint32_t i = h.pos[b];
    if (i == kNoBlock) return;
    h.pos[b] = kNoBlock;
    BlockId last = h.items.back();
    h.items.pop_back();
    if (i < h.items.size()) {
      h.items[i] = last;
      h.pos[last] = i;
      sift_up(h, i);
      sift_down(h, h.pos[last]);
    }
  }
  BlockId victim(TierId t) override {
    Heap& h = at(t);
    if (h.items.empty()) return kNoBlock;
    if (!table_->pinned(h.items[0])) return h.items[0];
    // Pinned blocks are in use now; the furthest unpinned one is the best
    // choice left. Rare, so a linear scan.
    BlockId best = kNoBlock;
    for (BlockId b : h.items)
      if (!table_->pinned(b) && (best == kNoBlock || h.key[b] > h.key[best])) best = b;
    return best;
  }

 private:
  struct Heap {
    std::vector<BlockId> items;  // max-heap on key
    std::vector<uint32_t> pos;   // kNoBlock: not in this tier
    std::vector<uint64_t> key;
  };
  Heap& at(TierId t) {
    Heap& h = heaps_[t];
    if (h.pos.empty()) {
      h.pos.assign(table_->size(), kNoBlock);
      h.key.assign(table_->size(), 0);
      h.items.reserve(table_->tiers[t].capacity_blocks < table_->size() ? table_->tiers[t].capacity_blocks + 1
                                                                          : table_->size());
    }
    return h;
  }
  static void sift_up(Heap& h, uint32_t i) {
    BlockId b = h.items[i];
    uint64_t k = h.key[b];
    while (i > 0) {
      uint32_t p = (i - 1) / 2;
      if (h.key[h.items[p]] >= k) break;
      h.items[i] = h.items[p];
      h.pos[h.items[i]] = i;
      i = p;
    }
    h.items[i] = b;
    h.pos[b] = i;
  }
  static void sift_down(Heap& h, uint32_t i) {
    BlockId b = h.items[i];
    uint64_t k = h.key[b];
    uint32_t n = uint32_t(h.items.size());
    for (;;) {
      uint32_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && h.key[h.items[c + 1]] > h.key[h.items[c]]) ++c;
      if (h.key[h.items[c]] <= k) break;
      h.items[i] = h.items[c];
      h.pos[h.items[i]] = i;
      i = c;
    }
    h.items[i] = b;
    h.pos[b] = i;
  }

  const uint64_t* next_ = nullptr;
  std::vector<uint64_t> unknown_;
  const BlockTable* table_ = nullptr;
  std::vector<Heap> heaps_;
};
KVTIER_REGISTER(EvictionPolicy, BeladyEviction, "belady",
                "Belady's MIN, offline optimal: the block referenced again furthest in the future leaves (replay only)");

}  // namespace kvtier
