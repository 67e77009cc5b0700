#include "fixture.h"

using namespace kvtier;
using kvtier::test::make;
using kvtier::test::Table;

TEST_CASE("placement top: new blocks go to tier 0") {
  Table T(1, 1, 8, {8, 100});
  auto p = make<PlacementPolicy>("top");
  p->setup(T.t);
  CHECK(p->place(3, T.t) == 0);
  CHECK(p->place_in(3, 8, T.t) == 0);
  CHECK_FALSE(p->holds(3, 0, T.t));
}

TEST_CASE("placement hkm: the newest alpha fraction goes to the warm tier and is held there") {
  Table T(1, 2, 20, {8, 100, 1000});
  auto p = make<PlacementPolicy>(json{{"name", "hkm"}, {"alpha", 0.2}});
  p->setup(T.t);
  // A 10-block prompt: blocks 8 and 9 are the newest 20%.
  for (uint32_t i = 0; i < 10; ++i) {
    BlockId b = T.t.id(0, 1, i);
    TierId where = p->place_in(b, 10, T.t);
    CHECK(where == (i >= 8 ? 1 : 2));
    T.t.tier(b) = where;
  }
  CHECK(p->holds(T.t.id(0, 1, 9), 1, T.t));
  CHECK(p->holds(T.t.id(0, 1, 8), 1, T.t));
  CHECK_FALSE(p->holds(T.t.id(0, 1, 7), 2, T.t));
  CHECK_FALSE(p->holds(T.t.id(0, 1, 9), 0, T.t));  // pinning is about the warm tier
  // Decode: each new block is the newest; older ones age out of the window.
  for (uint32_t i = 10; i < 15; ++i) {
    BlockId b = T.t.id(0, 1, i);
    CHECK(p->place(b, T.t) == 1);
    T.t.tier(b) = 1;
  }
  // 15 blocks: ceil(0.2 * 15) = 3 pinned: 12, 13, 14.
  CHECK_FALSE(p->holds(T.t.id(0, 1, 11), 1, T.t));
  CHECK(p->holds(T.t.id(0, 1, 12), 1, T.t));
}

TEST_CASE("placement hkm: capacity basis pins alpha of the warm capacity split over (seq, layer)s") {
  Table T(2, 2, 40, {8, 40, 1000});
  auto p = make<PlacementPolicy>(json{{"name", "hkm"}, {"alpha", 0.5}, {"pin_basis", "capacity"}, {"cold_tier", 2}});
  p->setup(T.t);
  // 0.5 * 40 / 4 groups = 5 blocks per (seq, layer).
  CHECK(p->place_in(T.t.id(1, 1, 25), 30, T.t) == 1);
  CHECK(p->place_in(T.t.id(1, 1, 24), 30, T.t) == 2);
}

TEST_CASE("placement hkm: a two-tier machine clamps the warm and cold tiers") {
  Table T(1, 1, 10, {8, 100});
  auto p = make<PlacementPolicy>("hkm");
  p->setup(T.t);
  CHECK(p->place_in(0, 10, T.t) == 1);
  CHECK(p->place_in(9, 10, T.t) == 1);
}

TEST_CASE("promotion threshold: moves up once the use count reaches min_accesses") {
  Table T(1, 1, 8, {8, 100});
  auto p = make<PromotionPolicy>(json{{"name", "threshold"}, {"min_accesses", 3}});
  p->setup(T.t);
  T.t.tier(2) = 1;
  T.use(nullptr, 2);
  T.use(nullptr, 2);
  CHECK_FALSE(p->promote(2, 1, T.t));
  T.use(nullptr, 2);
  CHECK(p->promote(2, 1, T.t));
  CHECK(p->promote_to(2, 1, T.t) == 0);
}

TEST_CASE("promotion hkm: blocks read go to the GPU hot pool; a cold block whose hit rate jumps goes by the warm tier") {
  Table T(1, 1, 8, {8, 100, 1000});
  auto p = make<PromotionPolicy>(json{{"name", "hkm"}, {"window", 8}, {"threshold", 0.5}});
  p->setup(T.t);
  BlockId b = 5;
  T.t.tier(b) = 2;
  // Rarely used: once in the first 16 steps: straight to the hot pool.
  T.t.step = 2;
  CHECK(p->promote(b, 2, T.t));
  CHECK(p->promote_to(b, 2, T.t) == 0);
  for (uint32_t s = 20; s < 23; ++s) {
    T.t.step = s;
    CHECK(p->promote(b, 2, T.t));
    CHECK(p->promote_to(b, 2, T.t) == 0);  // 1, 2, 3 hits of 8
  }
  T.t.step = 23;
  p->on_access(b, 2, T.t);
  CHECK(p->promote(b, 2, T.t));  // 4 of 8: jumped to 0.5 (same-step hits count once)
  CHECK(p->promote_to(b, 2, T.t) == 1);
  CHECK(p->promote_to(b, 1, T.t) == 0);  // from the warm tier: on to the GPU
  CHECK_FALSE(p->promote(b, 0, T.t));    // on the GPU already
  // The window slides: 10 steps later only this step's hit is left (1 of 8).
  T.t.step = 33;
  p->promote(b, 2, T.t);
  CHECK(p->promote_to(b, 2, T.t) == 0);
}

TEST_CASE("promotion baselines: none and on_access") {
  Table T(1, 1, 8, {8, 100});
  CHECK_FALSE(make<PromotionPolicy>("none")->promote(1, 1, T.t));
  auto p = make<PromotionPolicy>("on_access");
  CHECK(p->promote(1, 1, T.t));
  CHECK(p->promote_to(1, 1, T.t) == 0);
}

TEST_CASE("every promotion policy that says it sends every block to the top does, whatever the block") {
  // Callers skip promote() and promote_to() where every_block_to_top() is
  // true: it must be what those two would say for any block from any tier.
  Table T(2, 2, 8, {8, 100, 1000});
  for (const auto& kv : Registry<PromotionPolicy>::instance().entries()) {
    DYNAMIC_SECTION(kv.first) {
      auto p = make<PromotionPolicy>(kv.first);
      p->setup(T.t);
      if (!p->every_block_to_top()) continue;
      for (BlockId b = 0; b < T.t.size(); ++b)
        for (TierId from : {TierId(1), TierId(2)}) {
          p->on_access(b, from, T.t);
          CHECK(p->promote(b, from, T.t));
          CHECK(p->promote_to(b, from, T.t) == 0);
        }
    }
  }
  CHECK(make<PromotionPolicy>("on_access")->every_block_to_top());
  CHECK_FALSE(make<PromotionPolicy>("none")->every_block_to_top());
}

TEST_CASE("promotion hkm: a new block in a released block's place has no hit history") {
  // Block 5 was hit at 4 of the last 8 steps, so it would go by the warm
  // tier; released, the new block there is as cold as one never used (6).
  Table T(1, 1, 8, {8, 100, 1000});
  auto p = make<PromotionPolicy>(json{{"name", "hkm"}, {"window", 8}, {"threshold", 0.5}});
  p->setup(T.t);
  for (uint32_t s = 20; s < 24; ++s) {
    T.t.step = s;
    p->on_access(5, 2, T.t);
  }
  CHECK(p->promote_to(5, 2, T.t) == 1);
  p->on_release(5, T.t);
  T.t.step = 24;
  CHECK(p->promote(5, 2, T.t));
  CHECK(p->promote(6, 2, T.t));
  CHECK(p->promote_to(5, 2, T.t) == p->promote_to(6, 2, T.t));
  CHECK(p->promote_to(5, 2, T.t) == 0);
}
