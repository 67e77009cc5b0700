// Intrusive doubly linked queues over flat arrays for eviction policies that
// keep several queues per tier (ARC's T1/T2/B1/B2, S3-FIFO's small/main/ghost,
// 2Q's Ain/Am/Aout). A block is in at most one queue of a tier, but may be in
// a ghost queue of one tier and a data queue of another, so each tier has its
// own nodes; they are allocated when the tier is first used (once), never on
// a per-reference path after that. Front = newest.
#pragma once

#include <cstdint>
#include <vector>

#include "policies/block_table.h"

namespace kvtier {

struct TierQueues {
  static constexpr uint8_t kNone = 0;  // queues are numbered 1..n

  std::vector<BlockId> prev, next;
  std::vector<uint8_t> where;  // the queue holding the block, kNone if none
  std::vector<BlockId> head, tail;
  std::vector<uint64_t> size;

  bool ready() const { return !where.empty(); }
  void setup(size_t blocks, uint8_t queues) {
    prev.assign(blocks, kNoBlock);
    next.assign(blocks, kNoBlock);
    where.assign(blocks, kNone);
    head.assign(size_t(queues) + 1, kNoBlock);
    tail.assign(size_t(queues) + 1, kNoBlock);
    size.assign(size_t(queues) + 1, 0);
  }
  void push_front(BlockId b, uint8_t q) {
    prev[b] = kNoBlock;
    next[b] = head[q];
    if (head[q] != kNoBlock) prev[head[q]] = b;
    head[q] = b;
    if (tail[q] == kNoBlock) tail[q] = b;
    where[b] = q;
    ++size[q];
  }
  void unlink(BlockId b) {
    uint8_t q = where[b];
    if (q == kNone) return;
    if (prev[b] != kNoBlock) next[prev[b]] = next[b];
    else head[q] = next[b];
    if (next[b] != kNoBlock) prev[next[b]] = prev[b];
    else tail[q] = prev[b];
    prev[b] = next[b] = kNoBlock;
    where[b] = kNone;
    --size[q];
  }
  void move_to_front(BlockId b, uint8_t q) {
    unlink(b);
    push_front(b, q);
  }
  // Moves the blocks from `first` to the tail of queue q (its oldest) to the
  // front, in their order: what moving the tail block to the front once per
  // block of that segment does, in O(1). The whole queue is left as it is.
  void rotate_to_front(BlockId first, uint8_t q) {
    if (first == head[q]) return;
    BlockId last = tail[q], before = prev[first];
    next[before] = kNoBlock;
    tail[q] = before;
    prev[first] = kNoBlock;
    next[last] = head[q];
    prev[head[q]] = last;
    head[q] = first;
  }
  // The oldest block of queue q that is not pinned, kNoBlock if none.
  BlockId oldest_unpinned(uint8_t q, const BlockTable& t) const {
    for (BlockId b = tail[q]; b != kNoBlock; b = prev[b])
      if (!t.pinned(b)) return b;
    return kNoBlock;
  }
};

// One TierQueues per tier of a table, set up on first use.
struct QueuesPerTier {
  std::vector<TierQueues> tiers;
  size_t blocks = 0;
  uint8_t queues = 0;
  void setup(const BlockTable& t, uint8_t n_queues) {
    tiers.assign(t.tiers.size(), TierQueues{});
    blocks = t.size();
    queues = n_queues;
  }
  TierQueues& at(TierId t) {
    TierQueues& q = tiers[t];
    if (!q.ready()) q.setup(blocks, queues);
    return q;
  }
  // b is in no queue of any tier (its ghost entries go too).
  void forget(BlockId b) {
    for (TierQueues& q : tiers)
      if (q.ready()) q.unlink(b);
  }
};

}  // namespace kvtier
