// KV-aware routing (Mooncake's conductor, llm-d's prefix-aware scorer): the
// instance whose prefix cache holds the longest run of the prompt's leading
// blocks, among the instances whose load is within `load_cap` of the least
// loaded one, so that a hot prefix does not pile every request on one
// instance. Ties, and prompts no instance holds, go to the least loaded.
#include "policies/router.h"

namespace kvtier {

class KvAwareRouter : public RouterPolicy {
 public:
  static ParamList params() {
    return {num("load_cap", 2.0,
                "an instance is eligible while its outstanding tokens are at most this times the least loaded "
                "instance's plus one prompt of the arriving request (1: only the least loaded)",
                1.0)};
  }
  explicit KvAwareRouter(const json& p) : cap_(p.at("load_cap").get<double>()) {}
  bool reads_prefix() const override { return true; }
  uint32_t route(const RoutedRequest& r, const std::vector<InstanceLoad>& loads) override {
    uint32_t least = 0;
    for (uint32_t i = 1; i < loads.size(); ++i)
      if (loads[i].outstanding_tokens < loads[least].outstanding_tokens) least = i;
    const double limit = cap_ * double(loads[least].outstanding_tokens) + double(r.input_tokens);
    uint32_t best = least;
    for (uint32_t i = 0; i < loads.size(); ++i) {
      if (double(loads[i].outstanding_tokens) > limit) continue;
      const InstanceLoad& a = loads[i];
      const InstanceLoad& b = loads[best];
      if (a.cached_tokens > b.cached_tokens ||
          (a.cached_tokens == b.cached_tokens && a.outstanding_tokens < b.outstanding_tokens))
        best = i;
    }
    return best;
  }

 private:
  double cap_;
};
KVTIER_REGISTER(RouterPolicy, KvAwareRouter, "kv_aware",
                "the instance holding the longest cached prefix of the prompt, within a load cap of the least loaded");

}  // namespace kvtier
