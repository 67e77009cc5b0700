// Where HillInfer's quantized key copy lives, end to end: on the SmartSSD's
// NAND (the FPGA reads each block's key slice at that slice's request size)
// or in the FPGA's DDR4 as far as it fits (read there at its bandwidth, the
// rest from NAND).
#include <catch2/catch.hpp>
#include <cmath>

#include "models/topology.h"
#include "sim/platform/platform.h"
#include "sim/platform/streams.h"
#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// HillInfer's preset at batch 1, 8K context, 12 steps: the SmartSSD holds the
// prompt's older 80% (about 0.86 GB of INT8 keys), which fits the 4 GB DDR4.
json hillinfer_batch1() {
  json cfg = load_json_file("configs/systems/hillinfer.json");
  cfg.erase("note");
  cfg["hardware"] = load_json_file("configs/hardware/rtx4090_ddr4_smartssd.json");
  cfg["model"] = load_json_file("configs/models/opt-6.7b.json");
  cfg["workload"] = {{"batch", 1}, {"context_tokens", 8192}, {"decode_steps", 12}, {"block_tokens", 128},
                     {"prefill", "compute"}, {"trace", {{"kind", "synthetic"}, {"heavy_fraction", 0.15}}}};
  return cfg;
}

double num(const json& j, const char* k) { return j.at(k).get<double>(); }

// Bytes the SmartSSD's internal link to its FPGA carried (0 where it carried nothing).
double nand_to_fpga_bytes(const json& m) {
  const char* name = "smartssd_fpga:smartssd_switch->fpga";
  return m["links"].contains(name) ? m["links"][name]["bytes"].get<double>() : 0.0;
}

// The SmartSSD's measured read curve at `bytes` (models/smartssd.cpp), in
// log size between its points: 64 KiB 0.87, 1 MiB 1.59, 128 MiB 2.36 GB/s.
double curve_GBps(double bytes) {
  const double l = std::log2(bytes);
  if (l <= 20) return 0.87 + (l - 16) / 4 * (1.59 - 0.87);
  return 1.59 + (l - 20) / 7 * (2.36 - 1.59);
}

}  // namespace

TEST_CASE("key copy in FPGA DRAM: scoring reads no key from NAND and takes key bytes / the DDR4's bandwidth",
          "[key_copy]") {
  json cfg = hillinfer_batch1();
  cfg["policies"]["evaluation"]["key_copy"] = "fpga_dram";
  json m = simulate(cfg);
  REQUIRE(m.contains("app"));
  const json& a = m["app"];
  CHECK(a["key_copy"] == "fpga_dram");
  const double scored = num(a, "key_bytes_scored_fpga");
  REQUIRE(scored > 0);
  CHECK(num(a, "key_bytes_read_nand") == 0);
  CHECK(num(a, "key_bytes_read_fpga_memory") == Approx(scored));
  CHECK(nand_to_fpga_bytes(m) == 0);
  // 128 INT8 lanes at 350 MHz score 44.8 GB/s; the DDR4 gives 19.2: memory-bound.
  CHECK(num(a, "fpga_busy_s") == Approx(scored / 19.2e9).epsilon(1e-6));
  CHECK(num(a, "f_s_GBps") == Approx(19.2));
  // The copy is the INT8 key slice (1/4) of every block the SmartSSD holds,
  // written with the blocks (prefill output here) and charged to the 4 GB.
  const double ssd_keys = m["tiers"]["smartssd"]["peak_bytes"].get<double>() / 4;
  CHECK(num(a, "key_copy_peak_bytes") == Approx(ssd_keys));
  CHECK(num(a, "key_copy_bytes_written") == Approx(m["ssd_bytes_written"].get<double>() / 4));
  CHECK(num(a, "key_copy_min_fit") == 1.0);
  CHECK(num(a, "fpga_memory_bytes") == Approx(4e9));

  // A DDR4 faster than the kernel leaves the kernel's own rate.
  cfg["hardware"]["devices"]["fpga"]["dram_GBps"] = 100;
  json f = simulate(cfg);
  REQUIRE(f.contains("app"));
  CHECK(num(f["app"], "fpga_busy_s") == Approx(num(f["app"], "key_bytes_scored_fpga") / 44.8e9).epsilon(1e-6));

  // And either is faster than streaming the keys off NAND.
  json n = simulate(hillinfer_batch1());
  REQUIRE(n.contains("app"));
  CHECK(num(n["app"], "fpga_busy_s") > 5 * num(a, "fpga_busy_s"));
  CHECK(m["decode_tokens_per_s"].get<double>() > n["decode_tokens_per_s"].get<double>());
}

TEST_CASE("key copy in FPGA DRAM: what does not fit the capacity is read from NAND, the same share of every layer",
          "[key_copy]") {
  json cfg = hillinfer_batch1();
  cfg["policies"]["evaluation"]["key_copy"] = "fpga_dram";
  cfg["hardware"]["devices"]["fpga"]["dram_GB"] = 0.3;
  json m = simulate(cfg);
  REQUIRE(m.contains("app"));
  const json& a = m["app"];
  const double ssd_keys = m["tiers"]["smartssd"]["peak_bytes"].get<double>() / 4;
  REQUIRE(ssd_keys > 0.3e9);
  const double fit = 0.3e9 / ssd_keys;
  CHECK(num(a, "key_copy_min_fit") == Approx(fit));
  CHECK(num(a, "key_copy_peak_bytes") == Approx(0.3e9));
  const double scored = num(a, "key_bytes_scored_fpga");
  CHECK(num(a, "key_bytes_read_fpga_memory") == Approx(fit * scored));
  CHECK(num(a, "key_bytes_read_nand") == Approx((1 - fit) * scored));
  CHECK(nand_to_fpga_bytes(m) == Approx((1 - fit) * scored));
  // Only the keys that fit were written into it.
  CHECK(num(a, "key_copy_bytes_written") == Approx(fit * m["ssd_bytes_written"].get<double>() / 4));
}

TEST_CASE("key copy on NAND: the FPGA reads each block's key slice at that slice's request size", "[key_copy]") {
  // Block 2 MiB (128 tokens x 16 KiB); INT8 keys 512 KiB, INT4 256 KiB.
  for (int bits : {8, 4}) {
    json cfg = hillinfer_batch1();
    cfg["policies"]["evaluation"]["score_bits"] = bits;
    cfg["hardware"]["devices"]["fpga"]["score_bits"] = bits;
    json m = simulate(cfg);
    REQUIRE(m.contains("app"));
    const json& a = m["app"];
    const double slice = 2.0 * 1048576 / 2 * bits / 16;
    CHECK(num(a, "f_s_GBps") == Approx(curve_GBps(slice)));
    CHECK(num(a, "key_bytes_read_nand") == Approx(num(a, "key_bytes_scored_fpga")));
    CHECK(nand_to_fpga_bytes(m) == Approx(num(a, "key_bytes_scored_fpga")));
    CHECK_FALSE(a.contains("key_copy_peak_bytes"));
  }
}

TEST_CASE("a transfer issued at its own request size runs at the device's efficiency for that size", "[key_copy]") {
  // 8 MiB from the SmartSSD's NAND, the platform's requests one 2 MiB block:
  // as 512 KiB requests it reads at the curve's 1.41 GB/s, as blocks at 1.70.
  const double S = 8.0 * 1048576;
  json hw = {{"devices",
              {{"gpu", fast_gpu(1)},
               {"dev", {{"kind", "smartssd"}}}}},
             {"links", {{"link", {{"ends", {"dev", "gpu"}}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}}}},
             {"tiers", {"dev"}}};
  for (double req : {512.0 * 1024, 0.0}) {
    const double time = finish_times(hw, {Transfer{"dev", "gpu", S, {}, req}}, 2.0 * 1048576)[0];
    REQUIRE(time > 0);
    const double gbps = curve_GBps(req > 0 ? req : 2.0 * 1048576);
    // The curve's per-request latency is in its efficiency; the media latency is not added.
    CHECK(rel_err(time, S / (gbps * 1e9)) < 1e-6);
  }
}

TEST_CASE("key copy configuration errors name the JSON path", "[key_copy]") {
  json cfg = hillinfer_batch1();
  cfg["policies"]["evaluation"]["key_copy"] = "fpga_dram";
  cfg["hardware"]["devices"]["fpga"]["dram_GB"] = 0;
  json m = simulate(cfg);
  REQUIRE(m.contains("config_error"));
  const std::string e = m["config_error"].get<std::string>();
  CHECK_THAT(e, Catch::Matchers::Contains("policies.evaluation.key_copy") && Catch::Matchers::Contains("dram_GB"));
  CHECK(e.find('\n') == std::string::npos);
  cfg["policies"]["evaluation"]["key_copy"] = "ddr";
  json b = simulate(cfg);
  REQUIRE(b.contains("config_error"));
  CHECK_THAT(b["config_error"].get<std::string>(), Catch::Matchers::Contains("policies.evaluation.key_copy"));
}
