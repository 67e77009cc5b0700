// The KV pool across nodes (sim/serving/kv_pool.h) without SimGrid: one
// index over the members' shares, local-first placement, one eviction
// order, the moves it makes for the member acting.
#include <catch2/catch.hpp>

#include <random>

#include "sim/serving/kv_pool.h"

using namespace kvtier;

namespace {

ReplayConfig lru_tiers(std::vector<uint64_t> caps) {
  ReplayConfig c;
  c.block_tokens = 512;
  c.block_bytes = 1;
  for (size_t u = 0; u < caps.size(); ++u) {
    ReplayTierSpec t;
    t.name = "tier" + std::to_string(u);
    t.capacity_blocks = caps[u];
    t.policy = json{{"name", "lru"}};
    c.tiers.push_back(t);
  }
  return c;
}

// Member m: GPU device 100 + m on node m, its share of tier u on device 10 * u + m.
KvPool::Member member(uint32_t m, std::vector<uint64_t> caps) {
  KvPool::Member x;
  x.gpu = 100 + m;
  x.gpu_node = m;
  for (size_t u = 0; u < caps.size(); ++u) {
    x.devs.push_back(10 * u + m);
    x.nodes.push_back(m);
    x.capacity.push_back(caps[u]);
  }
  return x;
}

}  // namespace

TEST_CASE("kv pool: blocks go to the writer's share first, then where the pool's victim left room") {
  KvPool pool(lru_tiers({2}), {member(0, {2}), member(1, {2})}, 8);
  ReplaySession& ix = pool.index();
  pool.act_as(0);
  ix.reference(0);
  ix.reference(1);
  CHECK(pool.home(0, 0) == 0);
  CHECK(pool.home(1, 0) == 0);
  ix.reference(2);  // member 0's share is full; member 1's has room
  CHECK(pool.home(2, 0) == 1);
  auto moves = pool.take_moves(0);
  REQUIRE(moves.size() == 2);
  CHECK((moves[0].from == 100 && moves[0].to == 0 && moves[0].blocks == 2 && !moves[0].across_nodes));
  CHECK((moves[1].from == 100 && moves[1].to == 1 && moves[1].blocks == 1 && moves[1].across_nodes));
  CHECK(pool.take_moves(0).empty());
  // The blocks those moves bring in are member 0's, unsent until its
  // transfers are submitted; then they are there once its job 7 is done.
  CHECK((pool.writer(2) == 0 && pool.unsent(2) && pool.write_job(2) == kNoJob));
  pool.written(0, 7);
  CHECK((pool.writer(0) == 0 && pool.write_job(0) == 7 && pool.writer(2) == 0 && pool.write_job(2) == 7));
  CHECK((!pool.unsent(0) && !pool.unsent(2)));
  CHECK(pool.writer(3) == KvPool::kNoMember);
  pool.act_as(1);
  ix.reference(3);  // its own share has room
  CHECK(pool.home(3, 0) == 1);
  ix.reference(4);  // the pool is full: its LRU block (0, in member 0's share) leaves, 4 takes its slot
  CHECK(ix.holder(0) == 1);
  CHECK(pool.home(4, 0) == 0);
  CHECK(pool.used(0, 0) == 2);
  CHECK(pool.used(1, 0) == 2);
  moves = pool.take_moves(1);
  REQUIRE(moves.size() == 2);
  CHECK((moves[0].to == 1 && !moves[0].across_nodes));
  CHECK((moves[1].to == 0 && moves[1].across_nodes));
  // A hit is just a hit: nothing moves.
  ix.reference(4);
  CHECK(pool.take_moves(1).empty());
}

TEST_CASE("kv pool: a victim demoted to the tier below stays with its share") {
  KvPool pool(lru_tiers({1, 4}), {member(0, {1, 4}), member(1, {1, 4})}, 8);
  ReplaySession& ix = pool.index();
  pool.act_as(0);
  ix.reference(0);
  pool.act_as(1);
  ix.reference(1);
  pool.act_as(0);
  ix.reference(2);  // tier 0 full: block 0 (member 0's) goes down to member 0's tier 1, 2 into its slot
  CHECK(ix.holder(0) == 1);
  CHECK(pool.home(0, 1) == 0);
  CHECK(pool.home(2, 0) == 0);
  auto moves = pool.take_moves(0);
  REQUIRE(moves.size() == 2);
  CHECK((moves[0].tier == 0 && moves[0].from == 100 && moves[0].to == 0));
  CHECK((moves[1].tier == 1 && moves[1].from == 0 && moves[1].to == 10 && !moves[1].across_nodes));
}

TEST_CASE("kv pool: one member keeps exactly what a cache of its own keeps") {
  ReplayConfig own_cfg = lru_tiers({16, 64});
  ReplaySession own(own_cfg, 500);
  KvPool pool(lru_tiers({16, 64}), {member(0, {16, 64})}, 500);
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> pick(0, 499);
  for (int i = 0; i < 20000; ++i) {
    const uint32_t b = pick(rng) % (i % 3 == 0 ? 40 : 500);
    REQUIRE(pool.index().reference(b) == own.reference(b));
  }
  for (uint32_t b = 0; b < 500; ++b) REQUIRE(pool.index().holder(b) == own.holder(b));
  for (uint32_t u = 0; u < 2; ++u) {
    CHECK(pool.used(0, u) == own.used(u));
    CHECK(pool.index().inserted(u) == own.inserted(u));
  }
  // Its moves are its cache's inserts, tier by tier.
  uint64_t moved[2] = {0, 0};
  for (const auto& mv : pool.take_moves(0)) moved[mv.tier] += mv.blocks;
  CHECK(moved[0] == own.inserted(0));
  CHECK(moved[1] == own.inserted(1));
}

TEST_CASE("kv pool: placement by hash sends a block to the same share whoever writes it") {
  KvPool a(lru_tiers({64}), {member(0, {64}), member(1, {64}), member(2, {64})}, 64, KvPool::Placement::Hashed);
  KvPool b(lru_tiers({64}), {member(0, {64}), member(1, {64}), member(2, {64})}, 64, KvPool::Placement::Hashed);
  a.act_as(0);
  b.act_as(2);
  uint64_t per[3] = {0, 0, 0};
  for (uint32_t blk = 0; blk < 48; ++blk) {
    a.index().reference(blk);
    b.index().reference(blk);
    CHECK(a.home(blk, 0) == b.home(blk, 0));
    ++per[a.home(blk, 0)];
  }
  // Neighbouring ids are mixed: every share gets some of 48 blocks.
  for (uint64_t n : per) CHECK(n > 4);
}

TEST_CASE("kv pool: a hot block gets a copy in its reader's share, which yields its slot to cached blocks") {
  // Two members of two blocks each; copies after two reads from another node.
  KvPool pool(lru_tiers({4}), {member(0, {2}), member(1, {2})}, 8, KvPool::Placement::LocalFirst, 2);
  ReplaySession& ix = pool.index();
  pool.act_as(0);
  ix.reference(0);
  ix.reference(1);
  pool.take_moves(0);
  CHECK(pool.source(0, 0, 1) == 0);
  pool.read_remotely(0, 1);
  CHECK(pool.replicas_made() == 0);
  pool.read_remotely(0, 1);  // hot: member 1 gets a copy, written from its GPU into its share
  CHECK((pool.replicas_made() == 1 && pool.replicas_held() == 1));
  CHECK(pool.source(0, 0, 1) == 1);
  CHECK(pool.source(0, 0, 0) == 0);  // the home's own reads are unchanged
  CHECK(pool.home(0, 0) == 0);
  CHECK(pool.used(1, 0) == 1);
  auto moves = pool.take_moves(1);
  REQUIRE(moves.size() == 1);
  CHECK((moves[0].from == 101 && moves[0].to == 1 && moves[0].blocks == 1 && !moves[0].across_nodes));
  // One copy per block.
  pool.read_remotely(0, 1);
  CHECK(pool.replicas_made() == 1);
  pool.act_as(1);
  ix.reference(2);  // member 1's share: the copy and block 2
  CHECK((pool.home(2, 0) == 1 && pool.used(1, 0) == 2));
  ix.reference(3);  // its share is full, the index has room: the copy yields its slot
  CHECK(pool.home(3, 0) == 1);
  CHECK((pool.replicas_held() == 0 && pool.used(1, 0) == 2));
  CHECK(pool.source(0, 0, 1) == 0);
  pool.read_remotely(1, 1);
  pool.read_remotely(1, 1);
  CHECK(pool.replicas_held() == 0);  // no room in member 1's share: a copy never evicts
  // Every share full, one with a copy: a block placed where the writer's share
  // has none takes the copy's slot in another.
  KvPool full(lru_tiers({2}), {member(0, {1}), member(1, {1})}, 8, KvPool::Placement::LocalFirst, 1);
  full.act_as(0);
  full.index().reference(5);
  full.read_remotely(5, 1);
  CHECK((full.replicas_held() == 1 && full.used(1, 0) == 1 && full.source(5, 0, 1) == 1));
  full.index().reference(6);
  CHECK((full.home(6, 0) == 1 && full.replicas_held() == 0 && full.used(1, 0) == 1));
  CHECK(full.source(5, 0, 1) == 0);
}

TEST_CASE("kv pool: a hot block gets copies on as many readers' nodes as it may hold, each made hot again") {
  // Member 0 holds block 0; members 1 and 2 (other nodes) read it; copies after two reads.
  KvPool pool(lru_tiers({6}), {member(0, {2}), member(1, {2}), member(2, {2})}, 8, KvPool::Placement::LocalFirst, 2,
              2);
  pool.act_as(0);
  pool.index().reference(0);
  pool.take_moves(0);
  pool.read_remotely(0, 1);
  pool.read_remotely(0, 1);  // two reads: the first copy, member 1's
  CHECK((pool.replicas_held() == 1 && pool.source(0, 0, 1) == 1 && pool.source(0, 0, 2) == 0));
  pool.read_remotely(0, 2);  // the second copy needs two reads more
  CHECK(pool.replicas_held() == 1);
  pool.read_remotely(0, 2);
  CHECK((pool.replicas_held() == 2 && pool.replicas_made() == 2 && pool.source(0, 0, 2) == 2));
  CHECK((pool.used(1, 0) == 1 && pool.used(2, 0) == 1));
  // No third copy: at most two at once.
  KvPool three(lru_tiers({8}), {member(0, {2}), member(1, {2}), member(2, {2}), member(3, {2})}, 8,
               KvPool::Placement::LocalFirst, 1, 2);
  three.act_as(0);
  three.index().reference(0);
  for (uint32_t r : {1u, 2u, 3u, 3u, 3u}) three.read_remotely(0, r);
  CHECK((three.replicas_held() == 2 && three.source(0, 0, 3) == 0));
}

TEST_CASE("kv pool: a warm pool holds the stream before time 0, placed with no writer and nothing moved") {
  // Two requests naming blocks 0..5; tier 0 holds 3 of them, tier 1 the rest.
  std::vector<ServingRequest> reqs(2);
  reqs[0].prefix_blocks = {0, 1, 2, 3};
  reqs[1].prefix_blocks = {0, 4, 5};
  SECTION("local first: no share preferred, a demotion stays with its share") {
    KvPool pool(lru_tiers({3, 4}), {member(0, {1, 2}), member(1, {2, 2})}, 8);
    pool.act_as(1);
    pool.warm(reqs);
    const ReplaySession& ix = pool.index();
    for (uint32_t b : {0u, 4u, 5u}) CHECK(ix.holder(b) == 0);  // the latest three, in stream order
    for (uint32_t b : {1u, 2u, 3u}) CHECK(ix.holder(b) == 1);
    // Block 0 first went to the share with the most room (member 1's), block
    // 1 to the first of two equal ones, block 2 to member 1's last slot.
    CHECK(pool.home(1, 1) == 0);
    CHECK(pool.home(2, 1) == 1);
    CHECK(pool.used(0, 0) + pool.used(1, 0) == 3);
    CHECK(pool.used(0, 1) + pool.used(1, 1) == 3);
    for (uint32_t m = 0; m < 2; ++m) CHECK(pool.take_moves(m).empty());
    for (uint32_t b = 0; b < 6; ++b) CHECK((pool.writer(b) == KvPool::kNoMember && !pool.unsent(b)));
    // Afterwards a member's own writes are moved as usual.
    pool.act_as(0);
    pool.index().reference(6);
    const auto moves = pool.take_moves(0);
    REQUIRE(moves.size() >= 1);
    CHECK((moves[0].tier == 0 && moves[0].from == 100));
    CHECK(pool.writer(6) == 0);
  }
  SECTION("hashed: every block in its hash's share, as a member's write would place it") {
    KvPool warm(lru_tiers({8}), {member(0, {8}), member(1, {8})}, 8, KvPool::Placement::Hashed);
    KvPool written(lru_tiers({8}), {member(0, {8}), member(1, {8})}, 8, KvPool::Placement::Hashed);
    warm.warm(reqs);
    written.act_as(1);
    for (const ServingRequest& q : reqs)
      for (uint32_t b : q.prefix_blocks) written.index().reference(b);
    for (uint32_t b = 0; b < 6; ++b) CHECK(warm.home(b, 0) == written.home(b, 0));
    CHECK(warm.used(0, 0) + warm.used(1, 0) == 6);
    CHECK((warm.used(0, 0) > 0 && warm.used(1, 0) > 0));
    CHECK((warm.take_moves(0).empty() && warm.take_moves(1).empty()));
    CHECK(!written.take_moves(1).empty());
  }
}
