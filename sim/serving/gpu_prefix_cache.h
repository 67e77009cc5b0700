// The GPU's own prefix cache, as vLLM's automatic prefix caching keeps it:
// the blocks a finished request frees stay in the GPU's KV pool with their
// contents until the pool hands them out again, least recently freed first.
// A later prompt that starts with them computes and loads none of them; an
// admitted request takes them (they are its blocks while it runs) and frees
// them again when it finishes. Blocks are the request trace's prefix blocks
// (its hash ids, dense), each `pool_blocks` blocks of the paged pool.
#pragma once

#include <cstdint>
#include <vector>

#include "policies/common.h"

namespace kvtier {

class GpuPrefixCache {
 public:
  void setup(uint32_t prefix_blocks, uint64_t pool_blocks_per_prefix_block) {
    order_.setup(prefix_blocks, 1);
    held_.assign(prefix_blocks, 0);
    per_block_ = pool_blocks_per_prefix_block;
  }
  bool holds(uint32_t b) const { return b < held_.size() && held_[b]; }
  // A finished request's block, freed with its contents (most recent first).
  void put(uint32_t b) {
    if (held_[b]) order_.unlink(b);
    else ++count_;
    held_[b] = 1;
    order_.push_front(b, 0);
  }
  // An admitted request's block: in use, no longer free to hand out.
  void take(uint32_t b) {
    if (!held_[b]) return;
    order_.unlink(b);
    held_[b] = 0;
    --count_;
  }
  // The pool has `free_blocks` free blocks: the cached ones beyond that have
  // been handed out (least recently freed first).
  void trim(uint64_t free_blocks) {
    while (count_ * per_block_ > free_blocks && order_.tail(0) != kNoBlock) take(order_.tail(0));
  }
  uint64_t blocks() const { return count_; }
  uint64_t pool_blocks() const { return count_ * per_block_; }

 private:
  RecencyLists order_;
  std::vector<uint8_t> held_;
  uint64_t count_ = 0, per_block_ = 1;
};

}  // namespace kvtier
