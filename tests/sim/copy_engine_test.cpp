// GPU copy engines: with one per direction, copies from two host-side
// memories into the GPU run one after the other (as measured on an H200);
// without the model they run at once and share the link.
#include <catch2/catch.hpp>

#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

constexpr double kL = 100e-6;  // link latency
constexpr double kT = 100e-6;  // one block over the link

// Two memories behind one switch; the GPU link is the bottleneck. Tier a holds
// one block, so of the layer's two blocks one is in a and one in b, and the
// step fetches from both.
json config(int copy_engines) {
  json gpu = fast_gpu(1);
  gpu["copy_engines"] = copy_engines;
  json mem{{"kind", "dram"}, {"capacity_GB", 1.5 * kBlock / 1e9}, {"bandwidth_GBps", 1e3}, {"latency_us", 0}};
  json big = mem;
  big["capacity_GB"] = 1;
  json hw{{"devices", {{"gpu", gpu}, {"a", mem}, {"b", big}, {"sw", {{"kind", "switch"}}}}},
          {"links",
           {{"a_sw", {{"ends", {"a", "sw"}}, {"bandwidth_GBps", 1e3}, {"latency_us", 0}}},
            {"b_sw", {{"ends", {"b", "sw"}}, {"bandwidth_GBps", 1e3}, {"latency_us", 0}}},
            {"pcie", {{"ends", {"sw", "gpu"}}, {"bandwidth_GBps", kBlock / kT / 1e9}, {"latency_us", kL * 1e6}}}}},
          {"tiers", {"a", "b"}}};
  return json{{"hardware", hw},
              {"model", tiny_model(1)},
              {"workload", {{"context_tokens", 255}, {"decode_steps", 1}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
              {"policies", {{"evaluation", "exact"}, {"promotion", "none"}}}};
}

}  // namespace

TEST_CASE("without copy engines, fetches from two memories share the GPU link") {
  json m = simulate(config(0));
  REQUIRE(m.contains("decode_time_s"));
  CHECK(m["tiers"]["a"]["hit_rate"].get<double>() == 0.5);
  CHECK(rel_err(m["decode_time_s"].get<double>(), kL + 2 * kT) < 1e-6);
}

TEST_CASE("with one copy engine per direction, fetches from two memories run one after the other") {
  json m = simulate(config(1));
  REQUIRE(m.contains("decode_time_s"));
  CHECK(m["tiers"]["a"]["hit_rate"].get<double>() == 0.5);
  CHECK(rel_err(m["decode_time_s"].get<double>(), 2 * (kL + kT)) < 1e-6);
}

TEST_CASE("a split link's duplex efficiency slows opposite flows, not a lone one") {
  json hw{{"devices",
           {{"gpu", fast_gpu(1)},
            {"dram", {{"kind", "dram"}, {"capacity_GB", 1}, {"bandwidth_GBps", 1e3}, {"latency_us", 0}}}}},
          {"links",
           {{"pcie", {{"ends", {"dram", "gpu"}}, {"bandwidth_GBps", 10}, {"latency_us", 0}, {"duplex_efficiency", 0.8}}}}},
          {"tiers", {"dram"}}};
  // In and out together, then one more in, alone, after both.
  const std::vector<double> done =
      finish_times(hw, {{"dram", "gpu", 1e9, {}}, {"gpu", "dram", 1e9, {}}, {"dram", "gpu", 1e9, {0, 1}}});
  // Together: 0.8 x (10 + 10) GB/s shared by two flows = 8 GB/s each.
  CHECK(rel_err(done[0], 1e9 / 8e9) < 1e-6);
  CHECK(rel_err(done[1], 1e9 / 8e9) < 1e-6);
  // Alone: the full 10 GB/s.
  CHECK(rel_err(done[2] - done[1], 1e9 / 10e9) < 1e-6);
}
