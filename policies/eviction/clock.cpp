// Clock (second chance) with a TTL and dirty write-back, after the InCloud
// AIOS KV offload (seed 004).
//  - Per tier, the blocks form a ring swept by a hand. Attention sets a
//    block's reference bit; the hand clears set bits (second chance) and
//    stops at the first unreferenced, unpinned block.
//  - TTL: a block that has been neither referenced nor moved into the tier
//    for `ttl_steps` decode steps is evictable whatever its reference bit,
//    and goes before anything the hand would pick. A second per-tier list in
//    order of last reference finds the oldest in O(1).
//  - Write-back: only victims without a valid copy below (dirty ones, or
//    ones whose copy below was dropped for room) are written down; clean
//    ones leave with no transfer, as the engine does for every policy. With
//    write_back false the tiers are exclusive: every victim is written down.
#include "policies/policy.h"

namespace kvtier {

class ClockEviction : public EvictionPolicy {
 public:
  static ParamList params() {
    return {integer("ttl_steps", 64,
                    "decode steps without a reference (or a move into the tier) after which a block is evictable "
                    "regardless of its reference bit and goes first; 0 disables the TTL"),
            boolean("write_back", true,
                    "true: only victims without a valid copy below are written down, clean ones are dropped; "
                    "false: exclusive tiers, every victim is written down and no copy stays below a block read up")};
  }
  explicit ClockEviction(const json& p)
      : ttl_(uint32_t(get_int(p, "ttl_steps"))), write_back_(p.at("write_back").get<bool>()) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    size_t n = table.size();
    size_t nt = table.tiers.size();
    ring_prev_.assign(n, kNoBlock);
    ring_next_.assign(n, kNoBlock);
    hand_.assign(nt, kNoBlock);
    size_.assign(nt, 0);
    ref_.assign(n, 0);
    ref_step_.assign(n, 0);
    lru_prev_.assign(n, kNoBlock);
    lru_next_.assign(n, kNoBlock);
    head_.assign(nt, kNoBlock);
    tail_.assign(nt, kNoBlock);
  }

  void on_insert(BlockId b, TierId t) override {
    ref_[b] = 0;
    ref_step_[b] = table_->step;
    // Into the ring just behind the hand: the last block the hand reaches.
    BlockId h = hand_[t];
    if (h == kNoBlock) {
      ring_prev_[b] = ring_next_[b] = b;
      hand_[t] = b;
    } else {
      BlockId p = ring_prev_[h];
      ring_prev_[b] = p;
      ring_next_[b] = h;
      ring_next_[p] = b;
      ring_prev_[h] = b;
    }
    ++size_[t];
    lru_push_front(b, t);
  }
  void on_access(BlockId b, TierId t) override {
    ref_[b] = 1;
    ref_step_[b] = table_->step;
    lru_unlink(b, t);
    lru_push_front(b, t);
  }
  void on_remove(BlockId b, TierId t) override {
    if (ring_next_[b] == kNoBlock) return;
    if (ring_next_[b] == b) {
      hand_[t] = kNoBlock;
    } else {
      if (hand_[t] == b) hand_[t] = ring_next_[b];
      ring_next_[ring_prev_[b]] = ring_next_[b];
      ring_prev_[ring_next_[b]] = ring_prev_[b];
    }
    ring_prev_[b] = ring_next_[b] = kNoBlock;
    --size_[t];
    lru_unlink(b, t);
  }

  BlockId victim(TierId t) override {
    if (hand_[t] == kNoBlock) return kNoBlock;
    if (ttl_ > 0) {
      BlockId old = tail_[t];
      if (old != kNoBlock && !table_->pinned(old) && table_->step >= ref_step_[old] + ttl_) return old;
    }
    // Two sweeps suffice: the first clears every reference bit it passes.
    uint64_t limit = 2 * uint64_t(size_[t]) + 1;
    BlockId h = hand_[t];
    for (uint64_t i = 0; i < limit; ++i) {
      if (!table_->pinned(h)) {
        if (!ref_[h]) {
          hand_[t] = h;
          return h;
        }
        ref_[h] = 0;
      }
      h = ring_next_[h];
    }
    hand_[t] = h;
    return kNoBlock;  // every block of the tier is pinned
  }

  bool exclusive() const override { return !write_back_; }

 private:
  void lru_push_front(BlockId b, TierId t) {
    lru_prev_[b] = kNoBlock;
    lru_next_[b] = head_[t];
    if (head_[t] != kNoBlock) lru_prev_[head_[t]] = b;
    head_[t] = b;
    if (tail_[t] == kNoBlock) tail_[t] = b;
  }
  void lru_unlink(BlockId b, TierId t) {
    if (lru_prev_[b] != kNoBlock) lru_next_[lru_prev_[b]] = lru_next_[b];
    else if (head_[t] == b) head_[t] = lru_next_[b];
    if (lru_next_[b] != kNoBlock) lru_prev_[lru_next_[b]] = lru_prev_[b];
    else if (tail_[t] == b) tail_[t] = lru_prev_[b];
    lru_prev_[b] = lru_next_[b] = kNoBlock;
  }

  uint32_t ttl_;
  bool write_back_;
  const BlockTable* table_ = nullptr;
  std::vector<BlockId> ring_prev_, ring_next_, hand_;
  std::vector<uint64_t> size_;
  std::vector<uint8_t> ref_;
  std::vector<uint32_t> ref_step_;
  std::vector<BlockId> lru_prev_, lru_next_, head_, tail_;
};
KVTIER_REGISTER(EvictionPolicy, ClockEviction, "clock",
                "second-chance clock with a TTL (AIOS); dirty victims are written down, clean ones dropped");

}  // namespace kvtier
