// Optional knowledge a driver of eviction policies can give them beyond the
// EvictionPolicy callbacks. A policy that wants it implements one of these
// interfaces as well; a driver finds it with dynamic_cast and feeds it. The
// replay (sim/replay/replay.h) feeds both; a driver that does not leaves policies
// with ghost lists less adaptive and refuses Belady at setup.
#pragma once

#include <cstdint>
#include <limits>

#include "policies/block_table.h"

namespace kvtier {

// Policies that remember blocks they evicted (ghost lists: ARC, S3-FIFO, 2Q)
// must see a returning block before they choose room for it, because whether
// it is in a ghost list decides both where it goes and what leaves.
class MissAwareEviction {
 public:
  virtual ~MissAwareEviction() = default;
  // b is about to be inserted into tier t (it missed there, or it is demoted
  // into t). Called before any victim(t) the insertion needs; on_insert(b, t)
  // follows.
  virtual void on_miss(BlockId b, TierId t) = 0;
  // True: the policy wants another victim(t) before the insertion announced
  // by on_miss although t is not full (2Q's LRU part has its own share of
  // the capacity, and a block returning from the ghost list goes there).
  virtual bool needs_room(TierId t) const {
    (void)t;
    return false;
  }
};

// The time of each block's next reference, for offline-optimal policies
// (Belady). kNeverAgain: the block is not referenced again.
constexpr uint64_t kNeverAgain = std::numeric_limits<uint64_t>::max();

class NextAccessEviction {
 public:
  virtual ~NextAccessEviction() = default;
  // Called before setup(). next[b] is the reference time (any increasing
  // count) of b's next reference after the current one; the driver writes
  // next[b] before every on_insert(b, .) and on_access(b, .).
  virtual void set_next_access(const uint64_t* next) = 0;
};

}  // namespace kvtier
