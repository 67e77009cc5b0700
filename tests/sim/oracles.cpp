// Analytic oracles: cases whose simulated time is known in closed form.
#include <catch2/catch.hpp>

#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

constexpr double kB = 10.0;    // GB/s of the link under test
constexpr double kLus = 5.0;   // its latency, microseconds

// GPU and DRAM joined by one PCIe link of kB GB/s; DRAM itself so fast that
// only the link counts.
json gpu_dram_hardware(double gpu_GB, std::vector<std::string> tiers) {
  return json{{"devices",
               {{"gpu", fast_gpu(gpu_GB)},
                {"dram", {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}}}},
              {"links", {{"pcie", {{"ends", {"dram", "gpu"}}, {"bandwidth_GBps", kB}, {"latency_us", kLus}}}}},
              {"tiers", tiers}};
}

}  // namespace

TEST_CASE("one transfer of S bytes over a link takes L + S/B") {
  // Decode one step of a one-layer model whose KV (101 blocks: 100 of context
  // plus the new token's) lives in DRAM: the step is exactly one transfer.
  json cfg{{"hardware", gpu_dram_hardware(1, {"dram"})},
           {"model", tiny_model(1)},
           {"workload", {{"context_tokens", 12800}, {"decode_steps", 1}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
           {"policies", {{"evaluation", "exact"}, {"promotion", "none"}}}};
  json m = simulate(cfg);
  REQUIRE(m.contains("mean_step_latency_s"));
  const double S = 101 * kBlock;
  const double expect = kLus * 1e-6 + S / (kB * 1e9);
  CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-6);
  CHECK(m["links"]["pcie:dram->gpu"]["bytes"].get<double>() == S);
}

TEST_CASE("two concurrent equal flows on one link each take 2S/B") {
  json hw{{"devices",
           {{"gpu", fast_gpu(1)},
            {"a", {{"kind", "dram"}, {"capacity_GB", 1}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}},
            {"b", {{"kind", "dram"}, {"capacity_GB", 1}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}},
            {"sw", {{"kind", "switch"}}}}},
          {"links",
           {{"a_sw", {{"ends", {"a", "sw"}}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}},
            {"b_sw", {{"ends", {"b", "sw"}}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}},
            {"shared", {{"ends", {"sw", "gpu"}}, {"bandwidth_GBps", kB}, {"latency_us", kLus}}}}},
          {"tiers", {"a", "b"}}};
  const std::vector<double> done = finish_times(hw, {{"a", "gpu", 1e9, {}}, {"b", "gpu", 1e9, {}}});
  const double expect = kLus * 1e-6 + 2 * 1e9 / (kB * 1e9);
  CHECK(rel_err(done[0], expect) < 1e-6);
  CHECK(rel_err(done[1], expect) < 1e-6);
}

TEST_CASE("decode with all KV in DRAM and negligible compute: each step moves its KV over PCIe") {
  const int layers = 4, steps = 3, ctx = 1000;
  json cfg{{"hardware", gpu_dram_hardware(1, {"dram"})},
           {"model", tiny_model(layers)},
           {"workload", {{"context_tokens", ctx}, {"decode_steps", steps}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
           {"policies", {{"evaluation", "exact"}, {"promotion", "none"}}}};
  json m = simulate(cfg);
  REQUIRE(m.contains("mean_step_latency_s"));
  double total = 0;
  for (int s = 0; s < steps; ++s) {
    const double blocks = (ctx + s + 128) / 128;  // context + tokens so far + the new one, in whole blocks
    total += layers * (kLus * 1e-6 + blocks * kBlock / (kB * 1e9));
  }
  CHECK(rel_err(m["decode_time_s"].get<double>(), total) < 1e-6);
  CHECK(rel_err(m["mean_step_latency_s"].get<double>(), total / steps) < 1e-6);
  CHECK(m["tiers"]["dram"]["hit_rate"].get<double>() == 1.0);
}

TEST_CASE("when all KV fits in HBM, no byte crosses PCIe") {
  json cfg{{"hardware", gpu_dram_hardware(10, {"gpu", "dram"})},
           {"model", tiny_model(4)},
           {"workload", {{"context_tokens", 4096}, {"decode_steps", 16}, {"batch", 2}}}};
  json m = simulate(cfg);
  REQUIRE(m.contains("links"));
  CHECK(m["links"]["pcie:dram->gpu"]["bytes"].get<double>() == 0);
  CHECK(m["links"]["pcie:gpu->dram"]["bytes"].get<double>() == 0);
  CHECK(m["tiers"]["gpu"]["hit_rate"].get<double>() == 1.0);
  CHECK(m["block_accesses"].get<double>() > 0);
}

TEST_CASE("no tier ever exceeds its capacity, and pressure really demotes") {
  // GPU holds 40 blocks, DRAM 100, NVMe the rest of 4 x 2 x 9 x ... blocks.
  json hw{{"devices",
           {{"gpu", fast_gpu(40 * kBlock / 1e9)},
            {"dram", {{"kind", "dram"}, {"capacity_GB", 100 * kBlock / 1e9}, {"bandwidth_GBps", 50}}},
            {"ssd", {{"kind", "nvme"}, {"capacity_GB", 1}, {"read_GBps", 7}, {"write_GBps", 6}}},
            {"rc", {{"kind", "switch"}}}}},
          {"links",
           {{"g", {{"ends", {"rc", "gpu"}}, {"bandwidth_GBps", 25}}},
            {"d", {{"ends", {"rc", "dram"}}, {"bandwidth_GBps", 50}, {"duplex", "shared"}}},
            {"s", {{"ends", {"rc", "ssd"}}, {"bandwidth_GBps", 7.88}}}}},
          {"tiers", {"gpu", "dram", "ssd"}}};
  json cfg{{"hardware", hw},
           {"model", tiny_model(8)},
           {"workload", {{"context_tokens", 2048}, {"decode_steps", 64}, {"batch", 2}}},
           {"policies", {{"evaluation", "exact"}}}};
  json m = simulate(cfg);
  REQUIRE(m.contains("tiers"));
  for (auto& [name, t] : m["tiers"].items()) {
    INFO(name);
    CHECK(t["peak_bytes"].get<double>() <= t["capacity_bytes"].get<double>());
  }
  CHECK(m["tiers"]["gpu"]["peak_bytes"].get<double>() == m["tiers"]["gpu"]["capacity_bytes"].get<double>());
  CHECK(m["blocks_demoted"].get<double>() > 0);
  CHECK(m["ssd_bytes_written"].get<double>() > 0);
}
