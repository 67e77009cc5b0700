// S3-FIFO (Yang et al., SOSP'23), per tier of capacity c blocks: a small FIFO
// S of floor(c x small_ratio) blocks, a main FIFO M of the rest and a ghost
// FIFO G of floor(c x ghost_ratio) block ids. New blocks enter S, blocks
// returning from G enter M. Each use adds one to the block's counter. When
// room is needed: if M is over its share (or S is empty), M's oldest block is
// reinserted at M's head with its counter lowered to min(counter, 3) - 1
// while the counter is positive, else it leaves; otherwise S's oldest block
// moves to M (counter reset) if used at least move_threshold times, else it
// leaves and its id goes to G. Defaults are the paper's, as in libCacheSim.
#include <algorithm>

#include "policies/eviction/hints.h"
#include "policies/eviction/queues.h"
#include "policies/policy.h"

namespace kvtier {

class S3FifoEviction : public EvictionPolicy, public MissAwareEviction {
  enum : uint8_t { S = 1, M = 2, G = 3 };

 public:
  static ParamList params() {
    return {num("small_ratio", 0.10, "share of the tier's capacity for the small FIFO", 0.0, 1.0),
            num("ghost_ratio", 0.90, "ghost FIFO length as a share of the tier's capacity (block ids only)", 0.0, 10.0),
            integer("move_threshold", 2, "uses in the small FIFO that move a block to the main FIFO", 1, 1e9)};
  }
  explicit S3FifoEviction(const json& p)
      : small_ratio_(get_num(p, "small_ratio")),
        ghost_ratio_(get_num(p, "ghost_ratio")),
        threshold_(uint32_t(get_int(p, "move_threshold"))) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    q_.setup(table, 3);
    freq_.assign(table.tiers.size(), {});
    st_.assign(table.tiers.size(), State{});
  }
  void on_miss(BlockId b, TierId t) override {
    TierQueues& q = at(t);
    State& s = st_[t];
    s.ghost_hit = q.where[b] == G;
    if (s.ghost_hit) q.unlink(b);
  }
  void on_insert(BlockId b, TierId t) override {
    TierQueues& q = at(t);
    State& s = st_[t];
    if (q.where[b] == G) on_miss(b, t);  // not announced by the driver
    q.push_front(b, s.ghost_hit ? M : S);
    freq_[t][b] = 0;
    s.ghost_hit = false;
  }
  void on_access(BlockId b, TierId t) override {
    TierQueues& q = at(t);
    if (q.where[b] == S || q.where[b] == M) {
      uint32_t& f = freq_[t][b];
      if (f < 0x7fffffffu) ++f;
    }
  }
  void on_remove(BlockId b, TierId t) override {
    TierQueues& q = at(t);
    State& s = st_[t];
    uint8_t w = q.where[b];
    if (w != S && w != M) return;
    q.unlink(b);
    if (b == s.pending) {
      s.pending = kNoBlock;
      if (w == S && s.ghost_cap > 0) {
        while (q.size[G] + 1 > s.ghost_cap) q.unlink(q.tail[G]);
        q.push_front(b, G);
      }
    }
  }
  BlockId victim(TierId t) override {
    TierQueues& q = at(t);
    State& s = st_[t];
    auto& f = freq_[t];
    // Each pass either evicts or moves every block of S to M, so M is over
    // its share on the next pass; a pass over M lowers every counter. The
    // bound only matters when pinned blocks make every candidate ineligible.
    bool main_failed = false;  // every block of M is pinned: look in S
    for (int pass = 0; pass < 8; ++pass) {
      if (!main_failed && (q.size[M] > s.main_cap || q.size[S] == 0)) {
        for (uint64_t i = 0, limit = 4 * q.size[M] + 1; i < limit && q.size[M] > 0; ++i) {
          BlockId b = q.tail[M];
          if (f[b] >= 1 || table_->pinned(b)) {
            if (f[b] >= 1) f[b] = std::min<uint32_t>(f[b], 3) - 1;
            q.move_to_front(b, M);
            continue;
          }
          s.pending = b;
          return b;
        }
        if (q.size[S] == 0) return kNoBlock;
        main_failed = true;
      } else {
        for (uint64_t i = 0, limit = q.size[S]; i < limit && q.size[S] > 0; ++i) {
          BlockId b = q.tail[S];
          if (f[b] >= threshold_) {
            q.unlink(b);
            q.push_front(b, M);
            f[b] = 0;
            continue;
          }
          if (table_->pinned(b)) {
            q.move_to_front(b, S);
            continue;
          }
          s.pending = b;
          return b;
        }
      }
    }
    return kNoBlock;
  }

 private:
  struct State {
    uint64_t small_cap = 0, main_cap = 0, ghost_cap = 0;
    bool ghost_hit = false;
    BlockId pending = kNoBlock;
  };
  TierQueues& at(TierId t) {
    TierQueues& q = q_.at(t);
    if (freq_[t].empty()) {
      freq_[t].assign(table_->size(), 0);
      State& s = st_[t];
      uint64_t c = table_->tiers[t].capacity_blocks;
      // Truncation as in libCacheSim, so shares and hit counts agree with it.
      s.small_cap = uint64_t(double(c) * small_ratio_);
      s.main_cap = c - s.small_cap;
      s.ghost_cap = uint64_t(double(c) * ghost_ratio_);
    }
    return q;
  }

  double small_ratio_, ghost_ratio_;
  uint32_t threshold_;
  const BlockTable* table_ = nullptr;
  QueuesPerTier q_;
  std::vector<std::vector<uint32_t>> freq_;
  std::vector<State> st_;
};
KVTIER_REGISTER(EvictionPolicy, S3FifoEviction, "s3fifo",
                "S3-FIFO: a small probationary FIFO, a main FIFO with reinsertion and a ghost FIFO of evicted ids");

}  // namespace kvtier
