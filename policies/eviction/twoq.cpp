// 2Q (Johnson and Shasha, VLDB'94), full version, per tier of capacity c
// blocks: new blocks enter Ain, a FIFO of floor(c x in_ratio) blocks whose
// hits change nothing; a block pushed out of Ain leaves and its id goes to
// Aout, a FIFO of floor(c x out_ratio) ids; a block that returns while its id
// is in Aout enters Am, an LRU list with the rest of the capacity. Room comes
// from Ain while Ain is over its share, else from Am's LRU end; a block
// entering Am also makes room in Am when Am is at its share. Defaults (25%
// and 50%) are the paper's, as in libCacheSim.
#include "policies/eviction/hints.h"
#include "policies/eviction/queues.h"
#include "policies/policy.h"

namespace kvtier {

class TwoQEviction : public EvictionPolicy, public MissAwareEviction {
  enum : uint8_t { Ain = 1, Am = 2, Aout = 3 };

 public:
  static ParamList params() {
    return {num("in_ratio", 0.25, "share of the tier's capacity for the Ain FIFO", 0.0, 1.0),
            num("out_ratio", 0.50, "Aout length (block ids only) as a share of the tier's capacity", 0.0, 10.0)};
  }
  explicit TwoQEviction(const json& p) : in_ratio_(get_num(p, "in_ratio")), out_ratio_(get_num(p, "out_ratio")) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    q_.setup(table, 3);
    st_.assign(table.tiers.size(), State{});
  }
  void on_miss(BlockId b, TierId t) override {
    TierQueues& q = at(t);
    State& s = st_[t];
    s.ghost_hit = q.where[b] == Aout;
    if (s.ghost_hit) q.unlink(b);
  }
  bool needs_room(TierId t) const override {
    const State& s = st_[t];
    return s.ghost_hit && q_.tiers[t].ready() && q_.tiers[t].size[Am] + 1 > s.am_cap;
  }
  void on_insert(BlockId b, TierId t) override {
    TierQueues& q = at(t);
    State& s = st_[t];
    if (q.where[b] == Aout) on_miss(b, t);  // not announced by the driver
    q.push_front(b, s.ghost_hit ? Am : Ain);
    s.ghost_hit = false;
  }
  void on_access(BlockId b, TierId t) override {
    TierQueues& q = at(t);
    if (q.where[b] == Am) q.move_to_front(b, Am);
  }
  void on_remove(BlockId b, TierId t) override {
    TierQueues& q = at(t);
    State& s = st_[t];
    uint8_t w = q.where[b];
    if (w != Ain && w != Am) return;
    q.unlink(b);
    if (b == s.pending) {
      s.pending = kNoBlock;
      if (w == Ain && s.aout_cap > 0) {
        while (q.size[Aout] + 1 > s.aout_cap) q.unlink(q.tail[Aout]);
        q.push_front(b, Aout);
      }
    }
  }
  // A new block in b's place does not return from Aout.
  void on_release(BlockId b) override { q_.forget(b); }
  BlockId victim(TierId t) override {
    TierQueues& q = at(t);
    State& s = st_[t];
    bool full = q.size[Ain] + q.size[Am] >= table_->tiers[t].capacity_blocks;
    BlockId b = kNoBlock;
    if (full && q.size[Ain] > s.ain_cap) b = q.oldest_unpinned(Ain, *table_);
    if (b == kNoBlock) b = q.oldest_unpinned(Am, *table_);
    // The store asks once its copies and free drains are gone, so the lists
    // may hold less than the capacity (room held by blocks still being
    // written down): a tier with a block that may leave gives one.
    if (b == kNoBlock) b = q.oldest_unpinned(Ain, *table_);
    s.pending = b;
    return b;
  }

 private:
  struct State {
    uint64_t ain_cap = 0, am_cap = 0, aout_cap = 0;
    bool ghost_hit = false;
    BlockId pending = kNoBlock;
  };
  TierQueues& at(TierId t) {
    TierQueues& q = q_.tiers[t];
    if (!q.ready()) {
      q_.at(t);
      State& s = st_[t];
      uint64_t c = table_->tiers[t].capacity_blocks;
      s.ain_cap = uint64_t(double(c) * in_ratio_);
      s.aout_cap = uint64_t(double(c) * out_ratio_);
      s.am_cap = c - s.ain_cap;
    }
    return q;
  }

  double in_ratio_, out_ratio_;
  const BlockTable* table_ = nullptr;
  QueuesPerTier q_;
  std::vector<State> st_;
};
KVTIER_REGISTER(EvictionPolicy, TwoQEviction, "twoq",
                "2Q: a FIFO for new blocks, an LRU for blocks seen again soon after they left it, and a ghost FIFO");

}  // namespace kvtier
