// The chunk pool: a group's chunks come as one range where one is free, the
// smallest that holds it; what a group set aside goes to others only when
// nothing else is free; and nothing is handed out twice or lost.
#include <random>

#include "fixture.h"
#include "policies/chunk_pool.h"

using namespace kvtier;
using namespace kvtier::test;

TEST_CASE("chunk pool: a group's chunks are consecutive, from the smallest free range that holds them") {
  ChunkPool p;
  p.reset(100, 4);
  CHECK(p.available() == 100);
  // Group 0 expects 10 chunks: 0 .. 9, taken one by one, interleaved with group 1's 20.
  CHECK(p.take(0, 10) == 0);
  CHECK(p.take(1, 20) == 10);
  for (uint32_t i = 1; i < 10; ++i) {
    CHECK(p.take(0, 10 - i) == i);
    CHECK(p.take(1, 20 - i) == 10 + i);
  }
  CHECK(p.available() == 100 - 10 - 10);  // group 1's other 10 are set aside, still available
  // Group 0 goes back: [0, 10) is free again and is the smallest range that
  // holds 8 (the other free range, [30, 100), is larger).
  std::vector<uint32_t> g0;
  for (uint32_t i = 0; i < 10; ++i) g0.push_back(i);
  p.give_back(0, g0.data(), 10);
  CHECK(p.take(2, 8) == 0);
  // 40 do not fit there: the range after group 1's.
  CHECK(p.take(3, 40) == 30);
  // A group that expects more than any free range holds gets the largest.
  p.give_back(2, std::vector<uint32_t>{0}.data(), 1);  // and [1, 8) it set aside
  CHECK(p.take(2, 200) == 70);                          // [70, 100) is the largest free range
  CHECK(p.take(2, 199) == 71);
}

TEST_CASE("chunk pool: what a group set aside goes to another only when nothing is free") {
  ChunkPool p;
  p.reset(10, 2);
  CHECK(p.take(0, 10) == 0);  // 1 .. 9 set aside for group 0
  CHECK(p.take(1, 1) == 9);   // nothing free: the last of group 0's
  CHECK(p.take(1, 1) == 8);
  for (uint32_t c = 1; c < 8; ++c) CHECK(p.take(0, 1) == c);
  CHECK(p.available() == 0);
  CHECK(p.take(0, 1) == ChunkPool::kNone);
  CHECK(p.take(1, 5) == ChunkPool::kNone);
  // All back: one free range again, which a group expecting all of it takes whole.
  p.give_back(1, std::vector<uint32_t>{9, 8}.data(), 2);
  std::vector<uint32_t> g0{0, 1, 2, 3, 4, 5, 6, 7};
  p.give_back(0, g0.data(), 8);
  CHECK(p.available() == 10);
  CHECK(p.take(1, 10) == 0);
  for (uint32_t c = 1; c < 10; ++c) CHECK(p.take(1, 10 - c) == c);
}

TEST_CASE("chunk pool, randomized: no chunk held twice, none lost, none refused while one is available") {
  std::mt19937 rng(11);
  for (int round = 0; round < 20; ++round) {
    const uint32_t n = 1 + rng() % 300, groups = 1 + rng() % 40;
    ChunkPool p;
    p.reset(n, groups);
    std::vector<std::vector<uint32_t>> held(groups);
    std::vector<int> owner(n, -1);
    uint64_t handed = 0;
    for (int op = 0; op < 3000; ++op) {
      const uint32_t g = rng() % groups;
      if (rng() % 5 == 0) {
        for (uint32_t c : held[g]) owner[c] = -1;
        handed -= held[g].size();
        p.give_back(g, held[g].data(), static_cast<uint32_t>(held[g].size()));
        held[g].clear();
      } else {
        const uint32_t c = p.take(g, 1 + rng() % 50);
        if (c == ChunkPool::kNone) {
          REQUIRE(handed == n);  // refused only when every chunk is held
          continue;
        }
        REQUIRE(c < n);
        REQUIRE(owner[c] == -1);
        owner[c] = static_cast<int>(g);
        held[g].push_back(c);
        ++handed;
      }
      REQUIRE(p.available() == n - handed);
    }
  }
}

TEST_CASE("chunked block table: a group told what it grows to keeps its blocks together while others grow") {
  Table T(4, 2, 64, {1000});
  T.t.chunk(2, 4 * 2 * 16 + 1);
  T.t.allocate(size_t(4 * 2 * 16 + 1) << 2, kNotCreated);
  BlockTable& t = T.t;
  for (uint32_t g = 0; g < 8; ++g) t.expect(g, 64);
  // Every group grows a block at a time, interleaved, as prefill chunks and decode grow them.
  for (uint32_t i = 0; i < 64; ++i)
    for (uint32_t g = 0; g < 8; ++g) REQUIRE(t.take(g, i) != kNoBlock);
  for (uint32_t g = 0; g < 8; ++g)
    for (uint32_t i = 1; i < 64; ++i) CHECK(t.block_at(g, i) == t.block_at(g, i - 1) + 1);
  // A group given back and taken again by another with the same expectation lands there whole.
  const BlockId first = t.block_at(3, 0);
  t.give_back(3);
  t.expect(3, 64);
  for (uint32_t i = 0; i < 64; ++i) REQUIRE(t.take(3, i) != kNoBlock);
  CHECK(t.block_at(3, 0) == first);
  CHECK(t.block_at(3, 63) == first + 63);
}
