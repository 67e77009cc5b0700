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
    if (!s.ghost_hit) s.small_stuck = false;
    freq_[t][b] = 0;
    s.ghost_hit = false;
  }
  void on_access(BlockId b, TierId t) override {
    TierQueues& q = at(t);
    if (q.where[b] == S || q.where[b] == M) {
      uint32_t& f = freq_[t][b];
      if (f < 0x7fffffffu) ++f;
      if (q.where[b] == S && f >= threshold_) st_[t].small_stuck = false;
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
  // A new block in b's place does not return from the ghost FIFO.
  void on_release(BlockId b) override { q_.forget(b); }
  BlockId victim(TierId t) override {
    TierQueues& q = at(t);
    State& s = st_[t];
    // Each pass either evicts or moves every block of S to M, so M is over
    // its share on the next pass; a pass over M lowers every counter. The
    // bound only matters when pinned blocks make every candidate ineligible.
    bool main_failed = false;   // every block of M is pinned: look in S
    bool small_failed = false;  // every block of S is pinned: look in M
    for (int pass = 0; pass < 8; ++pass) {
      if (!main_failed && (q.size[M] > s.main_cap || q.size[S] == 0 || small_failed)) {
        BlockId b = main_victim(q, freq_[t]);
        if (b != kNoBlock) {
          s.pending = b;
          return b;
        }
        if (q.size[S] == 0) return kNoBlock;
        main_failed = true;
      } else {
        // Known to hold only pinned blocks below the threshold: the pass
        // would find nothing, move nothing and leave S as it is.
        if (s.small_stuck && s.stuck_stamp == table_->pin_stamp) {
          if (main_failed) return kNoBlock;
          small_failed = true;
          continue;
        }
        uint64_t moved = 0;
        BlockId b = small_victim(q, freq_[t], moved);
        if (b != kNoBlock) {
          s.pending = b;
          return b;
        }
        // Until the pinned set changes (a new stamp; under one stamp a pinned
        // block stays pinned), a block enters S or a counter in S reaches the
        // threshold, the engine's repeated calls while a layer in flight pins
        // all of S are answered without a walk over S.
        s.small_stuck = true;
        s.stuck_stamp = table_->pin_stamp;
        // What is left in S is pinned and below the threshold: every later
        // pass over S would find nothing. M gives the victim if it can (a
        // tier with a block that may leave gives one, whatever M's share).
        if (main_failed) return kNoBlock;
        if (moved == 0) small_failed = true;
      }
    }
    return kNoBlock;
  }

 private:
  // One pass over M as the algorithm states it: the oldest block is
  // reinserted at the head, its counter lowered, while its counter is
  // positive or it is pinned, for at most 4 x |M| + 1 reinsertions; the first
  // unpinned block found with counter 0 is the victim. Reinserting blocks one
  // by one from the tail keeps their order, so the outcome is computed from
  // one walk instead: an unpinned block with counter c reaches the tail with
  // counter 0 in cycle min(c, 3) + 1 over M, the victim is the first such
  // block of the earliest cycle, each block is lowered once per time it was
  // reinserted, and the blocks older than the victim move to the head as one
  // segment. The same victim, counters and order as the reinsertions; in the
  // engine, where pinned blocks can fill most of M, it spares the writes of
  // up to 4 x |M| + 1 list moves per call.
  BlockId main_victim(TierQueues& q, std::vector<uint32_t>& f) {
    uint64_t n = q.size[M];
    if (n == 0) return kNoBlock;
    BlockId found = kNoBlock;
    uint64_t found_pos = 0, pos = 0;
    uint32_t found_cycle = 5;
    for (BlockId b = q.tail[M]; b != kNoBlock; b = q.prev[b], ++pos) {
      if (table_->pinned(b)) continue;
      uint32_t c = std::min<uint32_t>(f[b], 3) + 1;
      if (c < found_cycle) {
        found_cycle = c, found = b, found_pos = pos;
        if (c == 1) break;
      }
    }
    // A reinsertion takes a counter c >= 1 to min(c, 3) - 1.
    auto lower = [&](BlockId b, uint32_t times) {
      if (times == 0) return;
      uint32_t c = std::min<uint32_t>(f[b], 3);
      f[b] = c > times ? c - times : 0;
    };
    if (found == kNoBlock) {
      // Every block is pinned: 4n + 1 reinsertions reach each block at least
      // 4 times, which takes any counter to 0, and leave the order turned by
      // one block.
      for (BlockId b = q.tail[M]; b != kNoBlock; b = q.prev[b]) f[b] = 0;
      if (n > 1) q.rotate_to_front(q.tail[M], M);
      return kNoBlock;
    }
    // Blocks older than the victim were reinserted found_cycle times, the
    // others found_cycle - 1 times.
    pos = 0;
    for (BlockId b = q.tail[M]; b != kNoBlock; b = q.prev[b], ++pos) {
      if (pos >= found_pos && found_cycle == 1) break;
      lower(b, found_cycle - (pos < found_pos ? 0 : 1));
    }
    if (found_pos > 0) q.rotate_to_front(q.next[found], M);
    return found;
  }
  // One pass over S: from the oldest block, blocks used at least threshold
  // times move to M's head (counter reset), pinned ones are reinserted at S's
  // head, and the first other block is the victim. The reinserted blocks are
  // the oldest left in S once the moved ones are gone, in their order, so
  // they move to the head as one segment.
  BlockId small_victim(TierQueues& q, std::vector<uint32_t>& f, uint64_t& moved) {
    BlockId newest_kept = kNoBlock, found = kNoBlock;
    for (BlockId b = q.tail[S], up; b != kNoBlock; b = up) {
      up = q.prev[b];
      if (f[b] >= threshold_) {
        q.unlink(b);
        q.push_front(b, M);
        f[b] = 0;
        ++moved;
        continue;
      }
      if (table_->pinned(b)) {
        newest_kept = b;
        continue;
      }
      found = b;
      break;
    }
    if (newest_kept != kNoBlock) q.rotate_to_front(newest_kept, S);
    return found;
  }

  struct State {
    uint64_t small_cap = 0, main_cap = 0, ghost_cap = 0;
    bool ghost_hit = false;
    BlockId pending = kNoBlock;
    bool small_stuck = false;  // S holds only pinned blocks below the threshold
    uint64_t stuck_stamp = 0;  // the pin stamp under which small_stuck was found
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
