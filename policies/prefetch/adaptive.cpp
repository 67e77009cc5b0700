// Load-adaptive prefetch depth (InCloud AIOS, seed 004): each step the
// engine reports the GPU compute stream's and the fetch link's busy
// fractions over the previous step. GPU busy above gpu_high -> min_depth
// (compute-bound: deeper prefetch only holds memory); else link busy below
// link_low -> max_depth (the link has room: fetch further ahead); else keep
// the current depth. The GPU rule wins when both hold.
#include "policies/policy.h"

namespace kvtier {

class AdaptivePrefetch : public PrefetchPolicy {
 public:
  static ParamList params() {
    return {integer("min_depth", 1, "depth when the GPU is busy", 0, 64),
            integer("max_depth", 4, "depth when the link is idle", 0, 64),
            integer("initial_depth", 2, "depth before the first report (clamped to [min_depth, max_depth])", 0, 64),
            num("gpu_high", 0.7, "GPU busy fraction above which depth drops to min_depth", 0.0, 1.0),
            num("link_low", 0.4, "link busy fraction below which depth rises to max_depth", 0.0, 1.0)};
  }
  explicit AdaptivePrefetch(const json& p)
      : min_(uint32_t(get_int(p, "min_depth"))),
        max_(uint32_t(get_int(p, "max_depth"))),
        gpu_high_(get_num(p, "gpu_high")),
        link_low_(get_num(p, "link_low")) {
    if (min_ > max_) throw ConfigError("prefetch adaptive: min_depth " + std::to_string(min_) + " > max_depth " + std::to_string(max_));
    uint32_t d = uint32_t(get_int(p, "initial_depth"));
    depth_ = d < min_ ? min_ : (d > max_ ? max_ : d);
  }
  uint32_t depth() const override { return depth_; }
  bool adapts_depth() const override { return true; }
  uint32_t adapt_depth(double gpu_busy, double link_busy) override {
    if (gpu_busy > gpu_high_) depth_ = min_;
    else if (link_busy < link_low_) depth_ = max_;
    return depth_;
  }

 private:
  uint32_t min_, max_;
  double gpu_high_, link_low_;
  uint32_t depth_ = 1;
};
KVTIER_REGISTER(PrefetchPolicy, AdaptivePrefetch, "adaptive",
                "AIOS: prefetch depth drops to min when the GPU is busy > 0.7, rises to max when the link is < 0.4 busy");

}  // namespace kvtier
