// H2O, Heavy-Hitter Oracle (Zhang et al., NeurIPS 2023): per (seq, layer)
// keep the blocks with the largest accumulated attention mass (the heavy
// hitters) plus the `recent` newest blocks, within a budget; evicted KV is
// discarded (drops() is true) and its future attention mass is lost.
//
// Granularity: blocks, not tokens (H2O evicts single tokens; a block's mass
// is the sum over its tokens). The budget is a fraction of the blocks the
// (seq, layer) has created so far, or a fixed count; it counts the recent
// window. The accumulated mass is BlockTable::mass (every use, all steps),
// as H2O accumulates attention scores over decoding steps.
//
// Two ways out: budget_victim(seq, layer) enforces the budget after each new
// block (scan of that (seq, layer): O(blocks per layer)); victim(t), when a
// tier is full, takes the lightest unpinned block of the (seq, layer) with
// the most blocks in t (per-layer budgets stay balanced), preferring blocks
// outside the recent window.
#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

class H2oEviction : public EvictionPolicy {
 public:
  static ParamList params() {
    ParamList p = Budget::params(0.2, "KV kept per (seq, layer), heavy hitters and recent window together (H2O: 20%)");
    p.push_back(integer("recent", 4, "newest blocks of each (seq, layer) always kept (H2O's local window)", 0));
    return p;
  }
  explicit H2oEviction(const json& p) : budget_(Budget::from(p)), recent_(uint32_t(get_int(p, "recent"))) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    counts_.setup(table);
    held_.assign(counts_.groups, {});
    place_.assign(table.size(), kNoBlock);
  }
  void on_insert(BlockId b, TierId t) override {
    counts_.insert(*table_, b, t);
    hold(b);
  }
  void on_access(BlockId, TierId) override {}
  void on_remove(BlockId b, TierId t) override {
    counts_.remove(*table_, b, t);
    unhold(b);
  }
  void on_release(BlockId b) override { counts_.release(*table_, b); }
  bool drops() const override { return true; }
  bool reads_attention() const override { return true; }

  BlockId budget_victim(uint32_t seq, uint32_t layer) override {
    uint32_t g = seq * table_->layers + layer;
    uint32_t cap = std::max(budget_.blocks(counts_.created[g]), std::min(recent_, counts_.created[g]));
    if (counts_.live[g] <= cap) return kNoBlock;
    return lightest(g, kAnyTier);
  }

  BlockId victim(TierId t) override {
    uint32_t g = counts_.largest(t);
    if (g == kNoBlock) return kNoBlock;
    BlockId b = lightest(g, t);
    if (b != kNoBlock) return b;
    for (g = 0; g < counts_.groups; ++g)  // that layer is all pinned: any other
      if (counts_.in_tier[size_t(t) * counts_.groups + g] && (b = lightest(g, t)) != kNoBlock) return b;
    return kNoBlock;
  }

 private:
  static constexpr TierId kAnyTier = kDropped;
  // The unpinned block of group g (in tier t, or in any tier) with the least
  // accumulated mass, blocks outside the recent window first, the lowest
  // index of those as light. Only the blocks g holds are looked at: with a
  // budget most of what a sequence created has been dropped, and a scan of
  // every index it created was most of H2O's time.
  BlockId lightest(uint32_t g, TierId t) const {
    const BlockTable& tb = *table_;
    uint32_t n = counts_.created[g];
    uint32_t r_begin = recent_ >= n ? 0 : n - recent_;
    BlockId best = kNoBlock;
    bool best_recent = true;
    float best_mass = 0;
    uint32_t best_i = 0;
    for (uint32_t i : held_[g]) {
      BlockId b = tb.block_at(g, i);
      TierId bt = tb.tier(b);
      if (bt >= kDropped || (t != kAnyTier && bt != t) || tb.pinned(b)) continue;
      bool rec = i >= r_begin;
      float m = tb.mass[b];
      if (best == kNoBlock || (!rec && best_recent) ||
          (rec == best_recent && (m < best_mass || (m == best_mass && i < best_i)))) {
        best = b;
        best_recent = rec;
        best_mass = m;
        best_i = i;
      }
    }
    return best;
  }
  // held_[g]: the indices of g's blocks in a tier, in no order (a removal
  // moves the last into its place); place_[b] is b's position there.
  void hold(BlockId b) {
    if (place_[b] != kNoBlock) return;
    std::vector<uint32_t>& h = held_[group_of(*table_, b)];
    place_[b] = uint32_t(h.size());
    h.push_back(table_->index_of(b));
  }
  void unhold(BlockId b) {
    const uint32_t p = place_[b];
    if (p == kNoBlock) return;
    const uint32_t g = group_of(*table_, b);
    std::vector<uint32_t>& h = held_[g];
    const uint32_t last = h.back();
    h[p] = last;
    place_[table_->block_at(g, last)] = p;
    h.pop_back();
    place_[b] = kNoBlock;
  }

  Budget budget_;
  uint32_t recent_;
  const BlockTable* table_ = nullptr;
  GroupCounts counts_;
  std::vector<std::vector<uint32_t>> held_;  // per group, grown to its most blocks held at once
  std::vector<uint32_t> place_;              // per block
};
KVTIER_REGISTER(EvictionPolicy, H2oEviction, "h2o",
                "H2O: keep heavy hitters (accumulated attention mass) + recent window within a budget; the rest is dropped");

}  // namespace kvtier
