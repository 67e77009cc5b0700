// Every hardware preset parses, validates, and says where each number comes from.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "hw_fixture.h"
#include "models/fpga_ku15p.h"
#include "models/pcie.h"
#include "models/thermal.h"
#include "models/topology.h"

using namespace kvtier;
namespace fs = std::filesystem;

namespace {
json load(const std::string& rel) {
  std::ifstream f(std::string(KVTIER_SOURCE_DIR) + "/" + rel);
  REQUIRE(f.good());
  return json::parse(f);
}
Hardware parse_preset(const std::string& name, json* raw = nullptr) {
  json j = load("configs/hardware/" + name + ".json");
  if (raw) *raw = j;
  return parse_hardware(j, "hardware");
}
}  // namespace

TEST_CASE("Every hardware preset parses and every device and link carries a source", "[presets]") {
  fs::path dir = fs::path(KVTIER_SOURCE_DIR) / "configs" / "hardware";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    ++n;
    CAPTURE(e.path().string());
    std::ifstream f(e.path());
    json raw = json::parse(f);
    json hw = raw;
    Hardware h;
    REQUIRE_NOTHROW(h = parse_hardware(hw, "hardware"));
    CHECK(h.devices.size() >= 3);
    Topology t(h);
    for (size_t i = 0; i < h.tiers.size(); ++i) CHECK_NOTHROW(t.route(h.device_index(h.tiers[i]), h.device_index(h.gpu)));
    for (const auto& [name, d] : raw["devices"].items()) {
      CAPTURE(name);
      CHECK(d.contains("source"));
    }
    for (const auto& [name, l] : raw["links"].items()) {
      CAPTURE(name);
      CHECK(l.contains("source"));
    }
  }
  CHECK(n >= 7);
}

TEST_CASE("Calibration files in configs/hardware/calibration name a source", "[presets][calibration]") {
  for (const auto& e : fs::directory_iterator(fs::path(KVTIER_SOURCE_DIR) / "configs" / "hardware" / "calibration")) {
    CAPTURE(e.path().string());
    std::ifstream f(e.path());
    CHECK(json::parse(f).contains("source"));
  }
}

TEST_CASE("RTX 4090 + 990 PRO: a 4 KB QD1 read is latency-bound", "[presets][nvme]") {
  Hardware h = parse_preset("rtx4090_dram_nvme");
  const DeviceModel& ssd = *h.device("ssd").model;
  double qd1 = ssd.read_Bps() * ssd.read_efficiency(4096, 1);
  CHECK(qd1 == Approx(4096.0 / (45e-6 + 4096.0 / 7.45e9)));
  CHECK(qd1 < 0.1e9);
  CHECK(ssd.read_efficiency(1 << 20, 32) == Approx(1.0));
  CHECK(ssd.rated_endurance_bytes() == Approx(1200e12));
}

TEST_CASE("HillInfer testbed: SmartSSD on Gen3 x4, P2P stays off the host link, FPGA throttles", "[presets][smartssd]") {
  Hardware h = parse_preset("rtx4090_ddr4_smartssd");
  Topology t(h);
  size_t nand = h.device_index("smartssd"), fpga = h.device_index("fpga"), gpu = h.device_index("gpu");
  for (const Hop& hop : t.route(nand, fpga)) CHECK(h.links[hop.link].name != "pcie_smartssd");
  PcieConfig g3x4{3, 4};
  CHECK(route_bandwidth_Bps(h, t.route(nand, gpu)) == Approx(pcie_effective_Bps(g3x4)));
  // Reading 4 KB requests from the NAND: 0.05 GB/s whatever the path.
  CHECK(read_path_Bps(h, t, nand, fpga, 4096, 1) == Approx(0.05e9));
  const DeviceModel& f = *h.device("fpga").model;
  ThermalModel m(*fpga_thermal(f), 75.0);
  CHECK(m.clock_MHz() == 300);
  CHECK(fpga_scoring_Bps(*fpga_kernel(f), m.clock_MHz()) == Approx(128 * 300e6));
  // 8 x DDR4-2933 x 8 B x 0.8.
  CHECK(h.device("dram").model->read_Bps() == Approx(8 * 2933e6 * 8 * 0.8));
}

TEST_CASE("H100 + 4 x 9100 PRO: the x16 upstream caps the RAID-0", "[presets][raid]") {
  Hardware h = parse_preset("h100_9100pro_raid0");
  Topology t(h);
  size_t raid = h.device_index("raid"), dram = h.device_index("dram");
  CHECK(h.device("raid").model->read_Bps() == Approx(4 * 14.8e9));
  PcieConfig g5x16{5, 16};
  double link = pcie_effective_Bps(g5x16);  // 57.6 GB/s < 59.2 GB/s
  CHECK(read_path_Bps(h, t, raid, dram, 8 << 20, 64) == Approx(std::min(4 * 14.8e9, link)));
  CHECK(read_path_Bps(h, t, raid, dram, 8 << 20, 64) == Approx(link));
}

TEST_CASE("H200 + CXL: CXL latency and the Gen5 x8 link", "[presets][cxl]") {
  Hardware h = parse_preset("h200_cxl_nvme");
  CHECK(h.device("cxl").model->media_latency_s() == Approx(0.28e-6));
  CHECK(h.device("gpu").model->memory_Bps() == Approx(4300.8e9));
  CHECK(h.tiers == std::vector<std::string>{"gpu", "cxl", "ssd"});
}

TEST_CASE("FlexGen's fitted constants arrive through the calibration file", "[presets][calibration]") {
  Hardware fitted = parse_preset("t4_flexgen_fitted");
  Hardware sheet = parse_preset("t4_flexgen");
  const LinkEntry& pf = fitted.links[static_cast<size_t>(std::find_if(fitted.links.begin(), fitted.links.end(),
                                                                       [](const LinkEntry& l) { return l.name == "pcie_gpu"; }) -
                                                          fitted.links.begin())];
  CHECK(pf.bw_Bps == Approx(12.89e9));      // CPU -> GPU
  CHECK(pf.bw_back_Bps == Approx(4.82e9));       // GPU -> CPU into pinned memory (hidden states)
  CHECK(pf.pageable_back_Bps == Approx(0.97e9));  // GPU -> CPU into pageable memory (cache)
  CHECK(fitted.device("ssd").model->read_Bps() == Approx(0.473e9));
  CHECK(fitted.device("ssd").model->write_Bps() == Approx(0.746e9));
  CHECK(sheet.device("ssd").model->read_Bps() == Approx(4 * 0.66e9));
  CHECK(fitted.device("gpu").model->flops() == Approx(21.24e12));
}
