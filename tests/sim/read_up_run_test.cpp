// A run of promotions read up as one copy (KvStore::read_up_run) leaves the
// store as room made and a read up of each block in turn do: the same tiers,
// copies, occupancy, counters, jobs, bytes moved and what each transfer
// waits for, under LRU (victims named at once, the run's moves told after
// its rooms) and under policies asked one victim at a time, with victims
// demoted to copies, written down into room copies leave, and predicted
// and never used. Two stores are driven by the same random layers, one
// each way.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "kv_rig.h"
#include "sim_fixture.h"
#include "sim/core/counters.h"
#include "sim/kv/kv_store.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {


// Batches like the transfer planner's: every move between two endpoints
// joins the open transfer of that pair, one job, until the test finishes
// them all; it records bytes, pieces and the jobs each transfer waits for.
class BatchSink final : public MoveSink {
 public:
  BatchSink() : MoveSink(done_) {}
  JobId add(size_t from, size_t to, uint32_t, double bytes, JobId wait) override {
    return join(from, to, bytes, 1, &wait, 1);
  }
  JobId add_prefetch(size_t from, uint32_t, double bytes, JobId wait) override {
    return join(from, 0, bytes, 1, &wait, 1);
  }
  JobId add_run(size_t from, size_t to, uint32_t, double bytes, uint32_t pieces, const JobId* waits,
                size_t n) override {
    return join(from, to, bytes, pieces, waits, n);
  }
  void finish_all() {
    for (const auto& [pair, id] : open_) done_[id] = 1;
    open_.clear();
  }
  std::map<JobId, double> bytes;
  std::map<JobId, uint32_t> pieces;
  std::map<JobId, std::set<JobId>> deps;
  std::map<JobId, std::pair<size_t, size_t>> ends;

 private:
  JobId join(size_t from, size_t to, double b, uint32_t p, const JobId* waits, size_t n) {
    JobId& id = open_[{from, to}];
    if (id == kNoJob) {
      done_.push_back(0);
      id = static_cast<JobId>(done_.size() - 1);
      ends[id] = {from, to};
    }
    for (uint32_t i = 0; i < p; ++i) bytes[id] += b;  // b is each piece's
    pieces[id] += p;
    for (size_t i = 0; i < n; ++i)
      if (!done(waits[i])) deps[id].insert(waits[i]);
    return id;
  }
  std::map<std::pair<size_t, size_t>, JobId> open_;
  std::vector<uint8_t> done_{1};
};

// One sequence of 33 blocks (4K-token prompt, 128-token blocks) of one
// layer in a GPU of 6 blocks, DRAM of `dram_blocks` and, with `ssd`, a
// large SSD.
struct RunRig {
  EngineSetup s;
  EngineCounters c;
  BatchSink sink;
  std::unique_ptr<KvStore> kv;
  RunRig(const std::string& eviction, double dram_blocks, bool ssd) {
    json hw = gpu_dram_ssd(6.5 * kBlock / 1e9, dram_blocks * kBlock / 1e9);
    if (!ssd) hw["tiers"] = json{"gpu", "dram"};
    one_sequence(s, hw, 1, 4096);
    kv = start_store(s, c, sink, json{{"eviction", eviction}});
  }
};

// Everything the two ways must leave alike.
void require_same_store(const RunRig& a, const RunRig& b) {
  const BlockTable& ta = a.kv->table();
  const BlockTable& tb = b.kv->table();
  REQUIRE(ta.size() == tb.size());
  for (size_t t = 0; t < ta.tiers.size(); ++t) {
    REQUIRE(ta.tiers[t].used_blocks == tb.tiers[t].used_blocks);
    REQUIRE(ta.tiers[t].draining_blocks == tb.tiers[t].draining_blocks);
  }
  for (BlockId x = 0; x < ta.size(); ++x) {
    INFO("block " << x);
    REQUIRE(ta.tier(x) == tb.tier(x));
    REQUIRE(ta.copies(x) == tb.copies(x));
    REQUIRE(ta.dirty(x) == tb.dirty(x));
    REQUIRE(a.kv->pending(x) == b.kv->pending(x));
    REQUIRE(a.kv->pending_src(x) == b.kv->pending_src(x));
  }
  REQUIRE(a.c.demoted_blocks == b.c.demoted_blocks);
  REQUIRE(a.c.written_back_blocks == b.c.written_back_blocks);
  REQUIRE(a.c.copies_dropped == b.c.copies_dropped);
  REQUIRE(a.c.peak_blocks == b.c.peak_blocks);
  REQUIRE(a.c.prefetch.prefetched_blocks == b.c.prefetch.prefetched_blocks);
  REQUIRE(a.c.prefetch.wasted_bytes == b.c.prefetch.wasted_bytes);
  for (BlockId x = 0; x < ta.size(); ++x) REQUIRE(a.kv->prefetched(x) == b.kv->prefetched(x));
  REQUIRE(a.sink.bytes == b.sink.bytes);
  REQUIRE(a.sink.pieces == b.sink.pieces);
  REQUIRE(a.sink.deps == b.sink.deps);
  REQUIRE(a.sink.ends == b.sink.ends);
}

}  // namespace

TEST_CASE("kv store: a run read up at once leaves what a read up into room of each block in turn leaves") {
  // A DRAM of 8 blocks over an SSD, or of 28 as the last tier, is full (a
  // block written down takes the room of its oldest copy, or a victim
  // there has nowhere to go); of 40 it never is (one written down adds to
  // its peak). With two tiers every copy is in DRAM.
  for (const auto& [dram, ssd] : {std::pair{8.5, true}, {40.5, true}, {28.5, false}, {40.5, false}})
  for (const char* eviction : {"lru", "fifo", "lfu", "arc", "twoq", "s3fifo", "sieve", "clock"}) {
    INFO("eviction " << eviction << ", DRAM of " << dram << " blocks" << (ssd ? " over an SSD" : ""));
    RunRig a(eviction, dram, ssd), b(eviction, dram, ssd);
    const BlockId n = static_cast<BlockId>(a.kv->table().size());
    REQUIRE(n == 33);
    uint64_t clock = 1;
    for (BlockId x = 0; x < n; ++x, ++clock)
      for (RunRig* r : {&a, &b}) {
        r->kv->set_clock(clock, 0);
        r->kv->allocate(x, n);
      }
    require_same_store(a, b);
    std::mt19937_64 rng(7);
    uint64_t runs = 0, short_runs = 0;
    for (int round = 0; round < 300; ++round, ++clock) {
      std::vector<BlockId> used;
      for (BlockId x = 0; x < n; ++x)
        if (rng() % 100 < 45) used.push_back(x);
      // Sometimes a new token's KV makes a block dirty again (its copies go).
      const BlockId written = static_cast<BlockId>(rng() % n);
      const bool write = rng() % 4 == 0;
      for (RunRig* r : {&a, &b}) {
        r->kv->set_clock(clock, 0);
        r->kv->pin_from(clock);
        for (BlockId x : used) r->kv->touch(x, 0.f);
        if (write) r->kv->write_kv(written, 0, kBlock);
      }
      // The run: the used blocks below the GPU in the tier of the first of
      // them, not draining, in order.
      std::vector<BlockId> run;
      TierId from = 0;
      for (BlockId x : used) {
        const TierId t = a.kv->table().tier(x);
        if (t == 0 || a.kv->draining(x)) continue;
        if (run.empty()) from = t;
        if (t == from) run.push_back(x);
      }
      if (!run.empty()) {
        std::vector<uint8_t> read_a(run.size()), read_b;
        const uint32_t m = a.kv->read_up_run(run.data(), static_cast<uint32_t>(run.size()), from, 0, read_a.data());
        for (BlockId x : run) {
          const bool room = b.kv->make_room(0);
          if (room) b.kv->read_up(x, from, 0, 0);
          read_b.push_back(room);
        }
        REQUIRE(read_a == read_b);
        REQUIRE(m == std::count(read_b.begin(), read_b.end(), 1));
        ++runs;
        short_runs += m < run.size();
      }
      // Sometimes a prediction brings up a block this layer did not read:
      // unless a later layer uses it, it leaves the GPU as a victim that was
      // never used (its bytes wasted).
      if (rng() % 3 == 0) {
        const BlockId p = static_cast<BlockId>(rng() % n);
        for (RunRig* r : {&a, &b}) r->kv->prefetch_up(p, 0);
      }
      std::vector<JobId> wa, wb;
      a.kv->take_room_waits(wa);
      b.kv->take_room_waits(wb);
      REQUIRE(wa == wb);
      if (rng() % 3 == 0)
        for (RunRig* r : {&a, &b}) {
          r->sink.finish_all();
          r->kv->reclaim_drains();
        }
      require_same_store(a, b);
      for (TierId t = 0; t < a.kv->table().tiers.size(); ++t) REQUIRE(a.s.pol.evict->victim(t) == b.s.pol.evict->victim(t));
    }
    CHECK(runs > 200);
    CHECK(short_runs > 0);  // some runs found room for only part of them
  }
}
