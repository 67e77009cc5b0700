#include <algorithm>
#include <random>
#include <set>

#include "fixture.h"
#include "policies/eviction/queues.h"
#include "policies/hkm.h"

using namespace kvtier;
using kvtier::test::make;
using kvtier::test::Table;

TEST_CASE("lru: the least recently used block leaves first") {
  Table T(1, 1, 8, {8, 100});
  auto e = make<EvictionPolicy>("lru");
  e->setup(T.t);
  for (BlockId b = 0; b < 4; ++b) T.create(e.get(), b, 0);
  T.use(e.get(), 0);
  T.use(e.get(), 2);
  T.use(e.get(), 1);
  T.use(e.get(), 3);
  CHECK(e->victim(0) == 0);
  T.use(e.get(), 0);
  CHECK(e->victim(0) == 2);
}

// A tier's list from its least recent block to its most recent.
static std::vector<BlockId> recency_order(const RecencyLists& l, TierId t) {
  std::vector<BlockId> out;
  for (BlockId b = l.tail(t); b != kNoBlock; b = l.prev(b)) out.push_back(b);
  return out;
}

TEST_CASE("lru: a run of accesses moved at once leaves every tier's list as accessing its blocks one by one does") {
  // Runs that lie together in the list (as runs read up or written down in
  // order lie), runs that do not, runs at the front already, runs of one
  // block, blocks in no list, and blocks moved between the tiers meanwhile.
  constexpr BlockId kBlocks = 64;
  constexpr TierId kTiers = 3;
  RecencyLists one, runs;
  one.setup(kBlocks, kTiers);
  runs.setup(kBlocks, kTiers);
  std::vector<int> tier(kBlocks, -1);
  std::mt19937 rng(7);
  size_t together = 0;
  for (int op = 0; op < 20000; ++op) {
    const BlockId b = rng() % kBlocks;
    const uint32_t kind = rng() % 4;
    if (kind == 0) {  // a block moves to a tier (inserted, read up or written down)
      const TierId t = static_cast<TierId>(rng() % kTiers);
      for (RecencyLists* l : {&one, &runs}) {
        l->unlink(b);
        l->push_front(b, t);
      }
      tier[b] = t;
    } else if (kind == 1) {  // a block leaves
      one.unlink(b);
      runs.unlink(b);
      tier[b] = -1;
    } else {  // a run of blocks in one tier is used, in order
      uint32_t n = 1 + rng() % 8;
      if (tier[b] < 0) continue;
      while (b + n > kBlocks || [&] {
        for (uint32_t i = 0; i < n; ++i)
          if (tier[b + i] != tier[b]) return true;
        return false;
      }())
        --n;
      const TierId t = static_cast<TierId>(tier[b]);
      bool was_together = n > 1;
      for (uint32_t i = 0; was_together && i + 1 < n; ++i) was_together = runs.prev(b + i) == b + i + 1;
      together += was_together;
      for (uint32_t i = 0; i < n; ++i) {
        one.unlink(b + i);
        one.push_front(b + i, t);
      }
      runs.push_front_run(b, n, t);
    }
    for (TierId t = 0; t < kTiers; ++t) REQUIRE(recency_order(runs, t) == recency_order(one, t));
  }
  CHECK(together > 100);  // the shortcut was taken, not only the fallback
}

TEST_CASE("lru: on_access_run picks the victims on_access of each block picks") {
  Table T(1, 1, 16, {16, 100});
  auto one = make<EvictionPolicy>("lru");
  auto runs = make<EvictionPolicy>("lru");
  one->setup(T.t);
  runs->setup(T.t);
  for (BlockId b = 0; b < 12; ++b) {
    one->on_insert(b, 0);
    runs->on_insert(b, 0);
  }
  // Blocks 4..7 were inserted in order, so they lie together: used as a run
  // they go to the front as four uses would take them.
  for (BlockId b = 4; b < 8; ++b) one->on_access(b, 0);
  runs->on_access_run(4, 4, 0);
  // 9..10 then 2..3: a run after another.
  for (BlockId b : {9, 10, 2, 3}) one->on_access(b, 0);
  runs->on_access_run(9, 2, 0);
  runs->on_access_run(2, 2, 0);
  for (int i = 0; i < 12; ++i) {
    const BlockId v = one->victim(0);
    REQUIRE(runs->victim(0) == v);
    one->on_remove(v, 0);
    runs->on_remove(v, 0);
  }
}

TEST_CASE("lru: watermark applies to every tier but the last, is 1 by default and is refused at or below 0 and above 1") {
  Table T(1, 1, 8, {8, 8, 100});
  auto plain = make<EvictionPolicy>("lru");
  plain->setup(T.t);
  for (TierId t = 0; t < 3; ++t) CHECK(plain->watermark(t) == 1.0);
  auto e = make<EvictionPolicy>(json{{"name", "lru"}, {"watermark", 0.5}});
  e->setup(T.t);
  CHECK(e->watermark(0) == 0.5);
  CHECK(e->watermark(1) == 0.5);
  CHECK(e->watermark(2) == 1.0);  // the last tier has nowhere to demote to
  CHECK_NOTHROW(make<EvictionPolicy>(json{{"name", "lru"}, {"watermark", 1.0}}));
  CHECK_NOTHROW(make<EvictionPolicy>(json{{"name", "lru"}, {"watermark", 0.01}}));
  for (double bad : {0.0, -0.5, 1.5}) {
    INFO(bad);
    CHECK_THROWS_AS(make<EvictionPolicy>(json{{"name", "lru"}, {"watermark", bad}}), ConfigError);
    CHECK_THROWS_WITH(make<EvictionPolicy>(json{{"name", "lru"}, {"watermark", bad}}),
                      Catch::StartsWith("test.watermark: ") && Catch::Contains("out of range"));
  }
}

TEST_CASE("lfu: the least frequently used block leaves; ties go to the least recent") {
  Table T(1, 1, 8, {8, 100});
  auto e = make<EvictionPolicy>("lfu");
  e->setup(T.t);
  for (BlockId b = 0; b < 4; ++b) T.create(e.get(), b, 0);
  for (int i = 0; i < 3; ++i) T.use(e.get(), 0);
  for (int i = 0; i < 2; ++i) T.use(e.get(), 1);
  T.use(e.get(), 2);
  T.use(e.get(), 3);
  CHECK(e->victim(0) == 2);  // 2 and 3 used once; 2 less recently
  T.use(e.get(), 2);
  CHECK(e->victim(0) == 3);
  T.move(e.get(), 3, 1);
  CHECK(e->victim(0) == 1);  // 1 and 2 at 2 uses; 1 older
  CHECK(e->victim(1) == 3);
  e->on_remove(1, 0);
  e->on_remove(2, 0);
  CHECK(e->victim(0) == 0);
  e->on_remove(0, 0);
  CHECK(e->victim(0) == kNoBlock);
}

TEST_CASE("lfu: a pinned least-frequent block is passed over") {
  Table T(1, 1, 8, {8, 100});
  auto e = make<EvictionPolicy>("lfu");
  e->setup(T.t);
  for (BlockId b = 0; b < 5; ++b) T.create(e.get(), b, 0);
  for (BlockId b = 1; b < 5; ++b)
    for (BlockId k = 0; k < b + 2; ++k) T.use(e.get(), b);
  T.pin_from_now();
  T.use(e.get(), 0);  // 1 use, pinned
  CHECK(e->victim(0) == 1);
}

TEST_CASE("lfu: each victim is the one a whole walk finds, as pins come and go and victims leave") {
  // A reference that walks everything: the unpinned block of the tier with
  // the fewest uses, of those the one that entered its count longest ago.
  // The policy resumes its walk where the last one ended; this holds it to
  // the same answers through inserts, uses, moves, pins and departures.
  const uint32_t n = 96;
  Table T(1, 1, n, {48, 200});
  auto e = make<EvictionPolicy>(json{{"name", "lfu"}, {"keep_history", true}});
  e->setup(T.t);
  std::vector<uint64_t> freq(n, 0), entered(n, 0);
  uint64_t order = 0;
  auto enter = [&](BlockId b) { entered[b] = ++order; };
  auto reference = [&](TierId t) {
    BlockId best = kNoBlock;
    for (BlockId b = 0; b < n; ++b) {
      if (T.t.tier(b) != t || T.t.pinned(b)) continue;
      if (best == kNoBlock || freq[b] < freq[best] || (freq[b] == freq[best] && entered[b] < entered[best])) best = b;
    }
    return best;
  };
  std::mt19937_64 rng(7);
  auto pick = [&](uint64_t k) { return static_cast<uint64_t>(rng() % k); };
  uint64_t checked = 0, pinned_passed = 0;
  for (int op = 0; op < 20000; ++op) {
    const BlockId b = static_cast<BlockId>(pick(n));
    const uint64_t what = pick(100);
    const bool live = T.t.tier(b) < 2;
    if (!live && T.t.tier(b) == kNotCreated) {
      T.create(e.get(), b, static_cast<TierId>(pick(2)));
      enter(b);
    } else if (what < 55 && live) {
      T.use(e.get(), b);
      ++freq[b];
      enter(b);
    } else if (what < 70 && live) {
      T.move(e.get(), b, static_cast<TierId>(1 - T.t.tier(b)));
      enter(b);
    } else if (what < 85) {
      // The engine's pattern: the victim leaves (demoted or dropped).
      const TierId t = static_cast<TierId>(pick(2));
      const BlockId v = e->victim(t);
      REQUIRE(v == reference(t));
      if (v != kNoBlock) {
        T.move(e.get(), v, static_cast<TierId>(1 - t));
        enter(v);
      }
    } else if (what < 93) {
      T.pin_from_now();  // a new layer: what it uses from now on is pinned
    } else if (what < 97) {
      T.t.pin_stamp = T.t.clock > 40 ? T.t.clock - pick(40) : 0;  // an earlier stamp: more blocks pinned
    } else {
      T.t.pin_stamp = 0;  // nothing pinned (prefill, the replay)
    }
    for (TierId t = 0; t < 2; ++t) {
      const BlockId want = reference(t);
      REQUIRE(e->victim(t) == want);
      ++checked;
      if (want != kNoBlock) {
        const BlockId first = [&] {
          BlockId f = kNoBlock;
          for (BlockId x = 0; x < n; ++x)
            if (T.t.tier(x) == t && (f == kNoBlock || freq[x] < freq[f] || (freq[x] == freq[f] && entered[x] < entered[f]))) f = x;
          return f;
        }();
        if (first != want) ++pinned_passed;
      }
    }
  }
  CHECK(checked == 40000);
  CHECK(pinned_passed > 1000);  // the walk really went past pinned blocks
}

TEST_CASE("lfu: keep_history false restarts the count when a block enters a tier") {
  Table T(1, 1, 8, {8, 100});
  auto e = make<EvictionPolicy>(json{{"name", "lfu"}, {"keep_history", false}});
  e->setup(T.t);
  T.create(e.get(), 0, 1);
  for (int i = 0; i < 5; ++i) T.use(e.get(), 0);
  T.create(e.get(), 1, 0);
  T.use(e.get(), 1);
  T.move(e.get(), 0, 0);  // promoted: its 5 uses do not count in tier 0
  CHECK(e->victim(0) == 0);
}

TEST_CASE("clock: a referenced block gets a second chance") {
  Table T(1, 1, 8, {8, 100});
  auto e = make<EvictionPolicy>(json{{"name", "clock"}, {"ttl_steps", 0}});
  e->setup(T.t);
  for (BlockId b = 0; b < 3; ++b) T.create(e.get(), b, 0);  // ring 0 1 2, hand at 0
  T.use(e.get(), 0);
  CHECK(e->victim(0) == 1);  // 0 referenced: spared, bit cleared
  T.move(e.get(), 1, 1);
  CHECK(e->victim(0) == 2);  // 0 was cleared on the first sweep but the hand is past it
  T.use(e.get(), 2);
  CHECK(e->victim(0) == 0);  // 2 spared now, 0 has no second chance left
}

TEST_CASE("clock: a TTL-expired block goes first, whatever its reference bit") {
  Table T(1, 1, 8, {8, 100});
  auto e = make<EvictionPolicy>(json{{"name", "clock"}, {"ttl_steps", 4}});
  e->setup(T.t);
  T.t.step = 0;
  for (BlockId b = 0; b < 3; ++b) T.create(e.get(), b, 0);
  T.use(e.get(), 2);  // referenced at step 0
  T.t.step = 10;
  T.use(e.get(), 0);
  T.use(e.get(), 1);
  // Without the TTL the hand would clear 0, 1, 2 and take 0.
  CHECK(e->victim(0) == 2);
  // With all three fresh, plain second chance applies.
  T.use(e.get(), 2);
  CHECK(e->victim(0) == 0);
}

TEST_CASE("clock: write_back false makes the tiers exclusive; every other policy keeps copies below") {
  auto wb = make<EvictionPolicy>("clock");
  auto wt = make<EvictionPolicy>(json{{"name", "clock"}, {"write_back", false}});
  CHECK_FALSE(wb->exclusive());
  CHECK(wt->exclusive());
  CHECK_FALSE(make<EvictionPolicy>("lru")->exclusive());
  CHECK_FALSE(make<EvictionPolicy>("hkm")->exclusive());
}

TEST_CASE("h2o: keeps the heavy hitters and the recent window, drops the rest") {
  Table T(1, 1, 16, {100, 100});
  auto e = make<EvictionPolicy>(json{{"name", "h2o"}, {"budget", 4}, {"budget_unit", "blocks"}, {"recent", 2}});
  e->setup(T.t);
  CHECK(e->drops());
  float mass[10] = {0.5f, 0.1f, 0.2f, 5.0f, 0.3f, 0.1f, 3.0f, 0.2f, 0.0f, 0.0f};
  for (BlockId b = 0; b < 10; ++b) {
    T.create(e.get(), b, 0);
    if (mass[b] > 0) T.use(e.get(), b, mass[b]);
  }
  std::vector<BlockId> dropped;
  for (BlockId v; (v = e->budget_victim(0, 0)) != kNoBlock;) {
    dropped.push_back(v);
    T.drop(e.get(), v);
  }
  CHECK(dropped.size() == 6);
  std::set<BlockId> kept;
  for (BlockId b = 0; b < 10; ++b)
    if (T.t.tier(b) < kDropped) kept.insert(b);
  CHECK(kept == std::set<BlockId>{3, 6, 8, 9});
  CHECK(dropped.front() == 1);  // lightest first (ties: oldest)
}

TEST_CASE("h2o: a fractional budget follows the blocks created") {
  Table T(1, 2, 20, {100, 100});
  auto e = make<EvictionPolicy>(json{{"name", "h2o"}, {"budget", 0.25}, {"recent", 1}});
  e->setup(T.t);
  for (uint32_t i = 0; i < 20; ++i) {
    BlockId b = T.t.id(0, 1, i);
    T.create(e.get(), b, 0);
    T.use(e.get(), b, float(i % 7));
    for (BlockId v; (v = e->budget_victim(0, 1)) != kNoBlock;) T.drop(e.get(), v);
  }
  uint32_t live = 0;
  for (uint32_t i = 0; i < 20; ++i) live += T.t.tier(T.t.id(0, 1, i)) < kDropped;
  CHECK(live == 5);
  CHECK(T.t.tier(T.t.id(0, 1, 19)) == 0);  // the newest
  CHECK(e->budget_victim(0, 0) == kNoBlock);  // layer 0 untouched
}

TEST_CASE("h2o: victim of a full tier is the lightest block outside the window") {
  Table T(1, 2, 8, {12, 100});
  auto e = make<EvictionPolicy>(json{{"name", "h2o"}, {"budget", 1.0}, {"recent", 2}});
  e->setup(T.t);
  for (uint32_t i = 0; i < 8; ++i) {
    T.create(e.get(), T.t.id(0, 0, i), 0);
    T.use(e.get(), T.t.id(0, 0, i), i == 6 ? 0.01f : 1.0f + float(i));  // 6: light but in the window
  }
  for (uint32_t i = 0; i < 4; ++i) T.create(e.get(), T.t.id(0, 1, i), 0);
  CHECK(e->victim(0) == T.t.id(0, 0, 0));
}

TEST_CASE("h2o: victims are those of a scan of every block each group created") {
  // Random creates, uses (masses from three values, so ties are common),
  // moves between tiers, drops, pins and released groups; H2O looks only at
  // the blocks a group holds, in no order, and must answer as the scan of
  // every index in order does: outside the recent window first, then the
  // least mass, then the lowest index.
  const uint32_t seqs = 3, layers = 2, per = 24, recent = 3, budget = 6;
  Table T(seqs, layers, per, {1000, 1000});
  auto e = make<EvictionPolicy>(
      json{{"name", "h2o"}, {"budget", budget}, {"budget_unit", "blocks"}, {"recent", recent}});
  e->setup(T.t);
  const uint32_t groups = seqs * layers;
  std::vector<uint32_t> created(groups, 0);
  auto lightest = [&](uint32_t g, int tier) {
    const uint32_t n = created[g], r_begin = recent >= n ? 0 : n - recent;
    BlockId best = kNoBlock;
    bool best_recent = true;
    float best_mass = 0;
    for (uint32_t i = 0; i < n; ++i) {
      const BlockId b = T.t.block_at(g, i);
      const TierId bt = T.t.tier(b);
      if (bt >= kDropped || (tier >= 0 && bt != tier) || T.t.pinned(b)) continue;
      const bool rec = i >= r_begin;
      const float m = T.t.mass[b];
      if (best == kNoBlock || (!rec && best_recent) || (rec == best_recent && m < best_mass)) {
        best = b;
        best_recent = rec;
        best_mass = m;
      }
    }
    return best;
  };
  auto in_tier = [&](uint32_t g, TierId tier) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < created[g]; ++i) c += T.t.tier(T.t.block_at(g, i)) == tier;
    return c;
  };
  auto scan_victim = [&](TierId tier) {
    uint32_t top = kNoBlock, most = 0;
    for (uint32_t g = 0; g < groups; ++g)
      if (in_tier(g, tier) > most) most = in_tier(g, tier), top = g;
    if (top == kNoBlock) return kNoBlock;
    BlockId b = lightest(top, tier);
    for (uint32_t g = 0; b == kNoBlock && g < groups; ++g)
      if (in_tier(g, tier)) b = lightest(g, tier);
    return b;
  };
  auto scan_budget = [&](uint32_t g) {
    uint32_t live = 0;
    for (uint32_t i = 0; i < created[g]; ++i) live += T.t.tier(T.t.block_at(g, i)) < kDropped;
    const uint32_t n = created[g], cap = std::max(std::min(budget, n), std::min(recent, n));
    return live <= cap ? kNoBlock : lightest(g, -1);
  };
  auto live_block = [&](std::mt19937& r) {
    for (int tries = 0; tries < 50; ++tries) {
      const uint32_t g = r() % groups;
      if (!created[g]) continue;
      const BlockId b = T.t.block_at(g, r() % created[g]);
      if (T.t.tier(b) < kDropped) return b;
    }
    return kNoBlock;
  };
  std::mt19937 rng(11);
  const float masses[3] = {0.f, 0.5f, 1.f};
  for (int op = 0; op < 30000; ++op) {
    const uint32_t k = rng() % 100;
    if (k < 30) {
      const uint32_t g = rng() % groups;
      if (created[g] < per) T.create(e.get(), T.t.block_at(g, created[g]++), TierId(rng() % 2));
    } else if (k < 60) {
      const BlockId b = live_block(rng);
      if (b != kNoBlock) T.use(e.get(), b, masses[rng() % 3]);
    } else if (k < 70) {
      const BlockId b = live_block(rng);
      if (b != kNoBlock) T.move(e.get(), b, TierId(1 - T.t.tier(b)));
    } else if (k < 80) {
      const BlockId b = live_block(rng);
      if (b != kNoBlock) T.drop(e.get(), b);
    } else if (k < 83) {
      T.pin_from_now();
    } else if (k < 86) {
      T.t.pin_stamp = 0;
    } else if (k < 87) {
      // A sequence ends: its blocks leave, and its places go to a new one.
      const uint32_t g = rng() % groups;
      for (uint32_t i = 0; i < created[g]; ++i) {
        const BlockId b = T.t.block_at(g, i);
        if (T.t.tier(b) < kDropped) T.drop(e.get(), b);
        e->on_release(b);
        T.t.tier(b) = kNotCreated;
        T.t.mass[b] = 0.f;
        T.t.last_access(b) = 0;
      }
      created[g] = 0;
    } else {
      const TierId tier = TierId(rng() % 2);
      REQUIRE(e->victim(tier) == scan_victim(tier));
      const uint32_t g = rng() % groups;
      REQUIRE(e->budget_victim(g / layers, g % layers) == scan_budget(g));
    }
  }
}

TEST_CASE("group counts: the group with most blocks in a tier is the one a scan of every group finds") {
  // Random inserts and removals over 37 groups (not a power of two) in two
  // tiers; the answer is the lowest-numbered group of the largest count.
  Table T(37, 1, 16, {1000, 1000});
  GroupCounts gc;
  gc.setup(T.t);
  std::mt19937 rng(5);
  std::vector<std::vector<uint8_t>> in(2, std::vector<uint8_t>(T.t.size(), 0));
  for (int op = 0; op < 20000; ++op) {
    const BlockId b = BlockId(rng() % T.t.size());
    const TierId t = TierId(rng() % 2);
    if (in[t][b]) {
      gc.remove(T.t, b, t);
      in[t][b] = 0;
    } else if (rng() % 3) {
      gc.insert(T.t, b, t);
      in[t][b] = 1;
    }
    for (TierId q : {TierId(0), TierId(1)}) {
      uint32_t best = kNoBlock, n = 0;
      for (uint32_t g = 0; g < gc.groups; ++g)
        if (gc.in_tier[size_t(q) * gc.groups + g] > n) n = gc.in_tier[size_t(q) * gc.groups + (best = g)];
      REQUIRE(gc.largest(q) == best);
    }
  }
}

TEST_CASE("streaming_llm: keeps the sinks and the recent window") {
  Table T(1, 1, 16, {100, 100});
  auto e = make<EvictionPolicy>(json{{"name", "streaming_llm"}, {"sinks", 1}, {"recent", 3}});
  e->setup(T.t);
  CHECK(e->drops());
  std::vector<BlockId> dropped;
  for (BlockId b = 0; b < 10; ++b) {
    T.create(e.get(), b, 0);
    T.use(e.get(), b, b == 5 ? 10.f : 0.1f);  // mass does not matter
    for (BlockId v; (v = e->budget_victim(0, 0)) != kNoBlock;) {
      dropped.push_back(v);
      T.drop(e.get(), v);
    }
  }
  CHECK(dropped == std::vector<BlockId>{1, 2, 3, 4, 5, 6});
  for (BlockId b : {0u, 7u, 8u, 9u}) CHECK(T.t.tier(b) == 0);
}

TEST_CASE("streaming_llm: victim of a full tier prefers blocks outside sinks and window") {
  Table T(1, 1, 16, {6, 100});
  auto e = make<EvictionPolicy>(json{{"name", "streaming_llm"}, {"sinks", 1}, {"recent", 4}});
  e->setup(T.t);
  for (BlockId b = 0; b < 6; ++b) T.create(e.get(), b, 0);
  CHECK(e->victim(0) == 1);
  T.pin_from_now();
  T.use(e.get(), 1);
  CHECK(e->victim(0) == 2);  // now in the window, but the oldest unpinned non-sink
}

TEST_CASE("hkm eviction: the lowest hit rate leaves, never a block the placement time-pins") {
  Table T(1, 1, 10, {4, 10, 1000});
  // One alpha: the placement's. The eviction has none of its own.
  auto e = make<EvictionPolicy>(json{{"name", "hkm"}, {"window", 8}});
  auto pl = make<PlacementPolicy>(json{{"name", "hkm"}, {"alpha", 0.2}});
  CHECK_THROWS_AS(make<EvictionPolicy>(json{{"name", "hkm"}, {"alpha", 0.2}}), ConfigError);
  e->bind_placement(pl.get());
  e->setup(T.t);
  pl->setup(T.t);
  for (BlockId b = 0; b < 10; ++b) T.create(e.get(), b, 1);  // 8 and 9 are the newest 20%
  // Hits per block over the last 8 steps: block b is used in b%4+1 steps,
  // except 3 which is used in none.
  for (uint32_t s = 0; s < 8; ++s) {
    T.t.step = s;
    for (BlockId b = 0; b < 8; ++b)
      if (b != 3 && s < b % 4 + 1) T.use(e.get(), b);
  }
  CHECK(e->victim(1) == 3);
  T.move(e.get(), 3, 2);
  BlockId v = e->victim(1);
  CHECK((v == 0 || v == 4));  // one hit each: the lowest rate left
  // 8 and 9 were never used: rate 0, but time-pinned in the warm tier.
  for (int k = 0; k < 7; ++k) {
    BlockId w = e->victim(1);
    REQUIRE(w != kNoBlock);
    CHECK(w != 8);
    CHECK(w != 9);
    T.move(e.get(), w, 2);
  }
  CHECK(e->victim(1) == kNoBlock);  // only 8 and 9 left
  // Outside the warm tier time pinning does not apply.
  T.move(e.get(), 9, 0);
  CHECK(e->victim(0) == 9);
}

TEST_CASE("hkm eviction: watermark bounds the warm tier, hit-rate table is 2 bytes per token") {
  Table T(2, 3, 10, {4, 10, 1000}, 128);
  auto e = make<EvictionPolicy>(json{{"name", "hkm"}, {"watermark", 0.8}});
  e->setup(T.t);
  CHECK(e->watermark(1) == Approx(0.8));
  CHECK(e->watermark(0) == 1.0);
  CHECK(HitRateTable::table_bytes(T.t) == 2ull * (2 * 3 * 10) * 128);
}

TEST_CASE("hkm: a history's hit count is its set bits, for every 16-bit history") {
  for (uint32_t h = 0; h <= 0xFFFFu; ++h) {
    uint32_t n = 0;
    for (uint32_t x = h; x; x >>= 1) n += x & 1u;
    REQUIRE(HitRateTable::bits_set(uint16_t(h)) == n);
  }
}

namespace {

// S3-FIFO's victim as the algorithm states it, one block at a time: the
// oldest block of the main FIFO is reinserted at its head (counter lowered)
// while its counter is positive or it is pinned, at most 4 x |M| + 1 times;
// the small FIFO's oldest moves to M at the threshold, is reinserted if
// pinned, else leaves. The policy computes the same outcome in fewer list
// moves; this is what it must equal. Defaults: small 0.1, ghost 0.9, threshold 2.
class S3FifoOneByOne {
  enum : uint8_t { S = 1, M = 2, G = 3 };

 public:
  void setup(const BlockTable& table) {
    table_ = &table;
    q_.setup(table, 3);
    freq_.assign(table.tiers.size(), {});
    st_.assign(table.tiers.size(), State{});
  }
  void on_insert(BlockId b, TierId t) {
    TierQueues& q = at(t);
    State& s = st_[t];
    s.ghost_hit = q.where[b] == G;
    if (s.ghost_hit) q.unlink(b);
    q.push_front(b, s.ghost_hit ? M : S);
    freq_[t][b] = 0;
    s.ghost_hit = false;
  }
  void on_access(BlockId b, TierId t) {
    TierQueues& q = at(t);
    if (q.where[b] == S || q.where[b] == M) {
      uint32_t& f = freq_[t][b];
      if (f < 0x7fffffffu) ++f;
    }
  }
  void on_remove(BlockId b, TierId t) {
    TierQueues& q = at(t);
    State& s = st_[t];
    const uint8_t w = q.where[b];
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
  BlockId victim(TierId t) {
    TierQueues& q = at(t);
    State& s = st_[t];
    auto& f = freq_[t];
    bool main_failed = false, small_failed = false;
    for (int pass = 0; pass < 8; ++pass) {
      if (!main_failed && (q.size[M] > s.main_cap || q.size[S] == 0 || small_failed)) {
        for (uint64_t i = 0, limit = 4 * q.size[M] + 1; i < limit && q.size[M] > 0; ++i) {
          const BlockId b = q.tail[M];
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
        uint64_t moved = 0;
        for (uint64_t i = 0, limit = q.size[S]; i < limit && q.size[S] > 0; ++i) {
          const BlockId b = q.tail[S];
          if (f[b] >= 2) {
            q.unlink(b);
            q.push_front(b, M);
            f[b] = 0;
            ++moved;
            continue;
          }
          if (table_->pinned(b)) {
            q.move_to_front(b, S);
            continue;
          }
          s.pending = b;
          return b;
        }
        // S held only pinned blocks and moved none: M gives the victim if it can.
        if (moved == 0) small_failed = true;
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
      const uint64_t c = table_->tiers[t].capacity_blocks;
      s.small_cap = uint64_t(double(c) * 0.1);
      s.main_cap = c - s.small_cap;
      s.ghost_cap = uint64_t(double(c) * 0.9);
    }
    return q;
  }
  const BlockTable* table_ = nullptr;
  QueuesPerTier q_;
  std::vector<std::vector<uint32_t>> freq_;
  std::vector<State> st_;
};

}  // namespace

TEST_CASE("s3fifo: every victim is the one-block-at-a-time algorithm's, as pins come and go") {
  // 80 blocks over two tiers, small and large against them in turn, so that
  // pinned blocks fill the small FIFO, much of the main one, or both, and
  // counters climb past the threshold while blocks wait in either.
  const uint32_t n = 80;
  uint64_t victims = 0, none = 0;
  for (const auto& caps : std::vector<std::vector<uint64_t>>{{30, 300}, {12, 40}, {60, 20}, {50, 50}})
    for (uint64_t seed : {11, 12, 13}) {
      Table T(1, 1, n, caps);
      auto e = make<EvictionPolicy>("s3fifo");
      e->setup(T.t);
      S3FifoOneByOne ref;
      ref.setup(T.t);
      std::mt19937_64 rng(seed);
      auto pick = [&](uint64_t k) { return static_cast<uint64_t>(rng() % k); };
      auto insert = [&](BlockId b, TierId t) {
        T.create(nullptr, b, t);
        e->on_insert(b, t);
        ref.on_insert(b, t);
      };
      auto remove = [&](BlockId b) {
        const TierId t = T.t.tier(b);
        e->on_remove(b, t);
        ref.on_remove(b, t);
        --T.t.tiers[t].used_blocks;
        T.t.tier(b) = kNotCreated;
      };
      for (int op = 0; op < 12000; ++op) {
        const BlockId b = static_cast<BlockId>(pick(n));
        const uint64_t what = pick(100);
        const bool live = T.t.tier(b) < 2;
        if (!live) {
          insert(b, static_cast<TierId>(pick(2)));
        } else if (what < 50) {
          T.use(nullptr, b);
          e->on_access(b, T.t.tier(b));
          ref.on_access(b, T.t.tier(b));
        } else if (what < 58) {
          const TierId to = static_cast<TierId>(1 - T.t.tier(b));
          remove(b);
          insert(b, to);
        } else if (what < 60) {
          // Every block used: no counter is 0, so the main FIFO's victim
          // comes only after whole passes that lower every counter.
          for (BlockId x = 0; x < n; ++x)
            if (T.t.tier(x) < 2) {
              T.use(nullptr, x);
              e->on_access(x, T.t.tier(x));
              ref.on_access(x, T.t.tier(x));
            }
        } else if (what < 85) {
          const TierId t = static_cast<TierId>(pick(2));
          const BlockId v = e->victim(t);
          REQUIRE(v == ref.victim(t));
          if (v != kNoBlock) {
            ++victims;
            remove(v);  // it leaves; the small FIFO's leavers go to the ghost FIFO
          } else {
            ++none;
          }
        } else if (what < 95) {
          T.pin_from_now();
        } else {
          T.t.pin_stamp = 0;
        }
      }
    }
  CHECK(victims > 10000);
  CHECK(none > 100);  // tiers wholly pinned were met too
}

TEST_CASE("every eviction policy: pinned blocks are never victims") {
  for (const auto& kv : Registry<EvictionPolicy>::instance().entries()) {
    DYNAMIC_SECTION(kv.first) {
      Table T(2, 2, 12, {40, 1000});
      auto e = make<EvictionPolicy>(kv.first);
      e->setup(T.t);
      std::mt19937 rng(7);
      std::vector<BlockId> in0;
      for (uint32_t s = 0; s < 2; ++s)
        for (uint32_t l = 0; l < 2; ++l)
          for (uint32_t i = 0; i < 10; ++i) {
            BlockId b = T.t.id(s, l, i);
            T.create(e.get(), b, 0);
            in0.push_back(b);
          }
      for (int round = 0; round < 200; ++round) {
        T.t.step = uint32_t(round);
        std::shuffle(in0.begin(), in0.end(), rng);
        for (size_t k = 0; k < in0.size() / 2; ++k) T.use(e.get(), in0[k], float(rng() % 100) / 100.f);
        T.pin_from_now();
        size_t npin = rng() % (in0.size() + 1);
        for (size_t k = 0; k < npin; ++k) T.use(e.get(), in0[k], 0.01f);
        BlockId v = e->victim(0);
        if (npin == in0.size()) {
          CHECK(v == kNoBlock);
        } else if (v != kNoBlock) {
          CHECK_FALSE(T.t.pinned(v));
          CHECK(T.t.tier(v) == 0);
        }
        if (v != kNoBlock) {  // swap it out and back in to keep the tier busy
          T.move(e.get(), v, 1);
          T.move(e.get(), v, 0);
        }
        T.t.pin_stamp = 0;
      }
    }
  }
}
