// Tiers hold copies, reads come from wherever a valid copy is, and the
// metrics mean what their names say.
#include <catch2/catch.hpp>

#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

json gpu_dram_ssd(double gpu_blocks, double ssd_write_GBps) {
  return json{{"devices",
               {{"gpu", fast_gpu(gpu_blocks * kBlock / 1e9)},
                {"dram", {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}},
                {"ssd", {{"kind", "nvme"}, {"capacity_GB", 100}, {"read_GBps", 7}, {"write_GBps", ssd_write_GBps}}},
                {"rc", {{"kind", "switch"}}}}},
              {"links",
               {{"pcie", {{"ends", {"rc", "gpu"}}, {"bandwidth_GBps", 10}, {"latency_us", 1}}},
                {"dbus", {{"ends", {"rc", "dram"}}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}},
                {"s", {{"ends", {"rc", "ssd"}}, {"bandwidth_GBps", 7.88}}}}},
              {"tiers", {"gpu", "dram"}}};
}

json swap_config(const json& eviction) {
  // 8 layers x 17 blocks (2048 + 64 tokens) = 136 blocks; the GPU holds 100,
  // so every dense step promotes DRAM blocks and evicts GPU blocks.
  return json{{"hardware", gpu_dram_ssd(100, 6)},
              {"model", tiny_model(8)},
              {"workload", {{"context_tokens", 2048}, {"decode_steps", 64}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
              {"policies", {{"evaluation", "exact"}, {"promotion", "on_access"}, {"eviction", eviction}}}};
}

}  // namespace

TEST_CASE("a block read up keeps its copy below, so demoting it again moves no bytes") {
  json keep = simulate(swap_config("lru"));
  json excl = simulate(swap_config(json{{"name", "clock"}, {"write_back", false}}));
  json clock = simulate(swap_config(json{{"name", "clock"}, {"write_back", true}}));
  REQUIRE(keep.contains("links"));
  REQUIRE(excl.contains("links"));
  const double down_keep = keep["links"]["pcie:gpu->rc"]["bytes"].get<double>();
  const double down_excl = excl["links"]["pcie:gpu->rc"]["bytes"].get<double>();
  const double down_clock = clock["links"]["pcie:gpu->rc"]["bytes"].get<double>();
  // Only blocks without a valid copy below are written: each block the first
  // time it leaves the GPU (136), and then at most one per (step, layer), the
  // one the new token goes into.
  const double bound = 64.0 * 8.0 + 136.0;
  CHECK(down_keep <= bound * kBlock);
  CHECK(keep["blocks_written_back"].get<double>() <= bound);
  CHECK(keep["blocks_demoted"].get<double>() > 10 * keep["blocks_written_back"].get<double>());
  // Exclusive tiers rewrite every victim: about as much as is read up.
  CHECK(down_excl > 3 * down_keep);
  CHECK(excl["blocks_written_back"].get<double>() == excl["blocks_demoted"].get<double>());
  // Clock with write-back keeps copies like every other policy.
  CHECK(down_clock <= bound * kBlock);
  // Capacity is a hard limit with the copies counted.
  for (const json* m : {&keep, &excl, &clock})
    for (auto& [name, t] : (*m)["tiers"].items()) {
      INFO(name);
      CHECK(t["peak_bytes"].get<double>() <= t["capacity_bytes"].get<double>());
    }
}

TEST_CASE("lru's watermark: 1 gives plain lru's numbers, 0.5 demotes out of the GPU in the background") {
  json plain = simulate(swap_config("lru"));
  json one = simulate(swap_config(json{{"name", "lru"}, {"watermark", 1.0}}));
  json half = simulate(swap_config(json{{"name", "lru"}, {"watermark", 0.5}}));
  REQUIRE(plain.contains("blocks_demoted"));
  REQUIRE(half.contains("blocks_demoted"));
  CHECK(one == plain);
  // After each step the GPU (100 blocks) is brought down to 50 in the
  // background: more blocks leave it than on demand alone.
  CHECK(half["blocks_demoted"].get<double>() > plain["blocks_demoted"].get<double>());
}

TEST_CASE("copies below give way when their tier needs the room") {
  // DRAM holds exactly the KV that does not fit on the GPU plus a few
  // blocks: copies of promoted blocks must be dropped to make room, and the
  // run still never exceeds a capacity.
  json cfg = swap_config("lru");
  cfg["hardware"]["devices"]["dram"]["capacity_GB"] = 45 * kBlock / 1e9;
  json m = simulate(cfg);
  REQUIRE(m.contains("tiers"));
  CHECK(m["copies_dropped"].get<double>() > 0);
  for (auto& [name, t] : m["tiers"].items()) {
    INFO(name);
    CHECK(t["peak_bytes"].get<double>() <= t["capacity_bytes"].get<double>());
  }
}

TEST_CASE("a block still being written down is read from where it is written from") {
  // Prefill fills a 10-block DRAM tier, then demotes its oldest blocks to an
  // SSD that writes at 0.05 GB/s (1.3 ms per 64 KiB block, 20 ms for 16).
  // Decode step 0 reads them from DRAM, which still holds them, instead of
  // waiting for the writes; the SSD write is paid all the same.
  json hw = gpu_dram_ssd(1000, 0.05);
  hw["devices"]["dram"]["capacity_GB"] = 10 * kBlock / 1e9;
  hw["tiers"] = {"dram", "ssd"};
  json cfg{{"hardware", hw},
           {"model", tiny_model(1)},
           {"workload", {{"context_tokens", 26 * 128}, {"decode_steps", 4}, {"prefill", "compute"}, {"trace", {{"kind", "none"}}}}},
           {"policies", {{"evaluation", "exact"}, {"promotion", "none"}}}};
  json m = simulate(cfg);
  REQUIRE(m.contains("first_step_latency_s"));
  const double write_s = 16 * kBlock / 0.05e9;
  CHECK(m["ssd_bytes_written"].get<double>() >= 16 * kBlock);
  CHECK(m["first_step_latency_s"].get<double>() < 0.5 * write_s);
}

TEST_CASE("warm-up steps are left out of TPOT and tokens/s, and reported apart") {
  json cfg = swap_config("lru");
  cfg["workload"]["warmup_steps"] = 8;
  json m = simulate(cfg);
  REQUIRE(m.contains("decode_tokens_per_s"));
  // decode_time_s covers every step; TPOT and tokens/s only the 56 measured ones.
  CHECK(m["all_steps_mean_latency_s"].get<double>() * 64 == Approx(m["decode_time_s"].get<double>()).epsilon(1e-9));
  CHECK(m["decode_tokens_per_s"].get<double>() == Approx(1.0 / m["mean_step_latency_s"].get<double>()).epsilon(1e-9));
  CHECK(m["first_step_latency_s"].get<double>() > 0);
  cfg["workload"]["warmup_steps"] = 64;
  json bad = simulate(cfg);
  REQUIRE(bad.contains("config_error"));
  CHECK(bad["config_error"].get<std::string>().find("workload.warmup_steps") != std::string::npos);
}

TEST_CASE("hit rates and the dropped share sum to one; recall is a mass; wear is a number or absent") {
  json cfg{{"hardware", gpu_dram_ssd(1000, 6)},
           {"model", tiny_model(4)},
           {"workload", {{"context_tokens", 4096}, {"decode_steps", 16}}},
           {"policies", {{"evaluation", "exact"}, {"eviction", "h2o"}, {"promotion", "none"}}}};
  cfg["hardware"]["tiers"] = {"gpu"};
  json m = simulate(cfg);
  REQUIRE(m.contains("tiers"));
  double sum = m["dropped_rate"].get<double>();
  for (auto& [name, t] : m["tiers"].items()) sum += t["hit_rate"].get<double>();
  CHECK(sum == Approx(1.0).epsilon(1e-12));
  CHECK(m["dropped_rate"].get<double>() > 0.5);
  CHECK(m["attention_recall"].get<double>() < 1.0);
  CHECK(m["block_recall"].get<double>() == Approx(1.0 - m["dropped_rate"].get<double>()));

  // No trace: no attention mass to speak of, so no attention_recall.
  cfg["workload"]["trace"] = {{"kind", "none"}};
  json n = simulate(cfg);
  REQUIRE(n.contains("tiers"));
  CHECK_FALSE(n.contains("attention_recall"));

  // A storage tier that is never written has no wear-out date (not null, not 0).
  json hw = gpu_dram_ssd(1000, 6);
  hw["tiers"] = {"gpu", "ssd"};
  json s = simulate(json{{"hardware", hw},
                         {"model", tiny_model(2)},
                         {"workload", {{"context_tokens", 1024}, {"decode_steps", 4}}},
                         {"policies", {{"evaluation", "exact"}}}});
  REQUIRE(s.contains("tiers"));
  CHECK_FALSE(s["tiers"]["ssd"].contains("years_to_wear_out"));
}

TEST_CASE("link utilization is bytes over bandwidth x time, beside occupancy") {
  json hw = gpu_dram_ssd(1000, 6);
  hw["tiers"] = {"dram"};
  json cfg{{"hardware", hw},
           {"model", tiny_model(1)},
           {"workload", {{"context_tokens", 12800}, {"decode_steps", 1}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
           {"policies", {{"evaluation", "exact"}, {"promotion", "none"}}}};
  json m = simulate(cfg);
  REQUIRE(m.contains("links"));
  const json& l = m["links"]["pcie:rc->gpu"];
  const double end = m["simulated_time_s"].get<double>();
  CHECK(l["utilization"].get<double>() == Approx(l["bytes"].get<double>() / (10e9 * end)).epsilon(1e-12));
  // One transfer of L + S/B: busy nearly the whole run, utilization below occupancy (the latency).
  CHECK(l["busy_fraction"].get<double>() > 0.99);
  CHECK(l["utilization"].get<double>() < l["busy_fraction"].get<double>());
}

TEST_CASE("a host codec decompresses in host memory before the copy: the uncompressed bytes cross PCIe") {
  json hw = gpu_dram_ssd(1000, 6);
  hw["devices"]["cpu"] = {{"kind", "cpu"}, {"cores", 4}};
  hw["links"]["cpu_port"] = {{"ends", {"rc", "cpu"}}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}, {"duplex", "fatpipe"}};
  hw["tiers"] = {"dram"};
  json cfg{{"hardware", hw},
           {"model", tiny_model(1)},
           {"workload", {{"context_tokens", 12800}, {"decode_steps", 1}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
           {"policies", {{"evaluation", "exact"}, {"promotion", "none"}, {"compression", {{"name", "zstd"}, {"from_tier", 0}}}}}};
  json z = simulate(cfg);
  cfg["policies"]["compression"] = "none";
  json plain = simulate(cfg);
  REQUIRE(z.contains("links"));
  REQUIRE(plain.contains("links"));
  // Same bytes over PCIe: the codec ran in DRAM, before the copy.
  CHECK(z["links"]["pcie:rc->gpu"]["bytes"].get<double>() == plain["links"]["pcie:rc->gpu"]["bytes"].get<double>());
  // And the decompression is on the critical path, before the copy starts.
  CHECK(z["mean_step_latency_s"].get<double>() > plain["mean_step_latency_s"].get<double>() * 1.01);
}

TEST_CASE("transfer_unit tokens: a sequence's last, partial block moves only the tokens it holds") {
  // 130 tokens of context: a full block and one holding 3 tokens at step 0
  // (2 of the prompt and the new one). One layer, all KV in DRAM, one step.
  json hw = gpu_dram_ssd(1000, 6);
  hw["tiers"] = {"dram"};
  json cfg{{"hardware", hw},
           {"model", tiny_model(1)},
           {"workload", {{"context_tokens", 130}, {"decode_steps", 1}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
           {"policies", {{"evaluation", "exact"}, {"promotion", "none"}}}};
  json whole = simulate(cfg);
  cfg["workload"]["transfer_unit"] = "tokens";
  json tokens = simulate(cfg);
  REQUIRE(whole.contains("links"));
  REQUIRE(tokens.contains("links"));
  CHECK(whole["links"]["pcie:rc->gpu"]["bytes"].get<double>() == 2 * kBlock);
  CHECK(tokens["links"]["pcie:rc->gpu"]["bytes"].get<double>() == 131 * 512.0);
}

TEST_CASE("KV streamed through the GPU takes staging buffers: the layer computing and those fetched ahead, and they must fit") {
  // All KV in DRAM, two layers of 101 blocks (12,800 + 1 tokens) per step.
  // With layer-ahead depth 1, the next layer's KV lands while this one
  // computes: two layers' worth at once.
  json hw = gpu_dram_ssd(1000, 6);
  hw["tiers"] = {"dram"};
  json cfg{{"hardware", hw},
           {"model", tiny_model(2)},
           {"workload", {{"context_tokens", 12800}, {"decode_steps", 4}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
           {"policies", {{"evaluation", "exact"}, {"promotion", "none"}, {"prefetch", {{"name", "layer_ahead"}, {"depth", 1}}}}}};
  json m = simulate(cfg);
  REQUIRE(m.contains("gpu_staging_peak_bytes"));
  CHECK(m["gpu_staging_peak_bytes"].get<double>() == 2 * 101 * kBlock);
  cfg["policies"]["prefetch"] = "none";
  json m0 = simulate(cfg);
  REQUIRE(m0.contains("gpu_staging_peak_bytes"));
  CHECK(m0["gpu_staging_peak_bytes"].get<double>() == 101 * kBlock);
  // A GPU with 10 MB free cannot hold the 13.2 MB the prefetching design stages.
  cfg["policies"]["prefetch"] = {{"name", "layer_ahead"}, {"depth", 1}};
  cfg["hardware"]["devices"]["gpu"] = fast_gpu(0.010);
  json tight = simulate(cfg);
  REQUIRE(tight.contains("config_error"));
  CHECK(tight["config_error"].get<std::string>().find("staging buffers") != std::string::npos);
}
