// Time-to-first-token routing (Mooncake's conductor): the instance where the
// arriving request's first token is estimated to come soonest, weighing the
// prefills queued there, the prefix its cache holds (fewer tokens to
// compute) and where those cached blocks lie (a block read over the fabric
// from another node's DRAM or SSD costs more than one in the instance's own
// host memory). The estimates are the cluster's (InstanceLoad); ties go to
// the instance with fewer outstanding tokens, then the first.
#include "policies/router.h"

namespace kvtier {

class MinTtftRouter : public RouterPolicy {
 public:
  static ParamList params() { return {}; }
  explicit MinTtftRouter(const json&) {}
  bool reads_estimates() const override { return true; }
  uint32_t route(const RoutedRequest&, const std::vector<InstanceLoad>& loads) override {
    uint32_t best = 0;
    for (uint32_t i = 1; i < loads.size(); ++i) {
      const double a = loads[i].queue_s + loads[i].service_s, b = loads[best].queue_s + loads[best].service_s;
      if (a < b || (a == b && loads[i].outstanding_tokens < loads[best].outstanding_tokens)) best = i;
    }
    return best;
  }
};
KVTIER_REGISTER(RouterPolicy, MinTtftRouter, "min_ttft",
                "the instance with the soonest estimated first token: prefills queued there, then its own prefill "
                "less its cached prefix, whose blocks load from wherever they lie (local or over the fabric)");

}  // namespace kvtier
