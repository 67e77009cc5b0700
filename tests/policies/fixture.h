// A hand-built BlockTable and a tiny stand-in for the engine's bookkeeping,
// so each policy can be driven in isolation.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "policies/policy.h"

namespace kvtier::test {

template <class Base>
std::unique_ptr<Base> make(json cfg) {
  return Registry<Base>::instance().create(cfg, "test");
}

struct Table {
  BlockTable t;
  // batch x layers x blocks, tiers with the given capacities (blocks).
  Table(uint32_t batch, uint32_t layers, uint32_t blocks, std::vector<uint64_t> caps, uint32_t block_tokens = 16) {
    t.batch = batch;
    t.layers = layers;
    t.blocks_per_seq_layer = blocks;
    t.block_tokens = block_tokens;
    t.block_bytes = 2ull * block_tokens * 128 * 2;
    size_t n = size_t(batch) * layers * blocks;
    t.allocate(n, kNotCreated);
    for (size_t i = 0; i < caps.size(); ++i) {
      TierInfo ti;
      ti.name = "tier" + std::to_string(i);
      ti.kind = i == 0 ? "gpu" : (i == 1 ? "dram" : "nvme");
      ti.capacity_blocks = caps[i];
      t.tiers.push_back(ti);
    }
  }
  // Create block b in tier `tier` and tell the eviction policy.
  void create(EvictionPolicy* e, BlockId b, TierId tier) {
    t.tier(b) = tier;
    t.created[b] = ++t.clock;
    t.dirty(b) = 1;
    ++t.tiers[tier].used_blocks;
    if (e) e->on_insert(b, tier);
  }
  // Attention uses b with `m` mass: one clock tick, as the engine does.
  void use(EvictionPolicy* e, BlockId b, float m = 0.f) {
    t.last_access(b) = ++t.clock;
    ++t.access_count(b);
    t.mass[b] += m;
    t.last_mass[b] = m;
    if (e) e->on_access(b, t.tier(b));
  }
  void move(EvictionPolicy* e, BlockId b, TierId to) {
    TierId from = t.tier(b);
    if (e) e->on_remove(b, from);
    --t.tiers[from].used_blocks;
    t.tier(b) = to;
    if (to < kDropped) {
      ++t.tiers[to].used_blocks;
      if (e) e->on_insert(b, to);
    }
  }
  void drop(EvictionPolicy* e, BlockId b) { move(e, b, kDropped); }
  // Pin everything used from now on.
  void pin_from_now() { t.pin_stamp = t.clock + 1; }
};

}  // namespace kvtier::test
