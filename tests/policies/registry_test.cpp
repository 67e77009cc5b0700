// Every registered policy builds from its defaults and documents itself.
#include "fixture.h"

using namespace kvtier;

namespace {
template <class Base>
void check_family(const std::vector<std::string>& expected) {
  const auto& entries = Registry<Base>::instance().entries();
  for (const auto& name : expected) CHECK(entries.count(name) == 1);
  for (const auto& kv : entries) {
    INFO(Registry<Base>::family() << " " << kv.first);
    CHECK(!kv.second.doc.empty());
    for (const auto& p : kv.second.params) {
      INFO("param " << p.name);
      CHECK(!p.doc.empty());
      CHECK(!p.def.is_null());  // every policy parameter has a default
    }
    json cfg = kv.first;
    CHECK(Registry<Base>::instance().create(cfg, "test") != nullptr);
    CHECK(!describe(kv.second.params, "  ").empty() == !kv.second.params.empty());
  }
}
}  // namespace

TEST_CASE("registry: every policy is registered, documented and builds from defaults") {
  check_family<EvictionPolicy>({"lru", "lfu", "clock", "h2o", "streaming_llm", "hkm"});
  check_family<PromotionPolicy>({"none", "on_access", "threshold", "hkm"});
  check_family<PlacementPolicy>({"top", "hkm"});
  check_family<PrefetchPolicy>({"none", "layer_ahead", "hifc_hot_span", "markov", "adaptive"});
  check_family<EvaluationPolicy>({"exact", "trace", "topk", "quest", "app"});
  check_family<CompressionPolicy>({"none", "zstd", "quant"});
}

TEST_CASE("registry: an unknown parameter is a config error") {
  json cfg = {{"name", "h2o"}, {"budgte", 0.2}};
  CHECK_THROWS_AS(Registry<EvictionPolicy>::instance().create(cfg, "eviction"), ConfigError);
  json bad = {{"name", "topk"}, {"budget", 1.5}};
  CHECK_THROWS_AS(Registry<EvaluationPolicy>::instance().create(bad, "evaluation"), ConfigError);
}
