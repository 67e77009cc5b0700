// The block table's chunked layout (serving with the KV in tiers): a group's
// indices map to chunks taken from a pool, and back; and no policy can tell
// the layouts apart.
#include <random>

#include "fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// T's table cut into chunks of 2^shift blocks, `pool` of them (the last one
// never handed out), with every per-block array sized for the pool.
void chunk(Table& T, uint32_t shift, uint32_t pool) {
  T.t.chunk(shift, pool);
  T.t.allocate(size_t(pool) << shift, kNotCreated);
}

}  // namespace

TEST_CASE("chunked block table: index to block and back, never-reached indices read as not created") {
  Table T(2, 3, 40, {1000});
  chunk(T, 2, 3 * 10 + 1);  // room for three groups' 40 blocks
  BlockTable& t = T.t;
  CHECK(t.group_chunks == 10);
  CHECK(t.tier(t.id(1, 2, 39)) == kNotCreated);  // nothing taken yet
  CHECK_FALSE(t.held(t.id(1, 2, 39)));
  // Groups take chunks interleaved, as decode grows them.
  for (uint32_t i = 0; i < 40; ++i)
    for (uint32_t g : {5u, 0u, 3u}) {
      const BlockId b = t.take(g, i);
      REQUIRE(b != kNoBlock);
      CHECK(b == t.block_at(g, i));
      CHECK(t.group_of(b) == g);
      CHECK(t.seq_of(b) == g / 3);
      CHECK(t.layer_of(b) == g % 3);
      CHECK(t.index_of(b) == i);
      CHECK(t.key_of(b) == uint64_t(g) * 40 + i);
      CHECK(t.held(b));
    }
  CHECK(t.take(1, 0) == kNoBlock);  // the pool is spent
  // Distinct blocks for distinct (group, index).
  std::vector<uint8_t> seen(t.size(), 0);
  for (uint32_t g : {5u, 0u, 3u})
    for (uint32_t i = 0; i < 40; ++i) CHECK(seen[t.block_at(g, i)]++ == 0);
  // Giving a group back frees its chunks for another.
  t.give_back(0);
  CHECK(t.tier(t.block_at(0, 7)) == kNotCreated);
  for (uint32_t i = 0; i < 40; ++i) CHECK(t.take(1, i) != kNoBlock);
  CHECK(t.group_of(t.block_at(1, 39)) == 1);
}

TEST_CASE("every eviction policy: a chunked table gives the victims of the unchunked one, by (group, index)") {
  // The same uses, pins and moves on both layouts, in (group, index) terms;
  // the chunked table's groups take their chunks interleaved, so no group's
  // blocks are contiguous. Policies that reach a group's blocks through
  // the table's accessors cannot tell the two apart.
  for (const auto& kv : Registry<EvictionPolicy>::instance().entries()) {
    DYNAMIC_SECTION(kv.first) {
      const uint32_t groups = 4, blocks = 24;
      Table A(2, 2, blocks, {30, 1000});
      Table B(2, 2, blocks, {30, 1000});
      chunk(B, 2, groups * (blocks / 4) + 1);
      auto ea = make<EvictionPolicy>(kv.first);
      auto eb = make<EvictionPolicy>(kv.first);
      ea->setup(A.t);
      eb->setup(B.t);
      auto coords = [](const BlockTable& t, BlockId b) {
        return b == kNoBlock ? std::pair<uint32_t, uint32_t>(kNoBlock, 0) : std::make_pair(t.group_of(b), t.index_of(b));
      };
      std::mt19937 rng(11);
      std::vector<uint32_t> created(groups, 0);
      std::vector<std::pair<uint32_t, uint32_t>> live;  // (group, index) in a tier
      for (int round = 0; round < 300; ++round) {
        A.t.step = B.t.step = uint32_t(round);
        // A group grows by a block, into tier 0 if there is room, else 1.
        const uint32_t g = rng() % groups;
        if (created[g] < blocks) {
          const uint32_t i = created[g]++;
          const TierId tier = A.t.tiers[0].used_blocks < A.t.tiers[0].capacity_blocks ? 0 : 1;
          A.create(ea.get(), A.t.block_at(g, i), tier);
          B.create(eb.get(), B.t.take(g, i), tier);
          live.emplace_back(g, i);
        }
        // Attention uses some of what lives, with masses.
        for (size_t k = 0; k < live.size(); ++k)
          if (rng() % 3 == 0) {
            const float m = float(rng() % 100) / 100.f;
            const auto [lg, li] = live[k];
            if (A.t.tier(A.t.block_at(lg, li)) >= kDropped) continue;
            A.use(ea.get(), A.t.block_at(lg, li), m);
            B.use(eb.get(), B.t.block_at(lg, li), m);
          }
        if (round % 7 == 0) {
          A.pin_from_now();
          B.pin_from_now();
        }
        const BlockId va = ea->victim(0), vb = eb->victim(0);
        REQUIRE(coords(A.t, va) == coords(B.t, vb));
        if (va != kNoBlock) {
          if (ea->drops()) {
            A.drop(ea.get(), va);
            B.drop(eb.get(), vb);
          } else {
            A.move(ea.get(), va, 1);
            B.move(eb.get(), vb, 1);
          }
        }
        const BlockId ba = ea->budget_victim(g / 2, g % 2), bb = eb->budget_victim(g / 2, g % 2);
        REQUIRE(coords(A.t, ba) == coords(B.t, bb));
        if (ba != kNoBlock) {
          A.drop(ea.get(), ba);
          B.drop(eb.get(), bb);
        }
        A.t.pin_stamp = B.t.pin_stamp = 0;
      }
    }
  }
}

TEST_CASE("every evaluation policy: a chunked table gives the selection of the unchunked one") {
  // Blocks with the same history on both layouts; each step's selection of
  // every group, with and without the trace's masses, must be the same
  // indices (seeded noise is keyed by (group, index), not by where the
  // block's state is kept).
  for (const auto& kv : Registry<EvaluationPolicy>::instance().entries()) {
    DYNAMIC_SECTION(kv.first) {
      const uint32_t groups = 4, blocks = 40;
      Table A(2, 2, blocks, {1000});
      Table B(2, 2, blocks, {1000});
      chunk(B, 3, groups * (blocks / 8) + 1);
      auto pa = make<EvaluationPolicy>(kv.first);
      auto pb = make<EvaluationPolicy>(kv.first);
      pa->setup(A.t);
      pb->setup(B.t);
      std::mt19937 rng(5);
      for (uint32_t i = 0; i < blocks; ++i)
        for (uint32_t g = 0; g < groups; ++g) {
          A.create(nullptr, A.t.block_at(g, i), 0);
          B.create(nullptr, B.t.take(g, i), 0);
        }
      for (uint32_t step = 0; step < 20; ++step)
        for (uint32_t g = 0; g < groups; ++g) {
          const uint32_t n = 20 + step;
          std::vector<uint32_t> tb;
          std::vector<float> tm;
          for (uint32_t i = 0; i < n; ++i)
            if (rng() % 4 == 0) {
              tb.push_back(i);
              tm.push_back(float(rng() % 100) / 100.f);
            }
          for (bool traced : {true, false}) {
            SelectInput in{step, g % 2, g / 2, n, traced ? &tb : nullptr, traced ? &tm : nullptr};
            std::vector<uint32_t> oa, ob;
            pa->select(in, A.t, oa);
            pb->select(in, B.t, ob);
            REQUIRE(oa == ob);
            for (uint32_t i : oa) {
              A.use(nullptr, A.t.block_at(g, i), 0.5f);
              B.use(nullptr, B.t.block_at(g, i), 0.5f);
            }
          }
        }
    }
  }
}
