// The pooled FIFO the KV store keeps each tier's drains in: oldest first,
// removal anywhere, and nodes reused so that a steady state allocates nothing.
#include <catch2/catch.hpp>

#include <vector>

#include "sim/kv/pooled_fifo.h"

using kvtier::PooledFifo;

namespace {
std::vector<int> items(const PooledFifo<int>& q) {
  std::vector<int> v;
  for (uint32_t i = q.front(); i != q.kEnd; i = q.next(i)) v.push_back(q.at(i));
  return v;
}
uint32_t position_of(const PooledFifo<int>& q, int x) {
  for (uint32_t i = q.front(); i != q.kEnd; i = q.next(i))
    if (q.at(i) == x) return i;
  return q.kEnd;
}
}  // namespace

TEST_CASE("pooled fifo: oldest first, removal anywhere keeps the order of the rest") {
  PooledFifo<int> q;
  CHECK(q.empty());
  for (int x = 1; x <= 5; ++x) q.push_back(x);
  CHECK(items(q) == std::vector<int>{1, 2, 3, 4, 5});
  q.erase(position_of(q, 3));
  CHECK(items(q) == std::vector<int>{1, 2, 4, 5});
  q.erase(position_of(q, 5));  // the newest
  q.push_back(6);
  CHECK(items(q) == std::vector<int>{1, 2, 4, 6});
  q.pop_front();
  CHECK(items(q) == std::vector<int>{2, 4, 6});
  q.erase(position_of(q, 2));
  q.erase(position_of(q, 4));
  q.erase(position_of(q, 6));
  CHECK(q.empty());
  q.push_back(7);
  CHECK(items(q) == std::vector<int>{7});
}

TEST_CASE("pooled fifo: freed nodes are reused, so pushes after pops take no new ones") {
  PooledFifo<int> q;
  for (int x = 0; x < 4; ++x) q.push_back(x);
  std::vector<uint32_t> held;
  for (uint32_t i = q.front(); i != q.kEnd; i = q.next(i)) held.push_back(i);
  for (int round = 0; round < 100; ++round) {
    q.pop_front();
    q.push_back(round);
  }
  // Every position in use is one of the first four nodes.
  for (uint32_t i = q.front(); i != q.kEnd; i = q.next(i)) CHECK(i < 4);
  CHECK(items(q) == std::vector<int>{96, 97, 98, 99});
}
