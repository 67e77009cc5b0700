// The view of the KV store that policies see. The engine owns it and keeps it
// current; policies read it and keep their own state in flat arrays sized in
// setup(). Struct-of-arrays so that the per-access hot path touches a few
// cache lines and allocates nothing.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace kvtier {

using BlockId = uint32_t;
using TierId = uint8_t;
constexpr BlockId kNoBlock = std::numeric_limits<BlockId>::max();
constexpr TierId kDropped = 254;     // evicted for good (H2O): its attention mass is lost
constexpr TierId kNotCreated = 255;  // the token range of this block is not generated yet

struct TierInfo {
  std::string name;         // the device's name in the hardware config
  std::string kind;         // the device kind ("gpu", "dram", "nvme", ...)
  uint64_t capacity_blocks = 0;
  uint64_t used_blocks = 0;  // blocks that live here or are on their way here
  // Blocks written down from here whose write has not landed: the data is
  // still here, so its memory is not free yet (it counts against capacity).
  uint64_t draining_blocks = 0;
  uint64_t occupied_blocks() const { return used_blocks + draining_blocks; }
};

struct BlockTable {
  // Shape. A block is (sequence, layer, index): index counts block_tokens-token
  // blocks from the start of the sequence.
  uint32_t batch = 0;
  uint32_t layers = 0;
  uint32_t blocks_per_seq_layer = 0;  // enough for context + all decode steps
  uint32_t block_tokens = 0;
  uint64_t block_bytes = 0;

  // Per block.
  std::vector<TierId> tier;
  std::vector<uint64_t> last_access;    // clock stamp of the last use by attention, 0 = never
  std::vector<uint32_t> access_count;   // uses by attention
  std::vector<float> mass;              // accumulated attention mass over all uses
  std::vector<float> last_mass;         // attention mass at the last use
  std::vector<uint64_t> created;        // clock stamp when the block was allocated
  std::vector<uint8_t> dirty;           // written since it was last stored below (write-back)
  // Tiers below the block's own tier that still hold a valid copy (bit t):
  // a block read up keeps its copy below until that tier needs the room, so
  // demoting it again moves no bytes. New tokens invalidate every copy.
  std::vector<uint8_t> copies;

  // Clock: one tick per (step, layer) the engine selects, so stamps order
  // every access. Blocks with last_access >= pin_stamp are needed by a layer
  // that is being fetched or computed and must not be evicted.
  uint64_t clock = 0;
  uint64_t pin_stamp = 0;
  uint32_t step = 0;    // decode step of the layer being selected
  uint32_t layer = 0;   // its layer
  double now_s = 0.0;   // simulated time

  std::vector<TierInfo> tiers;  // top (fastest) first

  BlockId id(uint32_t seq, uint32_t layer_, uint32_t index) const {
    return (seq * layers + layer_) * blocks_per_seq_layer + index;
  }
  uint32_t seq_of(BlockId b) const { return b / (layers * blocks_per_seq_layer); }
  uint32_t layer_of(BlockId b) const { return (b / blocks_per_seq_layer) % layers; }
  uint32_t index_of(BlockId b) const { return b % blocks_per_seq_layer; }
  size_t size() const { return tier.size(); }
  // Every per-block array sized for n blocks: each in tier `absent` (not yet
  // created), with no history and no copies.
  void allocate(size_t n, TierId absent) {
    tier.assign(n, absent);
    last_access.assign(n, 0);
    access_count.assign(n, 0);
    mass.assign(n, 0.f);
    last_mass.assign(n, 0.f);
    created.assign(n, 0);
    dirty.assign(n, 0);
    copies.assign(n, 0);
  }
  bool has_copy(BlockId b, TierId t) const { return t < 8 && (copies[b] >> t & 1u); }
  bool pinned(BlockId b) const { return last_access[b] >= pin_stamp && pin_stamp != 0; }
};

}  // namespace kvtier
