// StreamingLLM (Xiao et al., ICLR 2024): keep the attention sinks (the first
// tokens) and a window of the most recent ones; everything in between is
// discarded (drops() is true).
//
// Granularity: blocks. `sinks` counts blocks (StreamingLLM's 4 sink tokens
// fit in the first block, hence the default 1) and `recent` counts the
// newest blocks. budget_victim(seq, layer) drops the oldest block outside
// sinks and window after each new block (a per-(seq, layer) cursor makes it
// O(1) amortised). victim(t), when a tier is full anyway, takes from the
// (seq, layer) with the most blocks in t the oldest unprotected block, then
// the oldest of the window, then a sink; never a pinned block.
#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

class StreamingLlmEviction : public EvictionPolicy {
 public:
  static ParamList params() {
    return {integer("sinks", 1, "first blocks of each (seq, layer) always kept (attention sinks)", 0),
            integer("recent", 8, "newest blocks of each (seq, layer) always kept (the rolling window)", 1)};
  }
  explicit StreamingLlmEviction(const json& p)
      : sinks_(uint32_t(get_int(p, "sinks"))), recent_(uint32_t(get_int(p, "recent"))) {}

  void setup(const BlockTable& table) override {
    table_ = &table;
    counts_.setup(table);
    cursor_.assign(counts_.groups, sinks_);
  }
  void on_insert(BlockId b, TierId t) override { counts_.insert(*table_, b, t); }
  void on_access(BlockId, TierId) override {}
  void on_remove(BlockId b, TierId t) override { counts_.remove(*table_, b, t); }
  // A new sequence in b's group starts with nothing dropped.
  void on_release(BlockId b) override {
    counts_.release(*table_, b);
    cursor_[group_of(*table_, b)] = sinks_;
  }
  bool drops() const override { return true; }

  BlockId budget_victim(uint32_t seq, uint32_t layer) override {
    const BlockTable& tb = *table_;
    uint32_t g = seq * tb.layers + layer;
    uint32_t n = counts_.created[g];
    if (counts_.live[g] <= sinks_ + recent_ || n <= sinks_ + recent_) return kNoBlock;
    uint32_t r_begin = n - recent_;
    for (uint32_t i = cursor(g, r_begin); i < r_begin; ++i) {
      BlockId b = tb.block_at(g, i);
      if (tb.tier(b) < kDropped && !tb.pinned(b)) return b;
    }
    return kNoBlock;
  }

  BlockId victim(TierId t) override {
    uint32_t g = counts_.largest(t);
    if (g == kNoBlock) return kNoBlock;
    BlockId b = oldest(g, t);
    if (b != kNoBlock) return b;
    for (g = 0; g < counts_.groups; ++g)
      if (counts_.in_tier[size_t(t) * counts_.groups + g] && (b = oldest(g, t)) != kNoBlock) return b;
    return kNoBlock;
  }

 private:
  // Protection class of index i among n created: 0 evictable, 1 window, 2 sink.
  int cls(uint32_t i, uint32_t n) const {
    if (i < sinks_) return 2;
    if (i + recent_ >= n) return 1;
    return 0;
  }
  // The sinks are scanned, then the blocks from the group's cursor on: every
  // block between the sinks and the cursor is dropped (the cursor only
  // passes dropped blocks), so none of them is in t, and the scan costs what
  // the group still holds, not its whole length. The first evictable block
  // found is the oldest one; else the oldest of the window, else a sink.
  BlockId oldest(uint32_t g, TierId t) {
    const BlockTable& tb = *table_;
    const uint32_t n = counts_.created[g];
    BlockId best = kNoBlock;
    int best_cls = 3;
    auto consider = [&](uint32_t i) {
      const BlockId b = tb.block_at(g, i);
      if (tb.tier(b) != t || tb.pinned(b)) return false;
      const int c = cls(i, n);
      if (c < best_cls) {
        best = b;
        best_cls = c;
      }
      return c == 0;
    };
    const uint32_t s_end = std::min(sinks_, n);
    for (uint32_t i = 0; i < s_end; ++i) consider(i);  // sinks: the last resort
    const uint32_t r_begin = n > recent_ ? n - recent_ : 0;
    for (uint32_t i = std::max(cursor(g, r_begin), s_end); i < n; ++i)
      if (consider(i)) return best;
    return best;
  }
  // The group's first block at or after its cursor that is not gone, before
  // r_begin: the cursor moves past what budgets and victims have dropped.
  uint32_t cursor(uint32_t g, uint32_t r_begin) {
    const BlockTable& tb = *table_;
    uint32_t& c = cursor_[g];
    while (c < r_begin && tb.tier(tb.block_at(g, c)) >= kDropped) ++c;
    return c;
  }

  uint32_t sinks_, recent_;
  const BlockTable* table_ = nullptr;
  GroupCounts counts_;
  std::vector<uint32_t> cursor_;
};
KVTIER_REGISTER(EvictionPolicy, StreamingLlmEviction, "streaming_llm",
                "StreamingLLM: keep the sink blocks and a recent window; the rest is dropped");

}  // namespace kvtier
