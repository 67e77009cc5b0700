// The view of the KV store that policies see. The engine owns it and keeps it
// current; policies read it and keep their own state in flat arrays sized in
// setup(). Struct-of-arrays so that the per-access hot path touches a few
// cache lines and allocates nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "policies/chunk_pool.h"

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

// A node of a doubly linked list of blocks (kNoBlock: none).
struct ListLinks {
  BlockId prev = kNoBlock, next = kNoBlock;
};

// One block's state as an access or a move reads it, in one record.
// The fields marked "the store's" are the KV store's own (policies do not
// read them): what is moving the block, its prediction, and its node in
// tier 1's copy list.
struct alignas(32) BlockState {
  uint64_t last_access = 0;   // clock stamp of the last use by attention, 0 = never
  uint32_t access_count = 0;  // uses by attention
  uint32_t job = 0;           // the store's: the job moving it (none: 0)
  ListLinks copy1;            // the store's: its node in tier 1's copy list
  TierId tier = 0;
  // Tiers below the block's own tier that still hold a valid copy (bit t):
  // a block read up keeps its copy below until that tier needs the room, so
  // demoting it again moves no bytes. New tokens invalidate every copy.
  uint8_t copies = 0;
  uint8_t dirty = 0;           // written since it was last stored below (write-back)
  uint8_t src = 255;           // the store's: while a write down moves it, the endpoint still holding the data
  uint8_t predicted = 0;       // the store's: brought to the GPU by a prediction, not used yet
  TierId predicted_from = 0;   // the store's: from where
  // The store's: the block's layer of the block table (layer_of), kept
  // from its creation on: a victim written down names its layer, and that
  // lookup would otherwise miss in the chunk map for a block far from the
  // last one touched.
  uint16_t layer = 0;
};
static_assert(sizeof(BlockState) == 32, "a block's state is half a cache line");

struct BlockTable {
  // Shape. A block is (sequence, layer, index): index counts block_tokens-token
  // blocks from the start of the sequence. A group is one (sequence, layer).
  uint32_t batch = 0;
  uint32_t layers = 0;
  uint32_t blocks_per_seq_layer = 0;  // enough for context + all decode steps (the longest sequence)
  uint32_t block_tokens = 0;
  uint64_t block_bytes = 0;

  // Where a block's state lives. Unchunked (chunk_shift 0): group g owns
  // blocks g * blocks_per_seq_layer + index, one range per group sized for
  // the longest sequence. Chunked (serving, where that range times the
  // sequences that can run at once is far more than can be live): a group's
  // indices are cut into chunks of 2^chunk_shift blocks, each chunk taken
  // from a pool when the group's KV reaches it and given back when the
  // sequence is released, so the per-block arrays are sized by what can be
  // live, not by the longest sequence. Index i of group g is block
  // chunk_of[g * group_chunks + (i >> chunk_shift)] * 2^chunk_shift + the
  // rest of i; a chunk knows its group and position, so the way back is a
  // lookup too. The pool's last chunk is never handed out: every index not
  // yet reached maps to it, and its blocks stay kNotCreated, so reading an
  // index that does not exist yet reads "not created", as unchunked.
  static constexpr uint32_t kFreeChunk = std::numeric_limits<uint32_t>::max();
  uint32_t chunk_shift = 0;
  uint32_t group_chunks = 0;
  std::vector<uint32_t> chunk_of;     // per (group, chunk position): the chunk
  std::vector<uint32_t> chunk_group;  // per chunk: the group that holds it, kFreeChunk if none
  std::vector<uint32_t> chunk_pos;    // per chunk: its position in that group
  std::vector<uint32_t> chunk_layer;  // per chunk: that group's layer (layer_of without a division)
  ChunkPool pool;                     // the chunks no group holds, and which one a group takes next
  std::vector<uint32_t> expected;     // per group: the chunks it is expected to grow to (expect)

  // Per block: what an access or a move reads and writes together, in one
  // record (two to a cache line), so that a block far from the last one
  // touched (an eviction's victim, the oldest copy a tier drops) costs one
  // miss, not one per field. What is read only now and then (attention
  // mass, creation time) is kept apart.
  std::vector<BlockState> state;
  std::vector<float> mass;              // accumulated attention mass over all uses
  std::vector<float> last_mass;         // attention mass at the last use
  std::vector<uint64_t> created;        // clock stamp when the block was allocated
  TierId tier(BlockId b) const { return state[b].tier; }
  TierId& tier(BlockId b) { return state[b].tier; }
  uint64_t last_access(BlockId b) const { return state[b].last_access; }
  uint64_t& last_access(BlockId b) { return state[b].last_access; }
  uint32_t access_count(BlockId b) const { return state[b].access_count; }
  uint32_t& access_count(BlockId b) { return state[b].access_count; }
  uint8_t copies(BlockId b) const { return state[b].copies; }
  uint8_t& copies(BlockId b) { return state[b].copies; }
  uint8_t dirty(BlockId b) const { return state[b].dirty; }
  uint8_t& dirty(BlockId b) { return state[b].dirty; }

  // Clock: one tick per (step, layer) the engine selects, so stamps order
  // every access. Blocks with last_access >= pin_stamp are needed by a layer
  // that is being fetched or computed and must not be evicted.
  uint64_t clock = 0;
  uint64_t pin_stamp = 0;
  uint32_t step = 0;    // decode step of the layer being selected
  uint32_t layer = 0;   // its layer
  double now_s = 0.0;   // simulated time

  std::vector<TierInfo> tiers;  // top (fastest) first

  // Block `index` of group g (kNotCreated in `tier` where the group's KV
  // has not reached it).
  BlockId block_at(uint32_t g, uint32_t index) const {
    if (chunk_shift == 0) return g * blocks_per_seq_layer + index;
    return (chunk_of[size_t(g) * group_chunks + (index >> chunk_shift)] << chunk_shift) | (index & chunk_mask());
  }
  BlockId id(uint32_t seq, uint32_t layer_, uint32_t index) const { return block_at(seq * layers + layer_, index); }
  uint32_t group_of(BlockId b) const { return chunk_shift ? chunk_group[b >> chunk_shift] : b / blocks_per_seq_layer; }
  uint32_t seq_of(BlockId b) const { return group_of(b) / layers; }
  uint32_t layer_of(BlockId b) const { return chunk_shift ? chunk_layer[b >> chunk_shift] : group_of(b) % layers; }
  uint32_t index_of(BlockId b) const {
    return chunk_shift ? (chunk_pos[b >> chunk_shift] << chunk_shift) | (b & chunk_mask()) : b % blocks_per_seq_layer;
  }
  // Whether b belongs to a group (a chunk the pool holds, or the
  // never-created chunk, does not).
  bool held(BlockId b) const { return chunk_shift == 0 || chunk_group[b >> chunk_shift] != kFreeChunk; }
  // A seed of (group, index) that does not depend on where the block's state
  // is kept: what seeded noise about a block is keyed by, chunked or not.
  uint64_t key_of(BlockId b) const { return uint64_t(group_of(b)) * blocks_per_seq_layer + index_of(b); }
  uint32_t chunk_mask() const { return (1u << chunk_shift) - 1u; }
  size_t size() const { return state.size(); }

  // The chunked layout: `chunks` chunks of 2^shift blocks (the last one never
  // handed out), every group's indices mapped to that last one. Call before
  // allocate(chunks << shift, absent).
  void chunk(uint32_t shift, uint32_t chunks) {
    chunk_shift = shift;
    group_chunks = (blocks_per_seq_layer + (1u << shift) - 1) >> shift;
    const uint32_t none = chunks - 1;
    chunk_of.assign(size_t(batch) * layers * group_chunks, none);
    chunk_group.assign(chunks, kFreeChunk);
    chunk_pos.assign(chunks, 0);
    chunk_layer.assign(chunks, 0);
    pool.reset(none, batch * layers);
    expected.assign(size_t(batch) * layers, 0);
  }
  // Group g is expected to hold `blocks` blocks: its chunks are taken as
  // one range of that many where one is free (ChunkPool). Where a group
  // lies changes nothing a run computes, only how fast it runs.
  void expect(uint32_t g, uint64_t blocks) {
    if (chunk_shift == 0) return;
    const uint64_t c = (blocks + chunk_mask()) >> chunk_shift;
    expected[g] = static_cast<uint32_t>(std::min<uint64_t>(c, group_chunks));
  }
  // Block `index` of group g, its chunk taken from the pool if the group has
  // none there yet; kNoBlock if the pool is empty.
  BlockId take(uint32_t g, uint32_t index) {
    if (chunk_shift == 0) return block_at(g, index);
    uint32_t& c = chunk_of[size_t(g) * group_chunks + (index >> chunk_shift)];
    if (c == chunk_group.size() - 1) {
      const uint32_t pos = index >> chunk_shift;
      const uint32_t taken = pool.take(g, expected[g] > pos ? expected[g] - pos : 1);
      if (taken == ChunkPool::kNone) return kNoBlock;
      c = taken;
      chunk_group[c] = g;
      chunk_pos[c] = pos;
      chunk_layer[c] = g % layers;
    }
    return (c << chunk_shift) | (index & chunk_mask());
  }
  // Group g's chunks go back to the pool (its blocks are released: every one
  // is kNotCreated again).
  void give_back(uint32_t g) {
    if (chunk_shift == 0) return;
    const uint32_t none = uint32_t(chunk_group.size() - 1);
    uint32_t* map = chunk_of.data() + size_t(g) * group_chunks;
    uint32_t n = 0;  // chunks are taken in index order: the mapped ones are a prefix
    while (n < group_chunks && map[n] != none) ++n;
    for (uint32_t p = 0; p < n; ++p) chunk_group[map[p]] = kFreeChunk;
    pool.give_back(g, map, n);
    for (uint32_t p = 0; p < n; ++p) map[p] = none;
    expected[g] = 0;
  }

  // Every per-block array sized for n blocks: each in tier `absent` (not yet
  // created), with no history and no copies.
  void allocate(size_t n, TierId absent) {
    BlockState none;
    none.tier = absent;
    state.assign(n, none);
    mass.assign(n, 0.f);
    last_mass.assign(n, 0.f);
    created.assign(n, 0);
  }
  bool has_copy(BlockId b, TierId t) const { return t < 8 && (state[b].copies >> t & 1u); }
  bool pinned(BlockId b) const { return state[b].last_access >= pin_stamp && pin_stamp != 0; }
};

}  // namespace kvtier
