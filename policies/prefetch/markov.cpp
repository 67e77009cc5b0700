// Sliding-window first-order Markov predictor (InCloud AIOS, seed 004).
// Per (seq, layer), the block indices attention used, step after step in the
// order the engine reports them, form one stream; each consecutive pair
// (a -> b) is a transition. The last `window` transitions are counted in a
// small set-associative table (`ways` successor slots per source block;
// when full, the least counted slot is replaced), and counts are taken off
// as transitions leave the window. predict() returns, for every block the
// last observed step used, its `fanout` most frequent successors seen at
// least `min_count` times, de-duplicated; the engine drops what is already
// selected or resident. Layer-ahead depth as layer_ahead.
//
// Memory: per block `ways` x (4 + 2) bytes, per (seq, layer) `window` x 8
// bytes plus the last step's set; all sized in setup().
#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

class MarkovPrefetch : public PrefetchPolicy {
 public:
  static ParamList params() {
    return {integer("depth", 1, "layers fetched ahead of the one computing", 0, 64),
            integer("window", 512, "transitions per (seq, layer) the counts are taken over (sliding window)", 1, 1 << 20),
            integer("ways", 4, "successor slots kept per block", 1, 16),
            integer("fanout", 1, "successors predicted per block of the last step", 1, 16),
            integer("min_count", 1, "transitions seen (within the window) before a successor is predicted", 1)};
  }
  explicit MarkovPrefetch(const json& p)
      : depth_(uint32_t(get_int(p, "depth"))),
        window_(uint32_t(get_int(p, "window"))),
        ways_(uint32_t(get_int(p, "ways"))),
        fanout_(uint32_t(get_int(p, "fanout"))),
        min_count_(uint32_t(get_int(p, "min_count"))) {}

  void setup(const BlockTable& table) override {
    bpsl_ = table.blocks_per_seq_layer;
    uint32_t g = n_groups(table);
    // Transitions are learnt per (group, index), the trace's own coordinates,
    // whatever the table's layout.
    succ_.assign(size_t(g) * bpsl_ * ways_, kNoBlock);
    cnt_.assign(size_t(g) * bpsl_ * ways_, 0);
    ring_src_.assign(size_t(g) * window_, 0);
    ring_dst_.assign(size_t(g) * window_, 0);
    ring_pos_.assign(g, 0);
    ring_len_.assign(g, 0);
    last_.assign(g, kNoBlock);
    set_.assign(size_t(g) * bpsl_, 0);
    set_n_.assign(g, 0);
    mark_.assign(bpsl_, 0);
    epoch_ = 0;
  }
  uint32_t depth() const override { return depth_; }
  bool reads_attention() const override { return true; }

  void observe(const SelectInput& done, const BlockTable& table) override {
    if (!done.trace_blocks) return;
    uint32_t g = done.seq * table.layers + done.layer;
    uint32_t* set = set_.data() + size_t(g) * bpsl_;
    uint32_t n = 0;
    for (uint32_t i : *done.trace_blocks) {
      if (i >= bpsl_) continue;
      if (last_[g] != kNoBlock) add(g, last_[g], i);
      last_[g] = i;
      if (n < bpsl_) set[n++] = i;
    }
    set_n_[g] = n;
  }

  void predict(const SelectInput& next, const BlockTable& table, std::vector<uint32_t>& out) override {
    uint32_t g = next.seq * table.layers + next.layer;
    if (++epoch_ == 0) {  // wrapped: clear the marks
      std::fill(mark_.begin(), mark_.end(), 0);
      epoch_ = 1;
    }
    const uint32_t* set = set_.data() + size_t(g) * bpsl_;
    for (uint32_t j = 0; j < set_n_[g]; ++j) {
      size_t base = (size_t(g) * bpsl_ + set[j]) * ways_;
      for (uint32_t f = 0; f < fanout_; ++f) {
        // The f-th most counted slot (ways is small: repeated max scan).
        uint32_t best = kNoBlock;
        uint16_t best_c = 0;
        for (uint32_t w = 0; w < ways_; ++w) {
          uint16_t c = cnt_[base + w];
          if (c >= min_count_ && c > best_c && rank_ok(base, w, f)) {
            best = w;
            best_c = c;
          }
        }
        if (best == kNoBlock) break;
        uint32_t s = succ_[base + best];
        if (s < next.n_blocks && mark_[s] != epoch_) {
          mark_[s] = epoch_;
          out.push_back(s);
        }
      }
    }
  }

  // A new sequence in the (seq, layer) learns from nothing: every count its
  // window holds is cleared (a slot with no count is free, as at setup).
  void on_release(BlockId b, const BlockTable& table) override {
    if (table.index_of(b) != 0) return;
    const uint32_t g = table.group_of(b);
    const size_t r = size_t(g) * window_;
    for (uint32_t k = 0; k < ring_len_[g]; ++k) {
      const size_t base = (size_t(g) * bpsl_ + ring_src_[r + k]) * ways_;
      std::fill(cnt_.begin() + static_cast<std::ptrdiff_t>(base), cnt_.begin() + static_cast<std::ptrdiff_t>(base + ways_), 0);
    }
    ring_pos_[g] = ring_len_[g] = 0;
    last_[g] = kNoBlock;
    set_n_[g] = 0;
  }

 private:
  // Slot w is the f-th best (0-based) of `base`'s slots: exactly f slots are
  // strictly better (ties broken by slot order).
  bool rank_ok(size_t base, uint32_t w, uint32_t f) const {
    uint32_t better = 0;
    uint16_t c = cnt_[base + w];
    for (uint32_t v = 0; v < ways_; ++v)
      if (cnt_[base + v] > c || (cnt_[base + v] == c && v < w)) ++better;
    return better == f;
  }
  void add(uint32_t g, uint32_t src, uint32_t dst) {
    size_t r = size_t(g) * window_;
    if (ring_len_[g] == window_) {  // the oldest transition leaves the window
      uint32_t p = ring_pos_[g];
      dec(g, ring_src_[r + p], ring_dst_[r + p]);
    } else {
      ++ring_len_[g];
    }
    uint32_t p = ring_pos_[g];
    ring_src_[r + p] = src;
    ring_dst_[r + p] = dst;
    ring_pos_[g] = (p + 1) % window_;
    inc(g, src, dst);
  }
  void inc(uint32_t g, uint32_t src, uint32_t dst) {
    size_t base = (size_t(g) * bpsl_ + src) * ways_;
    uint32_t free_w = kNoBlock, min_w = 0;
    for (uint32_t w = 0; w < ways_; ++w) {
      if (succ_[base + w] == dst && cnt_[base + w] > 0) {
        if (cnt_[base + w] < 0xFFFF) ++cnt_[base + w];
        return;
      }
      if (cnt_[base + w] == 0 && free_w == kNoBlock) free_w = w;
      if (cnt_[base + w] < cnt_[base + min_w]) min_w = w;
    }
    uint32_t w = free_w != kNoBlock ? free_w : min_w;
    succ_[base + w] = dst;
    cnt_[base + w] = 1;
  }
  void dec(uint32_t g, uint32_t src, uint32_t dst) {
    size_t base = (size_t(g) * bpsl_ + src) * ways_;
    for (uint32_t w = 0; w < ways_; ++w)
      if (succ_[base + w] == dst && cnt_[base + w] > 0) {
        --cnt_[base + w];
        return;
      }
  }

  uint32_t depth_, window_, ways_, fanout_, min_count_;
  uint32_t bpsl_ = 0;
  std::vector<uint32_t> succ_;
  std::vector<uint16_t> cnt_;
  std::vector<uint32_t> ring_src_, ring_dst_, ring_pos_, ring_len_, last_;
  std::vector<uint32_t> set_, set_n_, mark_;
  uint32_t epoch_ = 0;
};
KVTIER_REGISTER(PrefetchPolicy, MarkovPrefetch, "markov",
                "AIOS: sliding-window first-order Markov predictor; prefetch the top successors of the last step's blocks");

}  // namespace kvtier
