// The KV store: where every block lives (BlockTable: its own tier, the
// copies tiers below keep of it, what is still moving it), the tiers'
// capacity, and the moves between them (reads up, demotions, drops), driven
// by the eviction and placement policies. Bytes that must move are handed to
// a MoveSink (sim/core/job.h): the transfer planner in a run, so the store
// itself needs no SimGrid.
//
// Copies: a block read up leaves a valid copy in the tier it came from
// (unless eviction is exclusive); each tier keeps its copies in a list,
// oldest at the tail, counted against its capacity and dropped first when it
// needs room. Demoting a block with a valid copy below moves no bytes.
//
// Drains: a block written down keeps its memory in the tier it leaves until
// the write lands (the data is read from there while it moves, if it had
// all arrived there when the write began). Until then that room is the
// tier's draining_blocks. Whoever needs the room takes the
// oldest drain and must wait for its write (and for the writes the room
// below it was waiting for) before putting data there: make_room hands
// those jobs out through take_room_waits.
//
// Every change of a block's state is a method of the store named for what
// happens (a read up, a prediction, a write of new KV, prefill output); the
// callers keep the scheduling and read the state through const accessors,
// so no reference into the store's arrays escapes it.
//
// Reservations: room of a tier set aside (prefill's output buffers share
// the GPU's memory with its tier); the store places nothing there until
// the reservation is released. While it holds, the tier's capacity_blocks
// is the room left, which is what placement and eviction size themselves by.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "policies/common.h"
#include "sim/core/counters.h"
#include "sim/core/engine_setup.h"
#include "sim/core/job.h"
#include "sim/core/timeline.h"
#include "sim/core/validation_cache.h"
#include "sim/kv/pooled_fifo.h"

namespace kvtier {

class KvStore {
 public:
  // Builds the block table for the run's shape and tiers; capacity errors
  // are ConfigErrors naming the device. With `validating` every check is
  // made and the table's memory committed, but its per-block arrays are not
  // allocated (table().size() is 0): a store that validates, never runs.
  KvStore(EngineSetup& s, EngineCounters& c, ValidationCache* validating = nullptr);

  const BlockTable& table() const { return t_; }
  // Run state, once the run starts: moves that need bytes go to `sink`.
  void start(MoveSink& sink);

  // workload.transfer_unit: the tokens a block holds at the layer being
  // planned (whole blocks unless the unit is tokens), and their bytes.
  void set_tokens_now(uint64_t tokens) { tokens_now_ = tokens; }
  uint64_t held_tokens(BlockId b) const {
    if (!s_.tokens_unit) return s_.bt;
    const uint64_t first = uint64_t(t_.index_of(b)) * s_.bt;
    return tokens_now_ > first ? std::min<uint64_t>(s_.bt, tokens_now_ - first) : 1;
  }
  // Asked once or twice per block access: a whole block's bytes and the
  // bytes per token are the run's (start), not derived from the model again
  // each time (the same product, so the same doubles).
  double data_bytes(BlockId b) const {
    return s_.tokens_unit ? double(held_tokens(b)) * unit_bytes_ : whole_block_bytes_;
  }
  // One sequence's prompt KV of one layer as prefill computes it (0 without
  // computed prefill): what a prefill kernel of one sequence outputs.
  double prefill_output_bytes() const {
    if (!s_.prefill_compute) return 0;
    const uint64_t tokens = s_.tokens_unit ? s_.ctx : uint64_t((s_.ctx + s_.bt - 1) / s_.bt) * s_.bt;
    return double(tokens) * double(s_.kv_unit_bytes_per_token());
  }

  // Per block: the job moving it, if any; while that is a write down
  // (demotion, prefill output), the endpoint still holding the data
  // (kNoSource: the move is a read up, or a write down of data that was
  // still arriving where it left, and a reader must wait for it).
  static constexpr uint8_t kNoSource = 255;
  static_assert(BlockState{}.job == kNoJob && BlockState{}.src == kNoSource,
                "a new block's record says no job moves it and no endpoint holds its data");
  JobId pending(BlockId b) const { return t_.state[b].job; }
  uint8_t pending_src(BlockId b) const { return t_.state[b].src; }
  // b is still being written down and its data is read where it was.
  bool draining(BlockId b) const { return t_.state[b].src != kNoSource && !planner_->done(t_.state[b].job); }
  // Per block: brought to the GPU by a prediction and not used yet.
  bool prefetched(BlockId b) const { return t_.state[b].predicted != 0; }
  // Bytes of predicted blocks still unused (at the end of a run: wasted).
  uint64_t unused_prefetch_bytes() const;

  // The policies' clock: layer computation `clock` of layer `layer` (and of
  // decode step `step` at simulated time now_s); blocks accessed from
  // `stamp` on are pinned (a layer in flight reads them).
  void begin_layer(uint64_t clock, uint32_t step, uint32_t layer, double now_s);
  void set_clock(uint64_t clock, uint32_t layer);
  void pin_from(uint64_t stamp) { t_.pin_stamp = stamp; }

  // The prompt's attention is what b has been used for so far (prefill).
  void seed_prompt(BlockId b, float mass);
  // Attention uses b (not dropped) with `mass`: its history and the
  // eviction and promotion policies see the access. Defined inline (here
  // and below for hit, read_up and the moves they make): they run once or
  // twice for every block access, and a call each costs about as much as
  // what they do.
  void touch(BlockId b, float mass) {
    use_run(&b, &mass, 1);
    s_.pol.evict->on_access(b, t_.tier(b));
  }
  // touch() split in two for a selection of many blocks: use_run() for
  // all of them (their history, then the promotion policy hears of each
  // access in turn), then accessed() for all of them, which tells the
  // eviction policy of each access in the same order, a run of consecutive
  // blocks in one tier as one call (a list policy moves such a run at once).
  // No eviction or promotion callback reads another block's history, so
  // telling them after the run's uses changes nothing they decide. The
  // arrays and the clock are read once for the run: a store into them
  // inside a loop that also calls a policy makes the compiler reload every
  // one of them for every block.
  void use_run(const BlockId* blocks, const float* masses, size_t n) {
    BlockState* const st = t_.state.data();
    const uint64_t clock = t_.clock;
    for (size_t i = 0; i < n; ++i) {
      st[blocks[i]].last_access = clock;
      ++st[blocks[i]].access_count;
    }
    // Until a use or a prompt carries a mass, every block's masses are 0,
    // and a use without one changes neither: two arrays fewer per access
    // where no attention is traced.
    if (masses || masses_) {
      float* const mass = t_.mass.data();
      float* const last_mass = t_.last_mass.data();
      for (size_t i = 0; i < n; ++i) {
        const float m = masses ? masses[i] : 0.f;
        if (m != 0.f || masses_) {
          mass[blocks[i]] += m;
          last_mass[blocks[i]] = m;
          if (m != 0.f) masses_ = true;
        }
      }
    }
    s_.pol.promote->on_access_run(blocks, n, t_);
  }
  void accessed(const BlockId* blocks, size_t n) {
    size_t i = 0;
    while (i < n) {
      const BlockId first = blocks[i];
      const TierId t = t_.tier(first);
      size_t j = i + 1;
      while (j < n && blocks[j] == first + (j - i) && t_.tier(blocks[j]) == t) ++j;
      s_.pol.evict->on_access_run(first, static_cast<uint32_t>(j - i), t);
      i = j;
    }
  }
  // A use of b by attention counts as a hit where its data is read, and
  // settles what a prediction did for it; returns that tier. A block still
  // being written down is read where its data is: the tier it is leaving,
  // which keeps the memory until the write lands.
  TierId hit(BlockId b) {
    BlockState& m = t_.state[b];
    const TierId at = (m.src != kNoSource && !planner_->done(m.job)) ? static_cast<TierId>(m.src) : m.tier;
    ++c_.hits[at];
    const bool on_gpu = s_.gpu_tier && at == 0;
    if (m.predicted) {
      m.predicted = 0;
      --predicted_blocks_;
      ++c_.prefetch.used_blocks;
      if (on_gpu) {
        ++c_.prefetch.covered_blocks;
        ++c_.prefetch.needed_blocks;
      }
    } else if (!on_gpu) {
      ++c_.prefetch.needed_blocks;
    }
    return at;
  }
  // b's data moves up from tier `from` to tier `to` (to < from, room made
  // there by the caller): the job moving it, which b waits for from now.
  JobId read_up(BlockId b, TierId from, TierId to, uint32_t layer) {
    BlockState& st = t_.state[b];
    const JobId j = planner_->add(from, to, layer, data_bytes(b), st.job);
    move(b, from, to);
    st.job = j;
    st.src = kNoSource;
    return j;
  }
  // Promotions of a run: blocks[0..k), each in tier `from` (below the GPU's
  // tier, not predicted, not draining, pinned), read up into the GPU's tier
  // as one copy: make_room(0) and read_up of each in turn. read[i] says whether
  // block i was (room could be made for it); returns how many were.
  uint32_t read_up_run(const BlockId* blocks, uint32_t k, TierId from, uint32_t layer, uint8_t* read);
  // A prediction brings b (below the GPU tier, not predicted yet) to the
  // GPU tier if room can be made there; whether it did.
  bool prefetch_up(BlockId b, uint32_t layer);
  // New KV (`bytes` of it) goes into b where it lives: its copies below go
  // stale and, below the GPU, the bytes are written from the GPU.
  void write_kv(BlockId b, uint32_t layer, double bytes);
  // Prefill output: the whole of b, just allocated below the GPU, is
  // written there from the GPU; the job writing it.
  JobId write_output(BlockId b, uint32_t layer);
  // MatKV: b's precomputed KV is copied from tier `from` into its tier.
  void load_from(BlockId b, TierId from, uint32_t layer);
  // Serving's prefix cache (serving.kv "tiered"): `bytes` of b, just
  // allocated, are read from the cache's copy in tier `from` into b's tier
  // once `after` is done; b is read once they are in, and is in use (pinned)
  // by the layer being selected from now. Returns the job (kNoJob where the
  // cache's tier is b's own: the data is there).
  JobId load_cached(BlockId b, TierId from, uint32_t layer, double bytes, JobId after);

  // Sets aside `blocks` more of tier t's room, as far as its blocks can
  // leave (pinned ones keep theirs); held until release_room(t).
  void reserve_room(TierId t, uint64_t blocks);
  void release_room(TierId t);
  uint64_t reserved_blocks(TierId t) const { return capacity_[t] - t_.tiers[t].capacity_blocks; }
  // Tier t's capacity in blocks of one block-table layer as the full run has
  // it (with a representative layer, L times the room its one layer gets).
  uint64_t full_capacity(TierId t) const { return full_capacity_[t]; }

  // A new block: placement picks a tier, eviction makes room (trying lower
  // tiers if every block of the chosen one is pinned). Returns its tier.
  TierId allocate(BlockId b, uint32_t final_blocks);
  // While deferred (a whole prompt arriving), budgets wait for enforce_budget.
  void defer_budget(bool on) { defer_budget_ = on; }
  void enforce_budget(uint32_t seq, uint32_t layer);
  // Room in tier t: copies go first, then the room of blocks already being
  // written down (the caller waits for their writes: take_room_waits), then
  // the policy's victims; false if nothing can leave.
  bool make_room(TierId t);
  // The writes that rooms handed out since the last call are waiting for:
  // what is put into those rooms must not land before them.
  void take_room_waits(std::vector<JobId>& into);
  // Drains of every tier whose writes have landed give their room back.
  void reclaim_drains();
  void drop(BlockId b);
  // Block `index` of (seq, layer), its room in the block table taken now if
  // the table is chunked and the sequence's KV has not reached it yet; what
  // is created there goes through allocate() as always.
  BlockId block(uint32_t seq, uint32_t layer, uint32_t index);
  // seq's KV is expected to grow to `tokens` tokens (serving: a request's
  // prompt and output, told when it takes the sequence): where the table
  // is chunked, each of its layers' blocks are kept together in memory.
  void expect(uint32_t seq, uint64_t tokens) {
    for (uint32_t l = 0; l < t_.layers; ++l) t_.expect(seq * t_.layers + l, (tokens + s_.bt) / s_.bt);
  }
  // seq is gone (serving: its request finished or is recomputed): each of
  // its blocks leaves its tier and its copies, and its room in the block
  // table is given back.
  void release_sequence(uint32_t seq);
  // b's sequence is gone: b leaves its tier and its copies, and could be created again.
  void release(BlockId b);
  // Every copy of b below its tier is stale (b was written).
  void invalidate_copies(BlockId b);
  // Policies with a watermark (HKM) demote in the background once a step is
  // done, so that the next step finds room without waiting.
  void background_demotion();

  // Tier occupancy (copies included) as timeline counters.
  void open_occupancy(Timeline& timeline);
  void sample_occupancy(double now);
  void close_occupancy();

 private:
  void add_tier(size_t i);
  // The block table's layout for the run (BlockTable, chunked): its blocks.
  uint64_t choose_layout(uint64_t capacity_blocks);
  void commit_block_table(uint64_t blocks, ValidationCache* validating) const;
  // Moves b's own tier. A read up (to < from) leaves the copy it was read
  // from in place; a move down finds the room already made by the caller.
  void move(BlockId b, TierId from, TierId to) {
    --t_.tiers[from].used_blocks;
    // Predicted, never used, and now gone. A demotion out of the GPU reads
    // whether the block was predicted only while some prediction is unused.
    if (from == 0 && predicted_blocks_ != 0 && t_.state[b].predicted) waste_prefetch(b);
    t_.tier(b) = to;
    count_use(to);
    tell_move(b, from, to);
    if (to < from && !exclusive_) add_copy(b, from);
  }
  // The eviction policy hears of a move at once, or, while a run is read
  // up, before it is next asked anything (flush_moves): the same calls in
  // the same order, consecutive moves between the same tiers as one run.
  void tell_move(BlockId b, TierId from, TierId to) {
    if (defer_moves_)
      hold_move(pending_moves_, b, from, to);
    else
      s_.pol.evict->on_move(b, from, to);
  }
  // Moves held for the policy as ranges: first, first + 1, ... between the
  // same two tiers, told as one on_move_range. A move that continues the
  // last range lengthens it (victims and blocks read up come in runs of
  // consecutive ids), so a run costs one store per block, not a copy into
  // a list that is scanned for runs again.
  // A range is kept as the key of the move that would continue it (so a
  // move is one compare) and its length; its first id and tiers are read
  // back from the key. An id is below 2^32, so one past the last never
  // reaches the tiers' bits.
  static uint64_t move_key(BlockId b, TierId from, TierId to) {
    return uint64_t(b) | uint64_t(from) << 40 | uint64_t(to) << 48;
  }
  struct MoveRange {
    uint64_t next;  // move_key of the move that would continue it
    uint32_t n;
    BlockId first() const { return static_cast<BlockId>((next & ((uint64_t(1) << 40) - 1)) - n); }
    TierId from() const { return static_cast<TierId>(next >> 40); }
    TierId to() const { return static_cast<TierId>(next >> 48); }
  };
  static void hold_move(std::vector<MoveRange>& q, BlockId b, TierId from, TierId to) {
    const uint64_t key = move_key(b, from, to);
    if (!q.empty() && q.back().next == key) {
      ++q.back().next;
      ++q.back().n;
      return;
    }
    q.push_back(MoveRange{key + 1, 1});
  }
  // Each range of q told to the eviction policy in order; q is emptied.
  void tell_ranges(std::vector<MoveRange>& q) {
    EvictionPolicy& evict = *s_.pol.evict;
    for (const MoveRange& r : q) evict.on_move_range(r.first(), r.n, r.from(), r.to());
    q.clear();
  }
  void flush_moves() {
    if (!pending_moves_.empty()) tell_ranges(pending_moves_);
  }
  // b leaves its own tier and every copy below (the policy is told).
  void leave_tier(BlockId b);
  void add_copy(BlockId b, TierId t) {
    link_copy(b, t);
    count_use(t);
  }
  // A copy list's two operations on its ends `head` and `tail`, a block's
  // node being node(block): the store's own lists and read_up_common's
  // (which keeps the ends in locals) are the same code.
  template <class Node>
  static void push_front_copy(Node node, BlockId& head, BlockId& tail, BlockId b) {
    ListLinks& n = node(b);
    n.prev = kNoBlock;
    n.next = head;
    if (head != kNoBlock) node(head).prev = b;
    head = b;
    if (tail == kNoBlock) tail = b;
  }
  template <class Node>
  static void unlink_copy_node(Node node, BlockId& head, BlockId& tail, BlockId b) {
    ListLinks& n = node(b);
    if (n.prev != kNoBlock) node(n.prev).next = n.next;
    else if (head == b) head = n.next;
    if (n.next != kNoBlock) node(n.next).prev = n.prev;
    else if (tail == b) tail = n.prev;
    n.prev = n.next = kNoBlock;
  }
  // b's copy in t joins t's list; its room is the caller's.
  void link_copy(BlockId b, TierId t) {
    t_.copies(b) = static_cast<uint8_t>(t_.copies(b) | (1u << t));
    CopyList& l = copy_lists_[t];
    push_front_copy([&](BlockId x) -> ListLinks& { return copy_node(x, t); }, l.head, l.tail, b);
  }
  void drop_copy(BlockId b, TierId t) {
    unlink_copy(b, t);
    --t_.tiers[t].used_blocks;
  }
  // b's copy in t leaves t's list; its room is the caller's.
  void unlink_copy(BlockId b, TierId t) {
    t_.copies(b) = static_cast<uint8_t>(t_.copies(b) & ~(1u << t));
    CopyList& l = copy_lists_[t];
    unlink_copy_node([&](BlockId x) -> ListLinks& { return copy_node(x, t); }, l.head, l.tail, b);
  }
  bool drop_oldest_copy(TierId t) {
    const BlockId c = copy_lists_[t].tail;
    if (c == kNoBlock) return false;
    drop_copy(c, t);
    ++c_.copies_dropped;
    return true;
  }
  // b leaves tier `from`: to the highest valid copy below, or written down.
  // `mark`: room_waits_ from there on are the waits of the room made below
  // for b (they become part of b's drain). Inline where b has a copy below
  // (no bytes move: a promotion's demotion, where the victim was read up
  // before); a write down is write_down's.
  // `claimed`: the room v leaves is taken at once by whoever is making
  // room here (write_down).
  void demote(BlockId v, TierId from, size_t mark, bool claimed = false) {
    ++c_.demoted_blocks;
    if (!free_demotion(v)) {
      write_down(v, from, mark, claimed);
      return;
    }
    // The highest valid copy below becomes v's own: its room there stays
    // in use (and that tier's peak cannot grow), v's room here is free.
    TierId c = static_cast<TierId>(from + 1);
    while (!t_.has_copy(v, c)) ++c;
    unlink_copy(v, c);
    --t_.tiers[from].used_blocks;
    if (from == 0 && predicted_blocks_ != 0 && t_.state[v].predicted) waste_prefetch(v);
    t_.tier(v) = c;
    tell_move(v, from, c);
  }
  void write_down(BlockId v, TierId from, size_t mark, bool claimed);
  // write_down's drain: v's room in `from` stays in use until write j (and
  // what the room below waits for since `mark`) lands. `before`: v's job
  // before the write.
  [[gnu::noinline]] void leave_drain(BlockId v, TierId from, size_t mark, bool claimed, JobId before, JobId j);
  // Victims a policy named and make_room has not taken yet.
  struct VictimCursor {
    BlockId* buf;
    uint32_t named = 0, used = 0;
  };
  bool make_room(TierId t, VictimCursor& c, uint32_t want);
  // read_up_run's progress: blocks read up, and the job of the copy the
  // first opened (whole blocks after it join that copy).
  struct RunState {
    uint32_t m = 0;
    JobId j = kNoJob;
  };
  static constexpr size_t kMaxCopyTiers = 8;  // a block's copies are a byte's bits
  // kTwoTiers: the GPU's tier and one below it, which holds every copy.
  template <bool kTwoTiers>
  uint32_t read_up_common(const BlockId* blocks, uint32_t i, uint32_t k, TierId from, uint8_t* read, VictimCursor& vc,
                          RunState& r, bool defer_reads, double whole_bytes);
  // A drain of tier t: the block written down, its write, and the writes
  // the room it went into was still waiting for.
  struct Drain {
    BlockId block = kNoBlock;
    JobId write = kNoJob;
    uint64_t created = 0;  // the block's creation stamp: its place may hold another block once it is released
    uint8_t n_after = 0;
    std::array<JobId, 7> after{};
  };
  void reclaim(TierId t);
  // d's block is still the one written down (not released, its place not
  // taken by another) and a layer in flight reads it.
  bool in_use(const Drain& d) const { return t_.created[d.block] == d.created && t_.pinned(d.block); }
  bool claim_drain(TierId t);
  void hand_over(TierId t, const Drain& d);
  bool full(TierId t) const { return t_.tiers[t].occupied_blocks() >= t_.tiers[t].capacity_blocks; }
  // A predicted block leaves the GPU unused: its bytes were read for nothing.
  void waste_prefetch(BlockId b);
  // b has a valid copy below its tier: demoting it moves no bytes.
  bool free_demotion(BlockId b) const { return !exclusive_ && t_.copies(b) != 0; }
  // Whether b can leave tier t: freely, or into room made in the tier below.
  bool room_below(BlockId b, TierId t) {
    return free_demotion(b) || (t + 1u < t_.tiers.size() && make_room(static_cast<TierId>(t + 1)));
  }
  void count_use(TierId t) {
    ++t_.tiers[t].used_blocks;
    c_.peak_blocks[t] = std::max(c_.peak_blocks[t], t_.tiers[t].occupied_blocks());
  }

  EngineSetup& s_;
  EngineCounters& c_;
  BlockTable t_;
  MoveSink* planner_ = nullptr;
  uint64_t tokens_now_ = 0;
  // data_bytes: the KV bytes of a token of one block-table layer, and of a
  // whole block of them, fixed for a run (set by the constructor and start).
  double unit_bytes_ = 0, whole_block_bytes_ = 0;
  void set_unit_bytes() {
    unit_bytes_ = double(s_.kv_unit_bytes_per_token());
    whole_block_bytes_ = double(uint64_t(s_.bt)) * unit_bytes_;
  }
  bool defer_budget_ = false;
  bool masses_ = false;  // some block's mass or last_mass may be nonzero
  // The eviction policy's kind, fixed for a run: read once (start), not per move.
  bool exclusive_ = false, drops_ = false;
  // Per block, the store's own state is in the block's record
  // (BlockState: the job moving it, the endpoint a write down still reads,
  // whether a prediction brought it, its node in tier 1's copy list, its
  // layer), beside its tier and copies: a move reads and writes them at once.
  uint64_t predicted_blocks_ = 0;  // blocks whose record says predicted
  // Per tier, the blocks holding a copy there, newest at the head (tier 0,
  // the top, holds none): a block's node is in its record for tier 1, in
  // `deeper` for the tiers below.
  struct CopyList {
    BlockId head = kNoBlock, tail = kNoBlock;
    std::vector<ListLinks> deeper;
  };
  std::vector<CopyList> copy_lists_;
  ListLinks& copy_node(BlockId b, TierId t) { return t == 1 ? t_.state[b].copy1 : copy_lists_[t].deeper[b]; }
  std::vector<PooledFifo<Drain>> drains_;  // per tier, oldest first
  std::vector<JobId> room_waits_;
  std::vector<JobId> run_waits_;  // read_up_run: what each block of the run waits for
  std::vector<MoveRange> moved_;  // read_up_run: the blocks read up, for the policy
  bool defer_moves_ = false;      // tell_move: hold moves until flush_moves
  std::vector<MoveRange> pending_moves_;
  static constexpr uint32_t kVictimBatch = 256;  // victims a policy is asked for at once
  std::vector<BlockId> victims_ = std::vector<BlockId>(kVictimBatch);
  std::vector<uint64_t> capacity_;  // per tier: its capacity with no room reserved
  std::vector<uint64_t> full_capacity_;  // per tier: as every layer's blocks share it (full_capacity)
  Timeline* timeline_ = nullptr;
  std::vector<uint32_t> occupancy_track_;  // per tier: a timeline counter of its bytes in use
  std::vector<double> occupancy_value_;    // the values of the latest instant, not yet written
  double occupancy_t_ = -1;
};

}  // namespace kvtier
