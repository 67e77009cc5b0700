// The invariant checker catches what it is for: a fault planted in the KV
// store (blocks allocated without making room) is stopped at the first step
// with the tier and its capacity; the same run without the fault passes.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "sim/engine/invariants.h"
#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// 4 sequences x 2 layers x 9 blocks of 64 KiB in a GPU that holds 40 of them
// (the rest spills to DRAM).
json spilling_config() {
  json gpu = fast_gpu(40.5 * 128.0 * 512.0 / 1e9);
  return json{{"hardware",
               {{"devices",
                 {{"gpu", gpu},
                  {"dram", {{"kind", "dram"}, {"capacity_GB", 1}, {"bandwidth_GBps", 100}, {"latency_us", 0}}}}},
                {"links", {{"pcie", {{"ends", {"dram", "gpu"}}, {"bandwidth_GBps", 10}, {"latency_us", 1}}}}},
                {"tiers", {"gpu", "dram"}}}},
              {"model", tiny_model(2)},
              {"workload", {{"batch", 4}, {"context_tokens", 1024}, {"decode_steps", 8}, {"trace", {{"kind", "none"}}}}},
              {"policies", {{"evaluation", "exact"}}}};
}

json run_checked(const char* fault) {
  return in_child([fault] {
    setenv("KVTIER_CHECK_INVARIANTS", "1", 1);
    if (fault) setenv("KVTIER_PLANT_FAULT", fault, 1);
    json cfg = spilling_config();
    resolve_params(cfg["workload"], workload_params(), "workload");
    cfg["sim"] = json::object();
    resolve_params(cfg["sim"], sim_params(), "sim");
    Simulation sim(cfg);
    return sim.run("");
  });
}

}  // namespace

TEST_CASE("invariants: a run that spills to DRAM keeps every invariant") {
  json m = run_checked(nullptr);
  REQUIRE(m.contains("mean_step_latency_s"));
  CHECK(m["tiers"]["dram"]["peak_bytes"].get<double>() > 0);
}

TEST_CASE("invariants: a planted fault (allocation without room) is caught, naming the tier and its capacity") {
  json m = run_checked("allocate_without_room");
  REQUIRE(m.contains("exception"));
  const std::string e = m["exception"].get<std::string>();
  CHECK_THAT(e, Catch::Contains("invariant violated"));
  CHECK_THAT(e, Catch::Contains("tier gpu holds"));
  CHECK_THAT(e, Catch::Contains("above its capacity of 40"));
}
