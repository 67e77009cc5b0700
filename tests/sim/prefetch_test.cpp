// Layer-ahead prefetch in the engine: a transfer shorter than two layers of
// compute is hidden with depth 2, partly with depth 1, not at all with 0.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>

#include "sim_fixture.h"
#include "traces/attention_trace.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

constexpr double kC = 100e-6;  // compute per layer (launch overhead; everything else is negligible)
constexpr double kX = 150e-6;  // the one transfer: one 64 KiB block over the link, no latency

// Four layers, a 200-token context (blocks 0 and 1 per layer), two steps.
// The GPU holds 7 of the 8 blocks, so LRU leaves layer 0's block 0 in DRAM.
// Step 0 uses block 1 everywhere; step 1 also needs block 0 at layer 0.
std::string write_trace() {
  AttentionHeader h;
  h.layers = 4;
  h.steps = 2;
  h.block_tokens = 128;
  h.context_tokens = 200;
  // One file per process: ctest runs these cases in parallel.
  std::string path = (std::filesystem::temp_directory_path() /
                      ("kvtier_prefetch_trace." + std::to_string(getpid()) + ".jsonl"))
                         .string();
  JsonlAttentionWriter w(path, h);
  for (uint32_t s = 0; s < 2; ++s)
    for (uint32_t l = 0; l < 4; ++l) {
      AttentionRecord r;
      r.step = s;
      r.layer = l;
      r.blocks = {1};
      r.mass = {0.5f};
      if (s == 1 && l == 0) {
        r.blocks.push_back(0);
        r.mass.push_back(0.5f);
      }
      w.write(r);
    }
  w.close();
  return path;
}

json config(const std::string& trace, int depth) {
  json gpu = fast_gpu(7.5 * kBlock / 1e9);
  gpu["launch_overhead_us"] = kC * 1e6;
  json hw{{"devices",
           {{"gpu", gpu},
            {"dram", {{"kind", "dram"}, {"capacity_GB", 1}, {"bandwidth_GBps", 1e3}, {"latency_us", 0}}}}},
          {"links", {{"pcie", {{"ends", {"dram", "gpu"}}, {"bandwidth_GBps", kBlock / kX / 1e9}, {"latency_us", 0}}}}},
          {"tiers", {"gpu", "dram"}}};
  return json{{"hardware", hw},
              {"model", tiny_model(4)},
              {"workload",
               {{"context_tokens", 200},
                {"decode_steps", 2},
                {"prefill", "none"},
                {"trace", {{"kind", "file"}, {"path", trace}}}}},
              {"policies", {{"promotion", "none"}, {"prefetch", {{"name", "layer_ahead"}, {"depth", depth}}}}}};
}

}  // namespace

TEST_CASE("layer-ahead depth 0 leaves the transfer on the critical path") {
  json m = simulate(config(write_trace(), 0));
  REQUIRE(m.contains("decode_time_s"));
  CHECK(m["tiers"]["dram"]["hit_rate"].get<double>() > 0);  // the fetch really happened
  CHECK(rel_err(m["decode_time_s"].get<double>(), 8 * kC + kX) < 1e-6);
}

TEST_CASE("layer-ahead depth 1 hides one layer of compute's worth of the transfer") {
  json m = simulate(config(write_trace(), 1));
  REQUIRE(m.contains("decode_time_s"));
  CHECK(rel_err(m["decode_time_s"].get<double>(), 8 * kC + (kX - kC)) < 1e-6);
}

TEST_CASE("layer-ahead depth 2 hides a transfer shorter than two layers of compute") {
  json m = simulate(config(write_trace(), 2));
  REQUIRE(m.contains("decode_time_s"));
  CHECK(m["tiers"]["dram"]["hit_rate"].get<double>() > 0);
  CHECK(rel_err(m["decode_time_s"].get<double>(), 8 * kC) < 1e-6);
}

TEST_CASE("H2O drops KV, so attention recall falls below 1, where LRU keeps all of it") {
  json base = load_config("configs/default.json", {"workload.decode_steps=16", "workload.batch=1"});
  json h2o = base;
  h2o["policies"]["eviction"] = json{{"name", "h2o"}};
  json m_h2o = simulate(h2o);
  json m_lru = simulate(base);
  REQUIRE(m_h2o.contains("attention_recall"));
  REQUIRE(m_lru.contains("attention_recall"));
  CHECK(m_lru["attention_recall"].get<double>() == 1.0);
  CHECK(m_h2o["blocks_dropped"].get<double>() > 0);
  CHECK(m_h2o["attention_recall"].get<double>() < 1.0);
  CHECK(m_h2o["attention_recall"].get<double>() > 0.3);
}
