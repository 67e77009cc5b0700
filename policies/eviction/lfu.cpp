// Least frequently used, per tier: the block with the fewest uses by
// attention leaves first; ties go to the one least recently used or
// inserted. One indexed binary min-heap per tier over flat arrays (a block
// lives in one tier, so one position array serves all heaps): insert,
// access and remove are O(log n), allocation-free after setup().
#include <algorithm>

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
    size_t n = table.size();
    freq_.assign(n, 0);
    stamp_.assign(n, 0);
    pos_.assign(n, kNoBlock);
    heaps_.assign(table.tiers.size(), {});
    for (auto& h : heaps_) h.reserve(n);
    frontier_.clear();
    frontier_.reserve(n);
    tick_ = 0;
  }
  void on_insert(BlockId b, TierId t) override {
    if (!keep_history_) freq_[b] = 0;
    stamp_[b] = ++tick_;
    auto& h = heaps_[t];
    pos_[b] = uint32_t(h.size());
    h.push_back(b);
    sift_up(h, pos_[b]);
  }
  void on_access(BlockId b, TierId t) override {
    ++freq_[b];
    stamp_[b] = ++tick_;
    if (pos_[b] != kNoBlock) sift_down(heaps_[t], pos_[b]);  // the key only grows
  }
  void on_remove(BlockId b, TierId t) override {
    auto& h = heaps_[t];
    uint32_t i = pos_[b];
    if (i == kNoBlock) return;
    pos_[b] = kNoBlock;
    BlockId last = h.back();
    h.pop_back();
    if (i < h.size()) {
      h[i] = last;
      pos_[last] = i;
      sift_up(h, i);
      sift_down(h, pos_[last]);
    }
  }
  BlockId victim(TierId t) override {
    const auto& h = heaps_[t];
    if (h.empty()) return kNoBlock;
    if (!table_->pinned(h[0])) return h[0];
    // Best-first walk of the heap past pinned blocks: a small heap of heap
    // positions ordered by key (reserved in setup, so no allocation).
    auto worse = [&](uint32_t a, uint32_t b) { return less(h[b], h[a]); };
    frontier_.clear();
    frontier_.push_back(0);
    while (!frontier_.empty()) {
      std::pop_heap(frontier_.begin(), frontier_.end(), worse);
      uint32_t i = frontier_.back();
      frontier_.pop_back();
      if (!table_->pinned(h[i])) return h[i];
      for (uint32_t c = 2 * i + 1; c <= 2 * i + 2 && c < h.size(); ++c) {
        frontier_.push_back(c);
        std::push_heap(frontier_.begin(), frontier_.end(), worse);
      }
    }
    return kNoBlock;
  }

  uint32_t frequency(BlockId b) const { return freq_[b]; }

 private:
  bool less(BlockId a, BlockId b) const { return freq_[a] < freq_[b] || (freq_[a] == freq_[b] && stamp_[a] < stamp_[b]); }
  void sift_up(std::vector<BlockId>& h, uint32_t i) {
    BlockId b = h[i];
    while (i > 0) {
      uint32_t p = (i - 1) / 2;
      if (!less(b, h[p])) break;
      h[i] = h[p];
      pos_[h[i]] = i;
      i = p;
    }
    h[i] = b;
    pos_[b] = i;
  }
  void sift_down(std::vector<BlockId>& h, uint32_t i) {
    BlockId b = h[i];
    uint32_t n = uint32_t(h.size());
    for (;;) {
      uint32_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && less(h[c + 1], h[c])) ++c;
      if (!less(h[c], b)) break;
      h[i] = h[c];
      pos_[h[i]] = i;
      i = c;
    }
    h[i] = b;
    pos_[b] = i;
  }

  bool keep_history_;
  const BlockTable* table_ = nullptr;
  std::vector<uint32_t> freq_;
  std::vector<uint64_t> stamp_;
  std::vector<uint32_t> pos_;
  std::vector<std::vector<BlockId>> heaps_;
  std::vector<uint32_t> frontier_;
  uint64_t tick_ = 0;
};
KVTIER_REGISTER(EvictionPolicy, LfuEviction, "lfu",
                "least frequently used block leaves (ties: least recent); demoted one tier down");

}  // namespace kvtier
