#include <catch2/catch.hpp>

#include "hw_fixture.h"
#include "models/fpga_ku15p.h"
#include "models/thermal.h"

using namespace kvtier;
using Catch::Matchers::Contains;

TEST_CASE("SmartSSD NAND follows the measured SSD-to-FPGA size curve", "[smartssd]") {
  auto s = test::make_device("smartssd", json::object());
  CHECK(s->capacity_bytes() == Approx(3.84e12));
  CHECK(s->read_Bps() == Approx(2.36e9));
  CHECK(s->read_Bps() * s->read_efficiency(4096, 1) == Approx(0.05e9));
  CHECK(s->read_Bps() * s->read_efficiency(65536, 1) == Approx(0.87e9));
  CHECK(s->read_Bps() * s->read_efficiency(1 << 20, 1) == Approx(1.59e9));
  CHECK(s->read_Bps() * s->read_efficiency(128 << 20, 1) == Approx(2.36e9));
  // Between 4 KB and 64 KB, halfway in log size (16 KB): (0.05 + 0.87) / 2.
  CHECK(s->read_Bps() * s->read_efficiency(16384, 1) == Approx(0.46e9));
  CHECK(s->write_Bps() == Approx(1.04e9));
  CHECK(s->rated_endurance_bytes() == Approx(5466e12));
}

TEST_CASE("KU15P reference kernels reproduce HillInfer's utilisation", "[fpga]") {
  ScoringKernel qk;  // qk_dot, 128 INT8 lanes, 350 MHz
  FpgaUtilization u = estimate_utilization(qk);
  CHECK(u.lut == Approx(0.42));
  CHECK(u.dsp == Approx(0.35));
  ScoringKernel full{ScoringKernelKind::FullAttention, 128, 8, 200};
  FpgaUtilization f = estimate_utilization(full);
  CHECK(f.lut == Approx(0.89));
  CHECK(f.dsp == Approx(0.78));
  CHECK_NOTHROW(check_kernel_fits(qk, 1.0, "x"));
  CHECK_NOTHROW(check_kernel_fits(full, 1.0, "x"));
  // Twice the lanes: shell 10% + 2 x 32% = 74% LUT; fits. Four times: 138%.
  ScoringKernel wide = qk;
  wide.lanes = 256;
  CHECK(estimate_utilization(wide).lut == Approx(0.74));
  wide.lanes = 512;
  CHECK_THROWS_WITH(check_kernel_fits(wide, 1.0, "hw.devices.fpga"), Contains("hw.devices.fpga.lanes") && Contains("LUT"));
  // INT4 halves the datapath: 512 INT4 lanes cost what 256 INT8 lanes do.
  wide.bits = 4;
  CHECK(estimate_utilization(wide).lut == Approx(0.74));
}

TEST_CASE("KU15P scoring throughput is clock x lanes x precision", "[fpga]") {
  auto f = test::make_device("ku15p", json::object());
  CHECK(f->scoring_Bps(8) == Approx(350e6 * 128));
  CHECK(f->scoring_Bps(4) == Approx(350e6 * 64));
  CHECK(f->scoring_Bps(16) == Approx(350e6 * 256));
  CHECK(f->flops() == Approx(2 * 128 * 350e6));
  const ScoringKernel* k = fpga_kernel(*f);
  REQUIRE(k != nullptr);
  CHECK(fpga_scoring_Bps(*k, 300) == Approx(300e6 * 128));
  REQUIRE(fpga_thermal(*f) != nullptr);
  CHECK(fpga_thermal(*f)->throttle_C == 70);
}

TEST_CASE("An impossible FPGA kernel is a ConfigError naming the JSON path", "[fpga][hardware]") {
  json hw = test::one_tier_hw("nvme", {{"capacity_GB", 100}, {"read_GBps", 3}, {"write_GBps", 2}}, {{"pcie", "gen3x4"}});
  hw["devices"]["fpga"] = {{"kind", "ku15p"}, {"lanes", 1024}};
  hw["links"]["fpga_link"] = {{"ends", {"root", "fpga"}}, {"pcie", "gen3x4"}};
  CHECK_THAT(test::hardware_error(hw), Contains("hardware.devices.fpga.lanes") && Contains("KU15P"));
  // Full attention closed timing at 200 MHz, not 350.
  hw["devices"]["fpga"] = {{"kind", "ku15p"}, {"kernel", "full_attention"}};
  CHECK_THAT(test::hardware_error(hw), Contains("hardware.devices.fpga.clock_MHz") && Contains("200"));
  hw["devices"]["fpga"] = {{"kind", "ku15p"}, {"kernel", "full_attention"}, {"clock_MHz", 200}, {"throttle_clock_MHz", 180}};
  CHECK(test::hardware_error(hw) == "");
}

TEST_CASE("The SmartSSD's FPGA at 75 C runs at 300 MHz", "[fpga][thermal]") {
  ThermalParams p;  // 70 C threshold, 350 -> 300 MHz
  ThermalModel m(p, 75.0);
  CHECK(m.throttled());
  CHECK(m.clock_MHz() == 300);
  CHECK(m.clock_at_MHz(75) == 300);
  CHECK(m.clock_at_MHz(65) == 350);
  ThermalModel cool(p, 50.0);
  CHECK(cool.clock_MHz() == 350);
}

TEST_CASE("Temperature rises toward a steady state set by ambient and cooling", "[thermal]") {
  ThermalParams p;
  // 25 C ambient, full load: 25 + 2.8 C/W x 14 W = 64.2 C: never throttles.
  ThermalModel m(p, 25.0);
  CHECK(m.steady_state_C(1.0) == Approx(64.2));
  CHECK(m.time_to_throttle_s(1.0) == std::numeric_limits<double>::infinity());
  m.advance(60, 1.0);  // one time constant: 1 - 1/e of the way
  CHECK(m.temperature_C() == Approx(64.2 - 39.2 / std::exp(1.0)));
  m.advance(3600, 1.0);
  CHECK(m.temperature_C() == Approx(64.2).margin(1e-6));
  CHECK(m.clock_MHz() == 350);

  // 35 C ambient: steady state 74.2 C; it crosses 70 C after 60 ln(39.2/4.2) s.
  p.ambient_C = 35;
  ThermalModel hot(p, 35.0);
  double t70 = 60 * std::log(39.2 / 4.2);
  CHECK(hot.time_to_throttle_s(1.0) == Approx(t70));
  hot.advance(t70 - 1, 1.0);
  CHECK(hot.clock_MHz() == 350);
  hot.advance(2, 1.0);
  CHECK(hot.clock_MHz() == 300);
  // Throttled power 6 + 8 x 300/350 W: steady at 35 + 2.8 x 12.857 = 71.0 C, above
  // the 65 C release point: it stays throttled under load...
  hot.advance(3600, 1.0);
  CHECK(hot.temperature_C() == Approx(35 + 2.8 * (6 + 8 * 300.0 / 350)).margin(1e-6));
  CHECK(hot.clock_MHz() == 300);
  // ...and recovers once idle (steady 51.8 C < 65 C).
  hot.advance(3600, 0.0);
  CHECK(hot.clock_MHz() == 350);
  CHECK(hot.temperature_C() == Approx(35 + 2.8 * 6).margin(1e-6));
}

TEST_CASE("Thresholds are configurable", "[thermal][fpga]") {
  auto f = test::make_device("ku15p", {{"throttle_C", 80}, {"throttle_clock_MHz", 250}});
  ThermalModel m(*fpga_thermal(*f), 75.0);
  CHECK(m.clock_MHz() == 350);
  ThermalModel h(*fpga_thermal(*f), 85.0);
  CHECK(h.clock_MHz() == 250);
  CHECK_THROWS_WITH(test::make_device("ku15p", {{"throttle_clock_MHz", 400}}), Contains("throttle_clock_MHz"));
}

TEST_CASE("The SmartSSD's FPGA carries 4 GB of DDR4 read at one DDR4-2400 channel's 19.2 GB/s", "[fpga][fpga_memory]") {
  auto f = test::make_device("ku15p", json::object());
  const FpgaMemory* m = fpga_memory(*f);
  REQUIRE(m != nullptr);
  CHECK(m->bytes == Approx(4e9));
  CHECK(m->Bps == Approx(2400e6 * 8));
  // Reading 1 GB of keys from it takes 1 GB / 19.2 GB/s.
  CHECK(m->read_s(1e9) == Approx(1e9 / 19.2e9));
  auto g = test::make_device("ku15p", {{"dram_GB", 0}, {"dram_GBps", 25.6}});
  CHECK(fpga_memory(*g)->bytes == 0);
  CHECK(fpga_memory(*g)->read_s(1e9) == Approx(1e9 / 25.6e9));
  // Only the FPGA kind has one.
  auto s = test::make_device("smartssd", json::object());
  CHECK(fpga_memory(*s) == nullptr);
}

TEST_CASE("Bad FPGA memory parameters are ConfigErrors naming the JSON path", "[fpga][fpga_memory][hardware]") {
  json hw = test::one_tier_hw("nvme", {{"capacity_GB", 100}, {"read_GBps", 3}, {"write_GBps", 2}}, {{"pcie", "gen3x4"}});
  hw["devices"]["fpga"] = {{"kind", "ku15p"}, {"dram_GB", -1}};
  hw["links"]["fpga_link"] = {{"ends", {"root", "fpga"}}, {"pcie", "gen3x4"}};
  CHECK_THAT(test::hardware_error(hw), Contains("hardware.devices.fpga.dram_GB"));
  hw["devices"]["fpga"] = {{"kind", "ku15p"}, {"dram_GBps", 0}};
  CHECK_THAT(test::hardware_error(hw), Contains("hardware.devices.fpga.dram_GBps"));
}
