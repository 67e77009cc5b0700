// Near-storage exact attention (evaluation "near_storage"): the SmartSSD's
// FPGA attends the drive's blocks in place; only the query and the partial
// output cross PCIe.
#include <catch2/catch.hpp>

#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// configs/systems/near_storage_attention.json at batch 1, 2K context, 6
// steps: the drive holds 17 blocks of 2 MiB per layer (16 of the prompt and
// the one the new tokens go to), 1.14 GB over 32 layers, which fits the
// FPGA's 4 GB.
json near_storage(int batch = 1, int context = 2048) {
  json cfg = load_json_file("configs/systems/near_storage_attention.json");
  cfg.erase("note");
  json hw = load_json_file("configs/hardware/rtx4090_ddr4_smartssd.json");
  hw["tiers"] = cfg["hardware"]["tiers"];
  cfg["hardware"] = hw;
  cfg["model"] = load_json_file("configs/models/opt-6.7b.json");
  cfg["workload"] = {{"batch", batch}, {"context_tokens", context}, {"decode_steps", 6}, {"block_tokens", 128},
                     {"prefill", "compute"}, {"trace", {{"kind", "synthetic"}, {"heavy_fraction", 0.15}}}};
  return cfg;
}

double link_bytes(const json& m, const char* name) {
  return m["links"].contains(name) ? m["links"][name]["bytes"].get<double>() : 0.0;
}

constexpr double kLayers = 32, kHeads = 32, kHeadDim = 128, kOptBlock = 2.0 * 1048576;

}  // namespace

TEST_CASE("near-storage attention: exact, the drive's KV read on the FPGA, only query and output cross PCIe",
          "[near_storage]") {
  const int batch = 2, steps = 6;
  json m = simulate(near_storage(batch));
  REQUIRE(m.contains("near_storage"));
  const json& a = m["near_storage"];
  CHECK(m["attention_recall"].get<double>() == 1.0);
  const double layer_steps = kLayers * steps;
  CHECK(a["attended_layers"].get<double>() == layer_steps);
  // Every step attends the 17 blocks of each sequence at each layer, all on the drive.
  const double kv = layer_steps * batch * 17 * kOptBlock;
  CHECK(a["kv_bytes_attended"].get<double>() == Approx(kv));
  CHECK(a["kv_bytes_read_nand"].get<double>() == Approx(kv));
  CHECK(link_bytes(m, "smartssd.read") == Approx(kv));
  // 64 FP16 lanes at 200 MHz: 25.6 GB/s of K and V.
  CHECK(a["fpga_attention_GBps"].get<double>() == Approx(25.6));
  CHECK(a["fpga_busy_s"].get<double>() == Approx(kv / 25.6e9).epsilon(1e-6));
  // Up the host link: the partial outputs only (FP16 per head_dim and an
  // FP32 max and sum per head); down it: the queries and the KV written.
  const double out = layer_steps * batch * kHeads * (2 * kHeadDim + 8), q = layer_steps * batch * kHeads * 2 * kHeadDim;
  CHECK(link_bytes(m, "pcie_smartssd:smartssd_switch->root") == Approx(out));
  CHECK(link_bytes(m, "pcie_smartssd:root->smartssd_switch") == Approx(q + m["ssd_bytes_written"].get<double>()));
  CHECK(a["pcie_bytes"].get<double>() == Approx(q + out));
}

TEST_CASE("near-storage attention with the KV in the FPGA's DDR4 reads no NAND and runs at its bandwidth",
          "[near_storage]") {
  json cfg = near_storage();
  cfg["policies"]["evaluation"]["kv_copy"] = "fpga_dram";
  json m = simulate(cfg);
  REQUIRE(m.contains("near_storage"));
  const json& a = m["near_storage"];
  const double kv = a["kv_bytes_attended"].get<double>();
  CHECK(kv == Approx(kLayers * 6 * 17 * kOptBlock));
  CHECK(a["kv_bytes_read_nand"].get<double>() == 0);
  CHECK(a["kv_bytes_read_fpga_memory"].get<double>() == Approx(kv));
  CHECK(a["kv_copy_min_fit"].get<double>() == 1.0);
  CHECK(link_bytes(m, "smartssd.read") == 0);
  // 19.2 GB/s of DDR4 is below the kernel's 25.6: memory-bound.
  CHECK(a["fpga_busy_s"].get<double>() == Approx(kv / 19.2e9).epsilon(1e-6));
  json n = simulate(near_storage());
  REQUIRE(n.contains("near_storage"));
  CHECK(m["decode_tokens_per_s"].get<double>() > 2 * n["decode_tokens_per_s"].get<double>());
}

TEST_CASE("near-storage attention refuses what it cannot run, naming the JSON path", "[near_storage]") {
  auto error = [](json cfg) {
    json m = simulate(std::move(cfg));
    REQUIRE(m.contains("config_error"));
    const std::string e = m["config_error"].get<std::string>();
    CHECK(e.find('\n') == std::string::npos);
    return e;
  };
  json ahead = near_storage();
  ahead["policies"]["prefetch"] = {{"name", "layer_ahead"}, {"depth", 1}};
  CHECK_THAT(error(ahead), Catch::Matchers::Contains("policies.prefetch"));
  json wide = near_storage();
  wide["policies"]["evaluation"]["lanes"] = 128;  // 128 FP16 lanes: twice HillInfer's full-attention design
  CHECK_THAT(error(wide), Catch::Matchers::Contains("policies.evaluation.lanes") && Catch::Matchers::Contains("KU15P"));
  json fast = near_storage();
  fast["policies"]["evaluation"]["clock_MHz"] = 350;  // the scoring kernel's clock, above full attention's 200
  CHECK_THAT(error(fast), Catch::Matchers::Contains("policies.evaluation.clock_MHz"));
  json no_drive = near_storage();
  no_drive["hardware"]["tiers"] = {"dram"};
  CHECK_THAT(error(no_drive), Catch::Matchers::Contains("hardware.tiers"));
  json bad = near_storage();
  bad["policies"]["evaluation"]["kv_copy"] = "hbm";
  CHECK_THAT(error(bad), Catch::Matchers::Contains("policies.evaluation.kv_copy"));
}
