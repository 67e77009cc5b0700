// ARC, adaptive replacement cache (Megiddo and Modha, FAST'03), per tier of
// capacity c blocks. T1 holds blocks used once since they entered, T2 blocks
// used at least twice; B1 and B2 remember the blocks that left T1 and T2
// (ghosts, no data). A returning ghost goes to T2 and moves the target size
// p of T1: up by max(|B2|/|B1|, 1) for a B1 ghost, down by max(|B1|/|B2|, 1)
// for a B2 ghost. REPLACE takes T1's LRU block into B1 when |T1| > p (or
// |T1| = p and the newcomer is a B2 ghost, or T2 is empty), else T2's LRU
// block into B2. On a miss in all four lists: if |T1| + |B1| reaches c, B1's
// oldest ghost is forgotten before REPLACE (or, with B1 empty, T1's LRU
// block leaves with no ghost); otherwise once all four lists hold 2c blocks
// B2's oldest ghost is forgotten before REPLACE. These are the paper's cases
// in the order libCacheSim applies them, so hit counts agree with it.
#include <algorithm>

#include "policies/eviction/hints.h"
#include "policies/eviction/queues.h"
#include "policies/policy.h"

namespace kvtier {

class ArcEviction : public EvictionPolicy, public MissAwareEviction {
  enum : uint8_t { T1 = 1, T2 = 2, B1 = 3, B2 = 4 };

 public:
  static ParamList params() { return {}; }
  explicit ArcEviction(const json&) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    q_.setup(table, 4);
    st_.assign(table.tiers.size(), State{});
  }
  void on_miss(BlockId b, TierId t) override {
    TierQueues& q = q_.at(t);
    State& s = st_[t];
    s.ghost = 0;
    uint8_t w = q.where[b];
    double c = double(table_->tiers[t].capacity_blocks);
    if (w == B1) {
      s.p = std::min(s.p + std::max(double(q.size[B2]) / double(q.size[B1]), 1.0), c);
      q.unlink(b);
      s.ghost = B1;
    } else if (w == B2) {
      s.p = std::max(s.p - std::max(double(q.size[B1]) / double(q.size[B2]), 1.0), 0.0);
      q.unlink(b);
      s.ghost = B2;
    }
  }
  void on_insert(BlockId b, TierId t) override {
    TierQueues& q = q_.at(t);
    State& s = st_[t];
    uint8_t w = q.where[b];
    if (w == B1 || w == B2) {  // the driver did not announce it: treat it as returning now
      on_miss(b, t);
    }
    q.push_front(b, s.ghost ? T2 : T1);
    s.ghost = 0;
  }
  void on_access(BlockId b, TierId t) override {
    TierQueues& q = q_.at(t);
    uint8_t w = q.where[b];
    if (w == T1 || w == T2) q.move_to_front(b, T2);
  }
  void on_remove(BlockId b, TierId t) override {
    TierQueues& q = q_.at(t);
    State& s = st_[t];
    uint8_t w = q.where[b];
    if (w != T1 && w != T2) return;
    q.unlink(b);
    if (b == s.pending) {
      if (s.pending_to != 0) q.push_front(b, s.pending_to);
      s.pending = kNoBlock;
    }
  }
  // A new block in b's place is no returning ghost.
  void on_release(BlockId b) override { q_.forget(b); }
  BlockId victim(TierId t) override {
    TierQueues& q = q_.at(t);
    State& s = st_[t];
    uint64_t c = table_->tiers[t].capacity_blocks;
    if (s.ghost) return replace(q, s);
    if (q.size[T1] + q.size[B1] + 1 > c) {
      if (q.size[B1] > 0) {
        forget(q, B1);
        return replace(q, s);
      }
      const BlockId b = choose(q, s, T1, 0);
      // Every block of T1 pinned (a layer in flight reads them): T2's LRU block.
      return b != kNoBlock ? b : choose(q, s, T2, B2);
    }
    if (q.size[T1] + q.size[B1] + q.size[T2] + q.size[B2] >= 2 * c && q.size[B2] > 0) forget(q, B2);
    return replace(q, s);
  }

 private:
  struct State {
    double p = 0;
    uint8_t ghost = 0;            // B1/B2: the block announced by on_miss returns from that ghost list
    BlockId pending = kNoBlock;   // the last victim chosen, and the ghost list it goes to (0: none)
    uint8_t pending_to = 0;
  };
  BlockId replace(TierQueues& q, State& s) {
    double t1 = double(q.size[T1]);
    bool from_t1 = (q.size[T1] > 0 && (t1 > s.p || (t1 == s.p && s.ghost == B2))) || q.size[T2] == 0;
    BlockId b = choose(q, s, from_t1 ? T1 : T2, from_t1 ? B1 : B2);
    if (b == kNoBlock) b = choose(q, s, from_t1 ? T2 : T1, from_t1 ? B2 : B1);  // only pinned blocks there
    return b;
  }
  BlockId choose(TierQueues& q, State& s, uint8_t list, uint8_t ghost_to) {
    BlockId b = q.oldest_unpinned(list, *table_);
    s.pending = b;
    s.pending_to = ghost_to;
    return b;
  }
  static void forget(TierQueues& q, uint8_t ghost_list) { q.unlink(q.tail[ghost_list]); }

  const BlockTable* table_ = nullptr;
  QueuesPerTier q_;
  std::vector<State> st_;
};
KVTIER_REGISTER(EvictionPolicy, ArcEviction, "arc",
                "ARC: recency (T1) and frequency (T2) lists whose split adapts to hits on their ghost lists");

}  // namespace kvtier
