// In serving, a finished request's blocks are released and their places in
// the block table go to the next request's blocks (a slot, or a chunk of the
// pool, taken again). A policy must then see a new block: nothing of what it
// knew about the block that had the place before (hit history, ghost
// entries, counters, a group's length) may carry over.
#include <map>
#include <random>

#include "fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// What KvStore::release does to a block of a finished sequence: it leaves
// its tier (the policy is told), its history is cleared, the policies forget
// it, and its place reads "not created" again.
void release(Table& T, EvictionPolicy& e, BlockId b) {
  const TierId t = T.t.tier(b);
  if (t < T.t.tiers.size()) {
    e.on_remove(b, t);
    --T.t.tiers[t].used_blocks;
  }
  e.on_release(b);
  T.t.tier(b) = kNotCreated;
  T.t.last_access(b) = 0;
  T.t.access_count(b) = 0;
  T.t.mass[b] = T.t.last_mass[b] = 0.f;
  T.t.created[b] = 0;
  T.t.dirty(b) = 0;
}

}  // namespace

TEST_CASE("every eviction policy: a new sequence in a released sequence's place is a new sequence") {
  // Sequences X and Z run; X finishes and is released; Y starts. In run A, Y
  // takes X's place (slot 0); in run B, a place never used (slot 1). The
  // same creations, uses, pins, victims and moves in both, by (sequence,
  // index): every victim must be the same block of the same sequence.
  for (const auto& kv : Registry<EvictionPolicy>::instance().entries()) {
    if (kv.first == "belady") continue;  // needs the future, which only the replay has
    DYNAMIC_SECTION(kv.first) {
      for (uint64_t seed : {1, 2, 3}) {
        const uint32_t blocks = 40;
        Table A(3, 1, blocks, {8, 14, 1000});
        Table B(3, 1, blocks, {8, 14, 1000});
        auto ea = make<EvictionPolicy>(kv.first);
        auto eb = make<EvictionPolicy>(kv.first);
        ea->setup(A.t);
        eb->setup(B.t);
        enum Seq : uint32_t { X, Y, Z };
        const uint32_t slot_a[3] = {0, 0, 2}, slot_b[3] = {0, 1, 2};
        std::vector<uint32_t> created(3, 0);
        bool x_gone = false;
        // (sequence, index) of a block of run A or B, for comparing victims.
        auto who = [&](const BlockTable& t, const uint32_t* slot, BlockId b) {
          if (b == kNoBlock) return std::make_pair(uint32_t(kNoBlock), 0u);
          const uint32_t s = t.seq_of(b);
          uint32_t q = s == slot[Z] ? uint32_t(Z) : (s == slot[Y] && (x_gone || slot[Y] != slot[X]) ? uint32_t(Y) : uint32_t(X));
          return std::make_pair(q, t.index_of(b));
        };
        auto bid = [&](Table& T, const uint32_t* slot, uint32_t q, uint32_t i) { return T.t.id(slot[q], 0, i); };
        std::mt19937_64 rng(seed);
        for (uint32_t round = 0; round < 240; ++round) {
          A.t.step = B.t.step = round;
          if (round == 100) {
            for (uint32_t i = 0; i < created[X]; ++i) {
              release(A, *ea, bid(A, slot_a, X, i));
              release(B, *eb, bid(B, slot_b, X, i));
            }
            x_gone = true;
          }
          const uint32_t active[2] = {x_gone ? uint32_t(Y) : uint32_t(X), uint32_t(Z)};
          // The active sequences grow, into the top tier where there is
          // room, else the next; the drop policies keep their budgets.
          for (uint32_t q : active) {
            if (created[q] >= blocks || rng() % 2) continue;
            const uint32_t i = created[q]++;
            TierId t = 0;
            while (A.t.tiers[t].used_blocks >= A.t.tiers[t].capacity_blocks) ++t;
            A.create(ea.get(), bid(A, slot_a, q, i), t);
            B.create(eb.get(), bid(B, slot_b, q, i), t);
            const BlockId va = ea->budget_victim(slot_a[q], 0), vb = eb->budget_victim(slot_b[q], 0);
            REQUIRE(who(A.t, slot_a, va) == who(B.t, slot_b, vb));
            if (va != kNoBlock) {
              A.drop(ea.get(), va);
              B.drop(eb.get(), vb);
            }
          }
          // Attention reads some of them, with masses; now and then a layer
          // in flight pins what it reads.
          if (round % 9 == 0) {
            A.pin_from_now();
            B.pin_from_now();
          }
          for (uint32_t q : active)
            for (uint32_t i = 0; i < created[q]; ++i) {
              const BlockId a = bid(A, slot_a, q, i), b = bid(B, slot_b, q, i);
              if (A.t.tier(a) >= kDropped || rng() % 3) continue;
              const float m = float(rng() % 100) / 100.f;
              A.use(ea.get(), a, m);
              B.use(eb.get(), b, m);
            }
          // Room is made in a full tier of the top two (the lower first); a
          // victim moves down a tier (or is dropped, for the policies that drop).
          for (TierId t : {TierId(1), TierId(0)}) {
            if (A.t.tiers[t].used_blocks < A.t.tiers[t].capacity_blocks || rng() % 4 == 0) continue;
            const BlockId va = ea->victim(t), vb = eb->victim(t);
            REQUIRE(who(A.t, slot_a, va) == who(B.t, slot_b, vb));
            if (va == kNoBlock) continue;
            if (ea->drops()) {
              A.drop(ea.get(), va);
              B.drop(eb.get(), vb);
            } else {
              A.move(ea.get(), va, TierId(t + 1));
              B.move(eb.get(), vb, TierId(t + 1));
            }
          }
          // A block read from below moves up to the top tier where there is room.
          const uint32_t q = active[rng() % 2];
          if (created[q] > 0 && A.t.tiers[0].used_blocks < A.t.tiers[0].capacity_blocks) {
            const uint32_t i = uint32_t(rng() % created[q]);
            const BlockId a = bid(A, slot_a, q, i), b = bid(B, slot_b, q, i);
            if (A.t.tier(a) > 0 && A.t.tier(a) < kDropped) {
              A.move(ea.get(), a, 0);
              B.move(eb.get(), b, 0);
            }
          }
          A.t.pin_stamp = B.t.pin_stamp = 0;
        }
      }
    }
  }
}

TEST_CASE("every eviction policy: a tier with a block that may leave gives a victim") {
  // The store asks for a victim once copies and drains are gone, so the
  // policy's own count of the tier may be below its capacity (room held by
  // blocks being written down): whatever the counts, a tier holding an
  // unpinned block must give one.
  for (const auto& kv : Registry<EvictionPolicy>::instance().entries()) {
    if (kv.first == "belady") continue;  // needs the future, which only the replay has
    DYNAMIC_SECTION(kv.first) {
      for (uint64_t seed : {1, 2, 3, 4}) {
        Table T(2, 2, 20, {24, 1000});
        auto e = make<EvictionPolicy>(kv.first);
        e->setup(T.t);
        std::mt19937_64 rng(seed);
        std::vector<uint32_t> next(4, 0);  // each (seq, layer) creates its blocks in order
        for (int round = 0; round < 400; ++round) {
          T.t.step = uint32_t(round);
          const uint32_t g = uint32_t(rng() % 4);
          if (next[g] < 20 && T.t.tiers[0].used_blocks < 24 - rng() % 6) T.create(e.get(), T.t.block_at(g, next[g]++), 0);
          for (BlockId x = 0; x < T.t.size(); ++x)
            if (T.t.tier(x) == 0 && rng() % 4 == 0) T.use(e.get(), x, float(rng() % 10));
          T.pin_from_now();
          for (BlockId x = 0; x < T.t.size(); ++x)
            if (T.t.tier(x) == 0 && rng() % 3) T.use(e.get(), x);
          bool free = false;
          for (BlockId x = 0; x < T.t.size(); ++x) free |= T.t.tier(x) == 0 && !T.t.pinned(x);
          const BlockId v = e->victim(0);
          if (free) REQUIRE(v != kNoBlock);
          if (v != kNoBlock) {
            REQUIRE_FALSE(T.t.pinned(v));
            if (e->drops()) T.drop(e.get(), v);
            else T.move(e.get(), v, 1);
          }
          T.t.pin_stamp = 0;
        }
      }
    }
  }
}
