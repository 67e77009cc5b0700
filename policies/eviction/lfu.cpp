// Least frequently used, per tier: the block with the fewest uses by
// attention leaves first; ties go to the one least recently used or
// inserted. O(1) per access: per tier, the distinct use counts form a list
// of frequency nodes in increasing order, each holding its blocks from most
// to least recent (a block lives in one tier, so one set of block links
// serves every tier). An access moves a block to the next count's node; the
// victim is the least recent block of the lowest count. All in flat arrays
// with a free list of nodes: allocation-free after setup().
//
// With keep_history a block entering a tier keeps its count, so its node is
// found by a walk from the lowest count (O(distinct counts in the tier));
// without it (in-cache LFU, as cache simulators count) it starts at 0, the
// lowest node, in O(1).
#include "policies/policy.h"

namespace kvtier {

class LfuEviction : public EvictionPolicy {
 public:
  static ParamList params() {
    return {boolean("keep_history", true,
                    "true: a block's use count survives moves between tiers (counts over the whole run); false: it "
                    "restarts at 0 whenever the block enters a tier (in-cache LFU)")};
  }
  explicit LfuEviction(const json& p) : keep_history_(p.at("keep_history").get<bool>()) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    const size_t n = table.size();
    freq_.assign(n, 0);
    node_of_.assign(n, kNone);
    bprev_.assign(n, kNoBlock);
    bnext_.assign(n, kNoBlock);
    const size_t nodes = n + table.tiers.size() + 1;
    nfreq_.assign(nodes, 0);
    nprev_.assign(nodes, kNone);
    nnext_.assign(nodes, kNone);
    nhead_.assign(nodes, kNoBlock);
    ntail_.assign(nodes, kNoBlock);
    free_.clear();
    free_.reserve(nodes);
    for (size_t i = nodes; i-- > 0;) free_.push_back(uint32_t(i));
    lowest_.assign(table.tiers.size(), kNone);
    resume_.assign(table.tiers.size(), Resume{});
  }
  void on_insert(BlockId b, TierId t) override {
    if (!keep_history_) freq_[b] = 0;
    // The node of b's count in t: the first node with freq >= f.
    uint32_t prev = kNone, x = lowest_[t];
    while (x != kNone && nfreq_[x] < freq_[b]) {
      prev = x;
      x = nnext_[x];
    }
    if (x == kNone || nfreq_[x] != freq_[b]) x = new_node(t, prev, freq_[b]);
    push_front(t, x, b);
  }
  void on_access(BlockId b, TierId t) override {
    const uint32_t x = node_of_[b];
    ++freq_[b];
    if (x == kNone) return;
    uint32_t y = nnext_[x];
    if (y == kNone || nfreq_[y] != freq_[b]) y = new_node(t, x, freq_[b]);
    unlink(t, x, b);
    push_front(t, y, b);
    if (nhead_[x] == kNoBlock) free_node(t, x);
  }
  void on_remove(BlockId b, TierId t) override {
    const uint32_t x = node_of_[b];
    if (x == kNone) return;
    unlink(t, x, b);
    if (nhead_[x] == kNoBlock) free_node(t, x);
  }
  // A new block in b's place starts with no uses (with keep_history the
  // count would otherwise outlive the block).
  void on_release(BlockId b) override { freq_[b] = 0; }
  BlockId victim(TierId t) override {
    // Lowest count first, least recent first within it; past pinned blocks.
    // The walk resumes where the last one found its victim while the
    // blocks before that point are still all pinned (see Resume).
    Resume& r = resume_[t];
    uint32_t x = lowest_[t];
    BlockId b = x != kNone ? ntail_[x] : kNoBlock;
    if (r.node != kNone && r.stamp == table_->pin_stamp) {
      x = r.node;
      b = r.block;
    }
    for (; x != kNone; x = nnext_[x], b = x != kNone ? ntail_[x] : kNoBlock)
      for (; b != kNoBlock; b = bprev_[b])
        if (!table_->pinned(b)) {
          r = Resume{table_->pin_stamp, x, b};
          return b;
        }
    r.node = kNone;
    return kNoBlock;
  }

  uint32_t frequency(BlockId b) const { return freq_[b]; }

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  // A node for count f in tier t, after node `prev` (kNone: at the front).
  uint32_t new_node(TierId t, uint32_t prev, uint32_t f) {
    const uint32_t x = free_.back();
    free_.pop_back();
    nfreq_[x] = f;
    nhead_[x] = ntail_[x] = kNoBlock;
    nprev_[x] = prev;
    nnext_[x] = prev == kNone ? lowest_[t] : nnext_[prev];
    if (nnext_[x] != kNone) nprev_[nnext_[x]] = x;
    if (prev == kNone) lowest_[t] = x;
    else nnext_[prev] = x;
    return x;
  }
  void free_node(TierId t, uint32_t x) {
    if (nprev_[x] != kNone) nnext_[nprev_[x]] = nnext_[x];
    else lowest_[t] = nnext_[x];
    if (nnext_[x] != kNone) nprev_[nnext_[x]] = nprev_[x];
    free_.push_back(x);
  }
  // b enters node x of tier t at its front (the walk's last place in x). A
  // lower count's node is before the resume point: unless b is pinned under
  // the point's stamp (a block being used, as most that enter are), the
  // walk restarts.
  void push_front(TierId t, uint32_t x, BlockId b) {
    Resume& r = resume_[t];
    if (r.node != kNone && nfreq_[x] < nfreq_[r.node] && (r.stamp != table_->pin_stamp || !table_->pinned(b)))
      r.node = kNone;
    node_of_[b] = x;
    bprev_[b] = kNoBlock;
    bnext_[b] = nhead_[x];
    if (nhead_[x] != kNoBlock) bprev_[nhead_[x]] = b;
    nhead_[x] = b;
    if (ntail_[x] == kNoBlock) ntail_[x] = b;
  }
  // b leaves node x of tier t. Leaving the walk's resume point moves that
  // point to the block the walk would look at next (what was before it
  // stays pinned); past the tier's last block, the walk restarts.
  void unlink(TierId t, uint32_t x, BlockId b) {
    Resume& r = resume_[t];
    if (r.node != kNone && r.block == b) {
      if (bprev_[b] != kNoBlock) {
        r.block = bprev_[b];
      } else {
        // On to the next count's oldest block (an access may just have
        // made that node, still empty: then the walk restarts).
        r.node = nnext_[x];
        r.block = r.node != kNone ? ntail_[r.node] : kNoBlock;
        if (r.block == kNoBlock) r.node = kNone;
      }
    }
    if (bprev_[b] != kNoBlock) bnext_[bprev_[b]] = bnext_[b];
    else nhead_[x] = bnext_[b];
    if (bnext_[b] != kNoBlock) bprev_[bnext_[b]] = bprev_[b];
    else ntail_[x] = bprev_[b];
    bprev_[b] = bnext_[b] = kNoBlock;
    node_of_[b] = kNone;
  }

  // Where victim(t)'s walk resumes: every block the walk passes before
  // (node, block) was pinned when it last walked, under pin_stamp `stamp`.
  // That stays true while the stamp stays (a block stays pinned until then:
  // accesses only raise last_access) and no block enters a node before the
  // point (push_front); blocks leaving only shorten it (unlink). Without it
  // every victim would walk again past the blocks a layer in flight pins,
  // thousands of them in serving, where the replay pins none.
  struct Resume {
    uint64_t stamp = 0;
    uint32_t node = kNone;
    BlockId block = kNoBlock;
  };
  std::vector<Resume> resume_;
  bool keep_history_;
  const BlockTable* table_ = nullptr;
  std::vector<uint32_t> freq_, node_of_;
  std::vector<BlockId> bprev_, bnext_;
  std::vector<uint32_t> nfreq_, nprev_, nnext_, free_, lowest_;
  std::vector<BlockId> nhead_, ntail_;
};
KVTIER_REGISTER(EvictionPolicy, LfuEviction, "lfu",
                "least frequently used block leaves (ties: least recent); demoted one tier down");

}  // namespace kvtier
