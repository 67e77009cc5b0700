// An engine constructed to validate only (sim/core/validation_cache.h) must
// accept and refuse exactly what a run's engine does, resolve the config to
// the same text, and allocate no block table.
#include <catch2/catch.hpp>

#include "sim/core/config.h"
#include "sim/core/footprint.h"
#include "sim/core/validation_cache.h"
#include "sim/engine/engine.h"
#include "sim/serving/serving.h"

namespace kvtier {
namespace {

// What constructing `cfg`'s engine gives: the resolved text, or the error.
template <class Engine>
std::string constructed(json cfg, ValidationCache* cache) {
  try {
    if (!cache) {
      Engine e(cfg);
      return cfg.dump();
    }
    auto hw = cache->hardware(cfg["hardware"]);
    Engine e(cfg, cache, hw);
    cfg["hardware"] = hw->resolved;
    return cfg.dump();
  } catch (const ConfigError& e) {
    return std::string("error: ") + e.what();
  }
}

template <class Engine>
void same(const std::string& file, const std::vector<std::string>& sets, ValidationCache& cache) {
  const json cfg = load_config(file, sets);
  INFO(file << " " << json(sets).dump());
  CHECK(constructed<Engine>(cfg, &cache) == constructed<Engine>(cfg, nullptr));
}

}  // namespace

TEST_CASE("validating engine: resolves and refuses as a run's engine does") {
  ValidationCache cache;
  for (int pass = 0; pass < 2; ++pass) {  // the second pass reads the cache
    same<Simulation>("configs/default.json", {}, cache);
    same<Simulation>("configs/default.json", {"workload.batch=3", "policies.prefetch.depth=2"}, cache);
    same<Simulation>("configs/default.json", {"hardware.devices.dram.capacity_GB=0.001"}, cache);
    same<Simulation>("configs/default.json", {"policies.placement={\"name\":\"fractions\",\"percent\":[50,50]}"}, cache);
    same<Simulation>("configs/default.json", {"workload.overlap_next_load=true"}, cache);
  }
  same<ServingSimulation>("configs/serving/prefix_example.json", {}, cache);
}

TEST_CASE("validating engine: a table past the memory limit is refused without being allocated") {
  ValidationCache cache;
  json cfg = load_config("configs/default.json", {"workload.batch=256"});
  auto hw = cache.hardware(cfg["hardware"]);
  const double before = heap_bytes_in_use();
  {
    json c = cfg;
    Simulation sim(c, &cache, hw);
    CHECK(heap_bytes_in_use() - before < 4e6);  // the full table of 256 sequences is tens of MB
  }
  set_memory_limit(kProcessBaseBytes + 1e6);
  json c = cfg;
  CHECK_THROWS_WITH(Simulation(c, &cache, hw), Catch::Contains("the KV block table"));
  set_memory_limit(0);
}

}  // namespace kvtier
