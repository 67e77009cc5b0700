// Least outstanding tokens: the instance whose unfinished requests hold the
// fewest prompt and output tokens (Vidur's and llm-d's load-aware routing,
// weighed by tokens rather than requests because a 100K-token prompt is not
// one unit of work); ties to the lowest index.
#include "policies/router.h"

namespace kvtier {

class LeastTokensRouter : public RouterPolicy {
 public:
  static ParamList params() { return {}; }
  explicit LeastTokensRouter(const json&) {}
  uint32_t route(const RoutedRequest&, const std::vector<InstanceLoad>& loads) override {
    uint32_t best = 0;
    for (uint32_t i = 1; i < loads.size(); ++i)
      if (loads[i].outstanding_tokens < loads[best].outstanding_tokens) best = i;
    return best;
  }
};
KVTIER_REGISTER(RouterPolicy, LeastTokensRouter, "least_tokens",
                "the instance with the fewest prompt and output tokens of unfinished requests");

}  // namespace kvtier
