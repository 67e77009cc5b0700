// Round-robin: the i-th request to instance i mod n, whatever their load
// (vLLM's and Vidur's default global scheduler).
#include "policies/router.h"

namespace kvtier {

class RoundRobinRouter : public RouterPolicy {
 public:
  static ParamList params() { return {}; }
  explicit RoundRobinRouter(const json&) {}
  uint32_t route(const RoutedRequest&, const std::vector<InstanceLoad>& loads) override {
    const uint32_t i = next_ % static_cast<uint32_t>(loads.size());
    next_ = i + 1;
    return i;
  }

 private:
  uint32_t next_ = 0;
};
KVTIER_REGISTER(RouterPolicy, RoundRobinRouter, "round_robin", "each request to the next instance in turn");

}  // namespace kvtier
