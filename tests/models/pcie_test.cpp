#include <catch2/catch.hpp>

#include "hw_fixture.h"
#include "models/pcie.h"

using namespace kvtier;
using Catch::Matchers::Contains;

TEST_CASE("PCIe link rates match the datasheet per-direction figures", "[pcie]") {
  // systems.md: Gen3 x4 3.94 GB/s; Gen4 x4 7.88; Gen4 x16 31.5; Gen5 x4 15.75; Gen5 x16 63.
  CHECK(pcie_link_Bps(3, 4) == Approx(3.938e9).epsilon(1e-3));
  CHECK(pcie_link_Bps(4, 4) == Approx(7.877e9).epsilon(1e-3));
  CHECK(pcie_link_Bps(4, 16) == Approx(31.51e9).epsilon(1e-3));
  CHECK(pcie_link_Bps(5, 4) == Approx(15.75e9).epsilon(1e-3));
  CHECK(pcie_link_Bps(5, 16) == Approx(63.02e9).epsilon(1e-3));
  // Gen2 uses 8b/10b: 5 GT/s x 8 lanes / 8 x 0.8 = 4 GB/s.
  CHECK(pcie_link_Bps(2, 8) == Approx(4e9));
  CHECK(pcie_raw_Bps(4, 16) == Approx(32e9));
}

TEST_CASE("PCIe effective rate subtracts TLP overhead at the stated payload", "[pcie]") {
  PcieConfig c;  // gen4 x16, 256 B payload, 24 B overhead
  CHECK(pcie_effective_Bps(c) == Approx(16e9 * 16 / 8 * 128.0 / 130.0 * 256.0 / 280.0));
  c.max_payload_B = 128;
  CHECK(pcie_effective_Bps(c) == Approx(pcie_link_Bps(4, 16) * 128.0 / 152.0));
}

TEST_CASE("PCIe specs parse and bad ones are refused with the path", "[pcie]") {
  PcieConfig c = parse_pcie_spec("gen4x16", "p");
  CHECK(c.gen == 4);
  CHECK(c.lanes == 16);
  c = parse_pcie_spec("Gen5 x8", "p");
  CHECK(c.gen == 5);
  CHECK(c.lanes == 8);
  CHECK_THROWS_WITH(parse_pcie_spec("gen7x16", "hardware.links.l.pcie"), Contains("hardware.links.l.pcie") && Contains("generation 7"));
  CHECK_THROWS_WITH(parse_pcie_spec("gen4x3", "w"), Contains("x3"));
  CHECK_THROWS_WITH(parse_pcie_spec("pcie4", "w"), Contains("gen4x16"));
  CHECK_THROWS_WITH(parse_pcie_spec("gen4x16x", "w"), Contains("not a PCIe link"));
}

TEST_CASE("Links take exactly one of bandwidth_GBps and pcie", "[pcie][hardware]") {
  json nv = {{"capacity_GB", 100}, {"read_GBps", 7}, {"write_GBps", 6}};
  json hw = test::one_tier_hw("nvme", nv, {{"pcie", "gen4x4"}});
  Hardware h = parse_hardware(hw, "hardware");
  const LinkEntry& up = h.links[1];
  REQUIRE(up.name == "up");
  CHECK(up.pcie == "gen4x4");
  CHECK(up.bw_Bps == Approx(pcie_link_Bps(4, 4) * 256.0 / 280.0));
  CHECK(up.bw_back_Bps == up.bw_Bps);  // split duplex: the same rate each way

  json by_fields = test::one_tier_hw("nvme", nv, {{"pcie_gen", 3}, {"pcie_lanes", 4}});
  CHECK(parse_hardware(by_fields, "hardware").links[1].bw_Bps == Approx(pcie_link_Bps(3, 4) * 256.0 / 280.0));

  CHECK_THAT(test::hardware_error(test::one_tier_hw("nvme", nv, {{"pcie", "gen4x4"}, {"bandwidth_GBps", 7}})),
             Contains("hardware.links.up") && Contains("exactly one"));
  CHECK_THAT(test::hardware_error(test::one_tier_hw("nvme", nv, json::object())),
             Contains("hardware.links.up.bandwidth_GBps") && Contains("no rate"));
  CHECK_THAT(test::hardware_error(test::one_tier_hw("nvme", nv, {{"pcie_gen", 4}})), Contains("go together"));
  CHECK_THAT(test::hardware_error(test::one_tier_hw("nvme", nv, {{"pcie", "gen9x4"}})),
             Contains("hardware.links.up.pcie"));
  CHECK_THAT(test::hardware_error(test::one_tier_hw("nvme", nv, {{"bandwidth_GBps", -3}})),
             Contains("hardware.links.up.bandwidth_GBps") && Contains("out of range"));
}
