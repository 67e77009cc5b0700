// The KV store on its own: a store built for a tiny one-sequence shape,
// driven through a sink that records each move instead of simulating it
// (no SimGrid engine), so every byte it moves and every tier's occupancy
// can be checked exactly.
#include <catch2/catch.hpp>

#include "kv_rig.h"
#include "sim_fixture.h"
#include "sim/core/counters.h"
#include "sim/kv/kv_store.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// Each add() is one move; jobs are numbered from 1 and are done once the
// test says so.
class RecordingSink final : public MoveSink {
 public:
  struct Move {
    size_t from, to;
    uint32_t layer;
    double bytes;
    JobId wait_for;
    bool prefetch;
  };
  RecordingSink() : MoveSink(finished_) {}
  JobId add(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, JobId wait_for) override {
    moves.push_back({from_ep, to_ep, layer, raw_bytes, wait_for, false});
    finished_.push_back(0);
    return static_cast<JobId>(moves.size());
  }
  JobId add_prefetch(size_t from, uint32_t layer, double raw_bytes, JobId wait_for) override {
    moves.push_back({from, 0, layer, raw_bytes, wait_for, true});
    finished_.push_back(0);
    return static_cast<JobId>(moves.size());
  }
  // A run is one move (of its first block's bytes), waiting for its first block's job.
  JobId add_run(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, uint32_t, const JobId* waits,
                size_t n) override {
    return add(from_ep, to_ep, layer, raw_bytes, n ? waits[0] : kNoJob);
  }
  void finish(JobId j) { finished_[j] = 1; }
  std::vector<Move> moves;

 private:
  std::vector<uint8_t> finished_{1};  // kNoJob is done
};

// One sequence of 9 blocks (1024-token prompt, one decode step, 128-token
// blocks of 64 KiB) in one layer; tiers GPU, DRAM and SSD holding the
// given numbers of blocks.
struct KvRig {
  EngineSetup s;
  EngineCounters c;
  std::unique_ptr<KvStore> kv;
  RecordingSink sink;

  KvRig(uint64_t gpu_blocks, uint64_t dram_blocks, const json& eviction = "lru") {
    // Half a block more than asked: the tiny model's weights take a few bytes.
    one_sequence(s, gpu_dram_ssd((double(gpu_blocks) + 0.5) * kBlock / 1e9, (double(dram_blocks) + 0.5) * kBlock / 1e9), 1,
                 1024);
    kv = start_store(s, c, sink, json{{"eviction", eviction}});
    REQUIRE(kv->table().size() == 9);
    REQUIRE(kv->table().tiers[0].capacity_blocks == gpu_blocks);
    REQUIRE(kv->table().tiers[1].capacity_blocks == dram_blocks);
  }
  const TierInfo& tier(TierId t) const { return kv->table().tiers[t]; }
  TierId where(BlockId b) const { return kv->table().tier(b); }
  // Allocates blocks first..last in order, each a layer computation later.
  void allocate(BlockId first, BlockId last) {
    for (BlockId b = first; b <= last; ++b) {
      kv->set_clock(b + 1, 0);
      kv->allocate(b, 9);
    }
  }
};

}  // namespace

TEST_CASE("kv store: demoting a victim of a full tier writes down exactly its bytes") {
  KvRig r(2, 100);
  r.allocate(0, 1);
  CHECK(r.sink.moves.empty());
  r.allocate(2, 2);  // the GPU is full: its least recently used block goes down
  REQUIRE(r.sink.moves.size() == 1);
  const auto& m = r.sink.moves[0];
  CHECK(m.from == 0);
  CHECK(m.to == 1);
  CHECK(m.bytes == kBlock);
  CHECK(m.wait_for == kNoJob);
  CHECK(r.where(0) == 1);
  CHECK(r.kv->pending(0) == 1);
  // Its room on the GPU went to block 2 at once: a reader of block 0 waits
  // for the write and reads DRAM, and what goes into the room waits too.
  CHECK(r.kv->pending_src(0) == KvStore::kNoSource);
  std::vector<JobId> waits;
  r.kv->take_room_waits(waits);
  CHECK(waits == std::vector<JobId>{1});
  CHECK(r.tier(0).used_blocks == 2);
  CHECK(r.tier(0).draining_blocks == 0);
  CHECK(r.tier(1).used_blocks == 1);
  CHECK(r.c.demoted_blocks == 1);
  CHECK(r.c.written_back_blocks == 1);
}

TEST_CASE("kv store: a read up leaves a counted copy, and demoting the block again moves no bytes") {
  KvRig r(2, 100);
  r.allocate(0, 2);  // block 0 written down to DRAM
  REQUIRE(r.sink.moves.size() == 1);
  r.kv->set_clock(4, 0);
  REQUIRE(r.kv->make_room(0));  // block 1 written down too
  REQUIRE(r.sink.moves.size() == 2);
  CHECK(r.where(1) == 1);
  const JobId j = r.kv->read_up(0, 1, 0, 0);
  REQUIRE(r.sink.moves.size() == 3);
  CHECK(j == 3);
  CHECK(r.sink.moves[2].from == 1);
  CHECK(r.sink.moves[2].to == 0);
  CHECK(r.sink.moves[2].bytes == kBlock);
  CHECK(r.sink.moves[2].wait_for == 1);  // behind the write that brought it down
  CHECK(r.where(0) == 0);
  CHECK(r.kv->table().has_copy(0, 1));
  CHECK(r.kv->pending(0) == j);
  CHECK(r.kv->pending_src(0) == KvStore::kNoSource);
  CHECK(r.tier(0).used_blocks == 2);  // blocks 2 and 0
  CHECK(r.tier(1).used_blocks == 2);  // block 1 and block 0's copy
  // Block 2 used since: block 0 is the GPU's least recently used.
  r.kv->set_clock(5, 0);
  r.kv->touch(2, 0.f);
  REQUIRE(r.kv->make_room(0));
  CHECK(r.sink.moves.size() == 3);  // its copy below became its own again
  CHECK(r.where(0) == 1);
  CHECK(!r.kv->table().has_copy(0, 1));
  CHECK(r.tier(0).used_blocks == 1);
  CHECK(r.tier(0).draining_blocks == 0);
  CHECK(r.tier(1).used_blocks == 2);
  CHECK(r.c.demoted_blocks == 3);
  CHECK(r.c.written_back_blocks == 2);
}

TEST_CASE("kv store: exclusive tiers keep no copy, so the same demotion writes again") {
  KvRig r(2, 100, json{{"name", "clock"}, {"write_back", false}});
  r.allocate(0, 2);
  r.kv->set_clock(4, 0);
  REQUIRE(r.kv->make_room(0));
  REQUIRE(r.sink.moves.size() == 2);
  BlockId up = 0;
  while (r.where(up) != 1) ++up;
  r.kv->read_up(up, 1, 0, 0);
  CHECK(r.kv->table().copies(up) == 0);
  CHECK(r.tier(1).used_blocks == 1);
  // The GPU (the block read up and block 2) full again: whichever goes
  // down is written.
  r.kv->set_clock(5, 0);
  r.allocate(3, 3);
  REQUIRE(r.sink.moves.size() == 4);
  CHECK(r.sink.moves[3].from == 0);
  CHECK(r.sink.moves[3].to == 1);
  CHECK(r.sink.moves[3].bytes == kBlock);
  CHECK(r.c.written_back_blocks == 3);
}

TEST_CASE("kv store: a drain keeps its room until its write is done, then reclaim_drains returns it") {
  // HKM demotes DRAM (the middle tier) in the background above its watermark: 2 of 4 blocks.
  KvRig r(2, 4, json{{"name", "hkm"}, {"watermark", 0.5}});
  r.allocate(0, 4);  // blocks 0, 1, 2 written down to DRAM
  REQUIRE(r.sink.moves.size() == 3);
  CHECK(r.tier(1).used_blocks == 3);
  r.kv->background_demotion();  // one DRAM block written to the SSD
  REQUIRE(r.sink.moves.size() == 4);
  const auto& m = r.sink.moves[3];
  CHECK(m.from == 1);
  CHECK(m.to == 2);
  CHECK(m.bytes == kBlock);
  CHECK(r.tier(1).used_blocks == 2);
  CHECK(r.tier(1).draining_blocks == 1);
  CHECK(r.tier(1).occupied_blocks() == 3);
  CHECK(r.tier(2).used_blocks == 1);
  r.kv->reclaim_drains();
  CHECK(r.tier(1).draining_blocks == 1);  // the write has not landed
  r.sink.finish(4);
  r.kv->reclaim_drains();
  CHECK(r.tier(1).draining_blocks == 0);
  CHECK(r.tier(1).occupied_blocks() == 2);
}

TEST_CASE("kv store: lru with a watermark brings every tier but the last down to it in the background") {
  // Six blocks on a GPU of four and a DRAM of four: blocks 0 and 1 go to
  // DRAM on demand as 4 and 5 are made.
  KvRig plain(4, 4);
  KvRig half(4, 4, json{{"name", "lru"}, {"watermark", 0.5}});
  for (KvRig* r : {&plain, &half}) {
    r->allocate(0, 5);
    REQUIRE(r->sink.moves.size() == 2);
    REQUIRE(r->tier(0).used_blocks == 4);
    REQUIRE(r->tier(1).used_blocks == 2);
    r->kv->background_demotion();
  }
  // Without a watermark nothing more moves.
  CHECK(plain.sink.moves.size() == 2);
  CHECK(plain.tier(0).used_blocks == 4);
  CHECK(plain.tier(1).used_blocks == 2);
  // With 0.5 the GPU writes its two least recently used blocks (2 and 3) to
  // DRAM, and DRAM, then at four, writes its two (0 and 1) to the SSD.
  REQUIRE(half.sink.moves.size() == 6);
  CHECK(half.tier(0).used_blocks == 2);
  CHECK(half.tier(1).used_blocks == 2);
  CHECK(half.tier(2).used_blocks == 2);
  CHECK(half.where(0) == 2);
  CHECK(half.where(1) == 2);
  CHECK(half.where(2) == 1);
  CHECK(half.where(3) == 1);
  CHECK(half.where(4) == 0);
  CHECK(half.where(5) == 0);
}

TEST_CASE("kv store: a reservation keeps room free until it is released") {
  KvRig r(4, 100);
  r.allocate(0, 2);
  REQUIRE(r.tier(0).used_blocks == 3);
  r.kv->reserve_room(0, 2);  // two of four blocks set aside: one block leaves
  CHECK(r.kv->reserved_blocks(0) == 2);
  REQUIRE(r.sink.moves.size() == 1);
  CHECK(r.sink.moves[0].from == 0);
  CHECK(r.sink.moves[0].bytes == kBlock);
  CHECK(r.tier(0).used_blocks == 2);
  CHECK(r.tier(0).capacity_blocks == 2);  // what placement and eviction see is the room left
  r.allocate(3, 3);  // room for it only once another block left
  CHECK(r.sink.moves.size() == 2);
  CHECK(r.tier(0).used_blocks == 2);
  r.kv->release_room(0);
  CHECK(r.kv->reserved_blocks(0) == 0);
  CHECK(r.tier(0).capacity_blocks == 4);
  r.allocate(4, 5);  // the room is back: two more fit without a move
  CHECK(r.sink.moves.size() == 2);
  CHECK(r.tier(0).used_blocks == 4);
}

TEST_CASE("kv store: a reservation a tier's pinned blocks cannot make keeps what they hold") {
  KvRig r(4, 100);
  r.allocate(0, 2);
  r.kv->pin_from(1);  // every block used from clock 1 on is in use by a layer in flight
  for (BlockId b = 0; b <= 2; ++b) r.kv->touch(b, 0.f);
  r.kv->reserve_room(0, 3);
  CHECK(r.sink.moves.empty());
  CHECK(r.kv->reserved_blocks(0) == 1);  // the room the three blocks leave
  CHECK(r.tier(0).used_blocks == 3);
}

TEST_CASE("kv store: invalidate_copies and a new token's write drop the copies below") {
  KvRig r(2, 100);
  r.allocate(0, 2);
  r.kv->set_clock(4, 0);
  REQUIRE(r.kv->make_room(0));
  r.kv->read_up(0, 1, 0, 0);
  REQUIRE(r.kv->table().has_copy(0, 1));
  REQUIRE(r.tier(1).used_blocks == 2);
  r.kv->invalidate_copies(0);
  CHECK(r.kv->table().copies(0) == 0);
  CHECK(r.tier(1).used_blocks == 1);
  // Read up again and written: on the GPU the token moves no bytes, its copy goes.
  r.kv->set_clock(5, 0);
  r.kv->touch(0, 0.f);
  REQUIRE(r.kv->make_room(0));  // block 2 written down
  const size_t before = r.sink.moves.size();
  r.kv->read_up(1, 1, 0, 0);
  REQUIRE(r.kv->table().has_copy(1, 1));
  r.kv->write_kv(1, 0, 512);
  CHECK(r.kv->table().copies(1) == 0);
  CHECK(r.sink.moves.size() == before + 1);
  // Below the GPU the token is written from the GPU (endpoint 3), behind the block's last move.
  REQUIRE(r.where(2) == 1);
  const JobId last = r.kv->pending(2);
  r.kv->write_kv(2, 0, 512);
  REQUIRE(r.sink.moves.size() == before + 2);
  CHECK(r.sink.moves.back().from == 3);
  CHECK(r.sink.moves.back().to == 1);
  CHECK(r.sink.moves.back().bytes == 512);
  CHECK(r.sink.moves.back().wait_for == last);
  CHECK(r.kv->pending(2) == JobId(before + 2));
  CHECK(r.kv->table().dirty(2) == 1);
}

TEST_CASE("kv store: eviction sizes itself by the room a reservation leaves (prefill's output buffers)") {
  // The GPU's memory holds 1.9 sequences' layer of prompt KV, less than the
  // two kernels' output that prefill double-buffers: prefill reserves GPU
  // tier room for it. 2Q decides whether a tier is full from its capacity;
  // were the reservation hidden from it, it would keep the room prefill set
  // aside and the output would not fit.
  const double seq_layer = 1024.0 * 512;
  json cfg = {{"hardware",
               {{"devices",
                 {{"gpu", fast_gpu(1.9 * seq_layer / 1e9)},
                  {"dram", {{"kind", "dram"}, {"capacity_GB", 1}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}}}},
                {"links", {{"pcie", {{"ends", {"gpu", "dram"}}, {"bandwidth_GBps", 1}, {"latency_us", 0}}}}},
                {"tiers", {"gpu", "dram"}}}},
              {"model", tiny_model(4)},
              {"workload", {{"batch", 4}, {"context_tokens", 1024}, {"decode_steps", 4}, {"block_tokens", 128},
                            {"prefill", "compute"}, {"trace", {{"kind", "none"}}}}},
              {"policies", {{"evaluation", "exact"}, {"eviction", "twoq"}, {"placement", "top"}}}};
  json m = simulate(cfg);
  INFO(m.dump());
  REQUIRE(m.contains("ttft_s"));
  CHECK(m["prefill_staging_peak_bytes"].get<double>() <= 1.9 * seq_layer);
}

TEST_CASE("kv store: a prefix-cache load reads the cached bytes into the block's tier, after the cache's write") {
  KvRig r(4, 100);
  r.allocate(0, 0);  // on the GPU
  const JobId j = r.kv->load_cached(0, 1, 0, 3000.0, 7);
  REQUIRE(r.sink.moves.size() == 1);
  CHECK(r.sink.moves[0].from == 1);
  CHECK(r.sink.moves[0].to == 0);
  CHECK(r.sink.moves[0].bytes == 3000.0);
  CHECK(r.sink.moves[0].wait_for == 7);
  CHECK(r.kv->pending(0) == j);  // attention reading block 0 waits for it
  CHECK(r.kv->pending_src(0) == KvStore::kNoSource);
  // Cached in the block's own tier: the data is there, nothing moves.
  KvRig d(0 + 1, 100);
  d.allocate(0, 1);  // block 0 written down to DRAM, block 1 on the GPU
  REQUIRE(d.where(0) == 1);
  const size_t before = d.sink.moves.size();
  CHECK(d.kv->load_cached(0, 1, 0, 3000.0, kNoJob) == kNoJob);
  CHECK(d.sink.moves.size() == before);
}

TEST_CASE("kv store: a block a prefix-cache load fills stays while room is made for the prompt's next blocks") {
  // A prompt's cached blocks are placed and loaded one after another, all
  // of them read by the layer being selected. LFU (a new block has the
  // lowest count) and ARC (T1) would pick the block whose load was just
  // issued, and LRU the oldest new one: its write down would wait for its
  // load, and in a run the read that brings it back up joins that same load
  // (the two wait for each other). The loaded blocks keep the GPU; the
  // third goes to DRAM.
  for (const char* eviction : {"lru", "lfu", "arc"}) {
    INFO(eviction);
    KvRig r(2, 100, eviction);
    r.kv->begin_layer(5, 0, 0, 0.0);
    r.kv->pin_from(5);
    for (BlockId b = 0; b < 3; ++b) {
      r.kv->allocate(b, 9);
      if (r.where(b) == 0) r.kv->load_cached(b, 1, 0, double(kBlock), kNoJob);
    }
    CHECK(r.where(0) == 0);
    CHECK(r.where(1) == 0);
    CHECK(r.where(2) == 1);
    for (const auto& m : r.sink.moves) CHECK(!(m.from == 0 && m.to == 1));  // nothing written back
    CHECK(r.c.demoted_blocks == 0);
  }
}

TEST_CASE("kv store: room goes to the oldest drain no layer in flight reads, the drains behind keep their order") {
  // HKM demotes DRAM (4 blocks) down to its watermark (2) in the background:
  // two writes to the SSD still in flight are DRAM's drains, oldest first.
  KvRig r(2, 4, json{{"name", "hkm"}, {"watermark", 0.5}});
  r.allocate(0, 5);  // blocks 0..3 written down to DRAM, 4 and 5 on the GPU
  REQUIRE(r.tier(1).used_blocks == 4);
  REQUIRE(r.sink.moves.size() == 4);
  for (JobId j = 1; j <= 4; ++j) r.sink.finish(j);  // in DRAM: a drain there is read there
  r.kv->background_demotion();
  REQUIRE(r.tier(1).draining_blocks == 2);
  REQUIRE(r.sink.moves.size() == 6);
  const JobId first_write = 5, second_write = 6;
  BlockId first = kNoBlock, second = kNoBlock;
  for (BlockId b = 0; b < 9; ++b) {
    if (r.kv->pending(b) == first_write) first = b;
    if (r.kv->pending(b) == second_write) second = b;
  }
  REQUIRE(first != kNoBlock);
  REQUIRE(second != kNoBlock);
  CHECK(r.kv->pending_src(first) == 1);
  CHECK(r.kv->pending_src(second) == 1);
  // A layer in flight reads the oldest drain's block (where its data still is).
  r.kv->set_clock(20, 0);
  r.kv->touch(first, 0.f);
  r.kv->pin_from(20);
  std::vector<JobId> waits;
  r.kv->take_room_waits(waits);  // the GPU's rooms above, handed out before
  waits.clear();
  // DRAM is full (2 blocks and 2 drains): the room goes to the second drain.
  REQUIRE(r.kv->make_room(1));
  CHECK(r.tier(1).draining_blocks == 1);
  CHECK(r.kv->pending_src(first) == 1);  // still read from DRAM
  CHECK(r.kv->pending_src(second) == KvStore::kNoSource);  // read after its write lands, from the SSD
  r.kv->take_room_waits(waits);
  CHECK(waits == std::vector<JobId>{second_write});
  // Its write lands later than the first one's: reclaiming waits for the first, which is still in order.
  r.sink.finish(first_write);
  r.kv->pin_from(21);
  r.kv->reclaim_drains();
  CHECK(r.tier(1).draining_blocks == 0);
}

TEST_CASE("kv store: a block written down before its move into the tier has landed is read after the write, from below") {
  // HKM demotes DRAM (4 blocks) down to its watermark (2) in the background.
  KvRig r(2, 4, json{{"name", "hkm"}, {"watermark", 0.5}});
  r.allocate(0, 5);  // blocks 0..3 written down to DRAM (moves 1..4), 4 and 5 on the GPU
  REQUIRE(r.sink.moves.size() == 4);
  std::vector<JobId> into_dram(6, kNoJob);
  for (BlockId b = 0; b < 4; ++b) into_dram[b] = r.kv->pending(b);
  // Only block 0 has arrived in DRAM; HKM demotes the two oldest, 0 and 1.
  r.sink.finish(into_dram[0]);
  r.kv->background_demotion();
  REQUIRE(r.sink.moves.size() == 6);
  REQUIRE(r.where(0) == 2);
  REQUIRE(r.where(1) == 2);
  for (BlockId b = 0; b < 2; ++b) {
    INFO("block " << b);
    // The write to the SSD waits for the one into DRAM either way.
    CHECK(r.sink.moves[r.kv->pending(b) - 1].wait_for == into_dram[b]);
    // Its data is read from DRAM while it drains only where it is all there.
    CHECK(r.kv->pending_src(b) == (r.sink.done(into_dram[b]) ? 1 : KvStore::kNoSource));
    CHECK(r.kv->draining(b) == r.sink.done(into_dram[b]));
  }
  CHECK(r.kv->pending_src(0) == 1);
  CHECK(r.kv->pending_src(1) == KvStore::kNoSource);
}

TEST_CASE("kv store: a new sequence in a released sequence's place is new to the policies") {
  // LFU keeps a block's count across moves; a released block's count must
  // not pass to the new block in its place. Block 0 of the first sequence
  // is used five times; after the release, the new block 0 is never used
  // and the new block 1 once, so a full GPU sends the new block 0 down.
  KvRig r(2, 100, "lfu");
  r.allocate(0, 1);
  for (int i = 0; i < 5; ++i) r.kv->touch(0, 0.f);
  r.kv->release_sequence(0);
  CHECK(r.where(0) == kNotCreated);
  CHECK(r.tier(0).used_blocks == 0);
  r.allocate(0, 1);
  r.kv->touch(1, 0.f);
  r.allocate(2, 2);
  CHECK(r.where(0) == 1);
  CHECK(r.where(1) == 0);
  CHECK(r.where(2) == 0);
}

TEST_CASE("kv store: a new block in a released block's place waits for nothing of the old one's") {
  // Block 0 is written down to DRAM to make room for block 1 and released
  // before that write lands. The new block 0 is new KV in the GPU: it
  // waits for no job and is read nowhere else, whichever block held its
  // place before.
  KvRig r(1, 100);
  r.allocate(0, 1);
  REQUIRE(r.where(0) == 1);
  const JobId write = r.kv->pending(0);
  REQUIRE(write != kNoJob);
  REQUIRE_FALSE(r.sink.done(write));
  r.kv->release_sequence(0);
  r.kv->set_clock(10, 0);
  r.kv->allocate(0, 9);
  CHECK(r.where(0) == 0);
  CHECK(r.kv->pending(0) == kNoJob);
  CHECK(r.kv->pending_src(0) == KvStore::kNoSource);
  CHECK_FALSE(r.kv->draining(0));
}

TEST_CASE("kv store: the room of a released block still being written down goes to whoever needs it") {
  // LRU with a watermark writes block 0 down in the background: its room in
  // the GPU drains until the write lands. Its sequence is released, and a
  // new block in its place is read by the layer in flight (pinned). The
  // drain is the released block's, not the new one's: block 1 takes its
  // room (and waits for the write) instead of going to DRAM.
  KvRig r(2, 100, json{{"name", "lru"}, {"watermark", 0.5}});
  r.allocate(0, 1);
  r.kv->background_demotion();
  REQUIRE(r.where(0) == 1);
  const JobId write = r.kv->pending(0);
  REQUIRE_FALSE(r.sink.done(write));
  REQUIRE(r.tier(0).draining_blocks == 1);
  r.kv->release_sequence(0);
  REQUIRE(r.tier(0).draining_blocks == 1);
  r.kv->set_clock(10, 0);
  r.kv->allocate(0, 9);
  r.kv->touch(0, 0.f);
  r.kv->pin_from(10);
  r.kv->set_clock(11, 0);
  r.kv->allocate(1, 9);
  CHECK(r.where(0) == 0);
  CHECK(r.where(1) == 0);
  CHECK(r.tier(0).draining_blocks == 0);
  std::vector<JobId> waits;
  r.kv->take_room_waits(waits);
  CHECK(waits == std::vector<JobId>{write});
}
