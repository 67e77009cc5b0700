// HiFC's hot-span predictor (seed 002): from the hot blocks of the attention
// of the last `window` decode steps (16 tokens), prefetch the span [lo, hi]
// they cover, widened by `before` (10%) of its width towards older blocks
// and `after` (15%) towards newer ones. Layer-ahead depth as layer_ahead.
//
// "Hot" in a step: a block whose mass is at least hot_factor x the mean mass
// of the blocks attention used in that step (all used blocks when the engine
// passes no mass). The first `skip_sinks` blocks are left out of the span
// (they are hot every step and always resident; counting them would stretch
// the span over the whole context). State: per (seq, layer) a ring of
// `window` (step, lo, hi) entries, filled from observe().
#include <cmath>

#include "policies/common.h"
#include "policies/policy.h"

namespace kvtier {

class HotSpanPrefetch : public PrefetchPolicy {
 public:
  static ParamList params() {
    return {integer("depth", 1, "layers fetched ahead of the one computing", 0, 64),
            integer("window", 16, "decode steps of attention history the span is taken over (HiFC: 16 tokens)", 1, 4096),
            num("before", 0.10, "widening towards older blocks, as a fraction of the span's width", 0.0),
            num("after", 0.15, "widening towards newer blocks, as a fraction of the span's width", 0.0),
            num("hot_factor", 1.0, "a block is hot when its mass >= hot_factor x the step's mean mass per used block", 0.0),
            integer("skip_sinks", 1, "first blocks left out of the span (attention sinks)", 0)};
  }
  explicit HotSpanPrefetch(const json& p)
      : depth_(uint32_t(get_int(p, "depth"))),
        window_(uint32_t(get_int(p, "window"))),
        before_(get_num(p, "before")),
        after_(get_num(p, "after")),
        hot_(get_num(p, "hot_factor")),
        skip_(uint32_t(get_int(p, "skip_sinks"))) {}

  void setup(const BlockTable& table) override {
    size_t n = size_t(n_groups(table)) * window_;
    step_.assign(n, kNone);
    lo_.assign(n, 0);
    hi_.assign(n, 0);
  }
  uint32_t depth() const override { return depth_; }
  bool reads_attention() const override { return true; }

  void observe(const SelectInput& done, const BlockTable& table) override {
    if (!done.trace_blocks || done.trace_blocks->empty()) return;
    const auto& blocks = *done.trace_blocks;
    const std::vector<float>* mass = done.trace_mass && done.trace_mass->size() >= blocks.size() ? done.trace_mass : nullptr;
    double thr = 0;
    if (mass) {
      double sum = 0;
      for (size_t j = 0; j < blocks.size(); ++j) sum += (*mass)[j];
      thr = hot_ * sum / double(blocks.size());
    }
    uint32_t lo = kNone, hi = 0;
    for (size_t j = 0; j < blocks.size(); ++j) {
      uint32_t i = blocks[j];
      if (i < skip_ || (mass && (*mass)[j] < thr)) continue;
      lo = std::min(lo, i);
      hi = std::max(hi, i);
    }
    size_t s = slot(table, done.seq, done.layer, done.step);
    if (lo == kNone) {  // nothing hot outside the sinks: forget this step
      step_[s] = kNone;
      return;
    }
    step_[s] = done.step;
    lo_[s] = lo;
    hi_[s] = hi;
  }

  void predict(const SelectInput& next, const BlockTable& table, std::vector<uint32_t>& out) override {
    if (next.n_blocks == 0) return;
    uint32_t lo = kNone, hi = 0;
    size_t base = size_t(next.seq * table.layers + next.layer) * window_;
    for (uint32_t k = 0; k < window_; ++k) {
      uint32_t st = step_[base + k];
      if (st == kNone || st > next.step || next.step - st > window_) continue;
      lo = std::min(lo, lo_[base + k]);
      hi = std::max(hi, hi_[base + k]);
    }
    if (lo == kNone) return;
    double w = double(hi - lo + 1);
    double a = double(lo) - std::ceil(before_ * w - 1e-9);
    double b = double(hi) + std::ceil(after_ * w - 1e-9);
    uint32_t from = a < 0 ? 0 : uint32_t(a);
    uint32_t to = b >= double(next.n_blocks - 1) ? next.n_blocks - 1 : uint32_t(b);
    for (uint32_t i = from; i <= to; ++i) out.push_back(i);
  }

  // A new sequence in the (seq, layer) has no hot span yet.
  void on_release(BlockId b, const BlockTable& table) override {
    if (table.index_of(b) != 0) return;
    const size_t base = size_t(table.group_of(b)) * window_;
    std::fill(step_.begin() + static_cast<std::ptrdiff_t>(base), step_.begin() + static_cast<std::ptrdiff_t>(base + window_), kNone);
  }

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  size_t slot(const BlockTable& t, uint32_t seq, uint32_t layer, uint32_t step) const {
    return size_t(seq * t.layers + layer) * window_ + step % window_;
  }
  uint32_t depth_, window_;
  double before_, after_, hot_;
  uint32_t skip_;
  std::vector<uint32_t> step_, lo_, hi_;
};
KVTIER_REGISTER(PrefetchPolicy, HotSpanPrefetch, "hifc_hot_span",
                "HiFC: prefetch the span of the last 16 steps' hot blocks, widened 10% before and 15% after");

}  // namespace kvtier
