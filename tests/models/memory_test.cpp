#include <catch2/catch.hpp>

#include "hw_fixture.h"

using namespace kvtier;
using Catch::Matchers::Contains;

TEST_CASE("DRAM bandwidth from channels x MT/s x 8 bytes", "[dram]") {
  // DDR4-3200: 25.6 GB/s per channel; 8 channels = 204.8 GB/s; 80% sustained.
  auto d = test::make_device("dram", {{"capacity_GB", 256}, {"channels", 8}, {"MTps", 3200}, {"efficiency", 0.8}});
  CHECK(d->read_Bps() == Approx(204.8e9 * 0.8));
  CHECK(d->write_Bps() == d->read_Bps());
  CHECK(d->media_shared());
  CHECK(d->capacity_bytes() == Approx(256e9));
  // The old form still works: the engine's configs give bandwidth_GBps.
  auto old = test::make_device("dram", {{"capacity_GB", 64}, {"bandwidth_GBps", 50}});
  CHECK(old->read_Bps() == Approx(50e9));
  CHECK(old->read_efficiency(4096, 1) == 1.0);
}

TEST_CASE("DRAM needs exactly one form of bandwidth", "[dram]") {
  CHECK_THROWS_WITH(test::make_device("dram", {{"capacity_GB", 64}}), Contains("bandwidth_GBps"));
  CHECK_THROWS_WITH(test::make_device("dram", {{"capacity_GB", 64}, {"bandwidth_GBps", 50}, {"channels", 2}, {"MTps", 4800}}),
                    Contains("not both"));
}

TEST_CASE("HBM and GDDR derive bandwidth from their organisation", "[hbm][gddr]") {
  auto h = test::make_device("hbm", {{"capacity_GB", 80}, {"stacks", 5}, {"stack_GBps", 670}});
  CHECK(h->read_Bps() == Approx(3350e9));
  CHECK(h->role() == DeviceRole::Memory);
  // RTX 4090: 384-bit GDDR6X at 21 Gb/s per pin = 1008 GB/s.
  auto g = test::make_device("gddr", {{"capacity_GB", 24}, {"bus_bits", 384}, {"Gbps_per_pin", 21}});
  CHECK(g->read_Bps() == Approx(1008e9));
  CHECK_THROWS_WITH(test::make_device("gddr", {{"capacity_GB", 24}}), Contains("bandwidth_GBps"));
}

TEST_CASE("CXL memory: bandwidth and latency over local DRAM", "[cxl]") {
  auto c = test::make_device("cxl", {{"capacity_GB", 256}, {"read_GBps", 36}, {"dram_latency_us", 0.1},
                                     {"added_latency_us", 0.17}});
  CHECK(c->read_Bps() == Approx(36e9));
  CHECK(c->write_Bps() == Approx(36e9));
  CHECK(c->media_latency_s() == Approx(0.27e-6));
  auto split = test::make_device("cxl", {{"capacity_GB", 256}, {"read_GBps", 36}, {"write_GBps", 20}, {"shared_bus", false}});
  CHECK(split->write_Bps() == Approx(20e9));
  CHECK_FALSE(split->media_shared());
}

TEST_CASE("A negative bandwidth is a ConfigError naming the JSON path", "[dram][hardware]") {
  json hw = test::one_tier_hw("dram", {{"capacity_GB", 64}, {"bandwidth_GBps", -25.6}}, {{"pcie", "gen4x16"}});
  CHECK_THAT(test::hardware_error(hw), Contains("hardware.devices.dev.bandwidth_GBps") && Contains("out of range"));
  json hw2 = test::one_tier_hw("cxl", {{"capacity_GB", 64}, {"read_GBps", -1}}, {{"pcie", "gen5x8"}});
  CHECK_THAT(test::hardware_error(hw2), Contains("hardware.devices.dev.read_GBps"));
  json hw3 = test::one_tier_hw("dram", {{"capacity_GB", 64}}, {{"pcie", "gen4x16"}});
  CHECK_THAT(test::hardware_error(hw3), Contains("hardware.devices.dev.bandwidth_GBps"));
}
