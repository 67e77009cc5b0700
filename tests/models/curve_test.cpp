#include <catch2/catch.hpp>

#include "hw_fixture.h"
#include "models/calibration.h"
#include "models/curve.h"

using namespace kvtier;
using Catch::Matchers::Contains;

TEST_CASE("Curves interpolate linearly and hold their end values", "[curve]") {
  Curve c({{1000, 1.0}, {3000, 3.0}, {2000, 1.5}});  // unsorted on purpose
  CHECK(c(0) == 1.0);
  CHECK(c(1000) == 1.0);
  CHECK(c(1500) == Approx(1.25));
  CHECK(c(2500) == Approx(2.25));
  CHECK(c(1e9) == 3.0);
  CHECK(c.max_y() == 3.0);
  CHECK(c.min_y() == 1.0);
  CHECK(c.scaled(2)(2500) == Approx(4.5));
}

TEST_CASE("log_x curves interpolate in log size", "[curve]") {
  Curve c({{1024, 1.0}, {4096, 3.0}}, Curve::Interp::LogX);
  CHECK(c(2048) == Approx(2.0));  // halfway in log2
}

TEST_CASE("Curve JSON forms and errors", "[curve]") {
  Curve a = parse_curve(json::parse("[[1, 2], [3, 4]]"), "x");
  CHECK(a(2) == Approx(3));
  Curve b = parse_curve(json::parse(R"({"points": [[1024, 1], [4096, 3]], "interp": "log_x", "source": "s"})"), "x");
  CHECK(b(2048) == Approx(2));
  CHECK_THROWS_WITH(parse_curve(json::parse("[]"), "c"), Contains("c") && Contains("at least one"));
  CHECK_THROWS_WITH(parse_curve(json::parse("[[1, 2], [1, 3]]"), "c"), Contains("two points"));
  CHECK_THROWS_WITH(parse_curve(json::parse("[[1, -2]]"), "c"), Contains("c.points[0]") || Contains("c[0]"));
  CHECK_THROWS_WITH(parse_curve(json::parse(R"({"points": [[0, 1]], "interp": "log_x"})"), "c"), Contains("x > 0"));
  CHECK_THROWS_WITH(parse_curve(json::parse(R"({"pts": []})"), "c"), Contains("c.pts"));
}

TEST_CASE("Device curves replace constants and set the efficiency", "[curve][calibration]") {
  auto d = test::make_device("dram", {{"capacity_GB", 64}, {"bandwidth_GBps", 100},
                                      {"curves", {{"read_GBps", {{4096, 10}, {1048576, 80}}}}}});
  CHECK(d->read_Bps() == Approx(80e9));  // the calibrated peak
  CHECK(d->read_efficiency(4096, 1) == Approx(10.0 / 80.0));
  CHECK(d->read_efficiency(1 << 20, 1) == Approx(1.0));
  CHECK_THROWS_WITH(test::make_device("dram", {{"capacity_GB", 64}, {"bandwidth_GBps", 100},
                                               {"curves", {{"reed_GBps", {{1, 1}}}}}}),
                    Contains("curves.reed_GBps") && Contains("read_GBps"));
}

TEST_CASE("A calibration file's curves reach the devices and links it names", "[calibration]") {
  json nv = {{"capacity_GB", 100}, {"read_GBps", 7}, {"write_GBps", 6}};
  json hw = test::one_tier_hw("nvme", nv, {{"pcie", "gen4x4"}});
  json cal = json::parse(R"({"source": "test",
     "devices": {"dev": {"read_GBps": [[4096, 0.5], [1048576, 5.0]]}},
     "links": {"up": {"forward_GBps": [[4096, 1.0], [1048576, 6.0]], "latency_us": [[1, 2.0], [1048576, 4.0]]}}})");
  merge_calibration(hw, cal, "cal.json");
  Hardware h = parse_hardware(hw, "hardware");
  const DeviceModel& dev = *h.device("dev").model;
  CHECK(dev.read_Bps() == Approx(5e9));
  CHECK(dev.read_efficiency(4096, 32) == Approx(0.1));
  const LinkEntry& up = h.links[1];
  CHECK(up.bw_Bps == Approx(6e9));
  CHECK(up.bandwidth_at(true, 4096) == Approx(1e9));
  CHECK(up.bandwidth_factor(true, 4096) == Approx(1.0 / 6.0));
  CHECK(up.bandwidth_factor(false, 4096) == Approx(1.0 / 6.0));  // calibrated one way, symmetric link
  CHECK(up.latency_at(1) == Approx(2e-6));
  CHECK(up.latency_at(1 << 30) == Approx(4e-6));

  json bad = json::parse(R"({"devices": {"nope": {"read_GBps": [[1, 1]]}}})");
  CHECK_THROWS_WITH(merge_calibration(hw, bad, "cal.json"), Contains("cal.json.devices.nope"));
}

TEST_CASE("Hardware with a calibration path loads the file", "[calibration]") {
  json nv = {{"capacity_GB", 100}, {"read_GBps", 7}, {"write_GBps", 6}};
  json hw = test::one_tier_hw("nvme", nv, {{"pcie", "gen4x4"}});
  hw["calibration"] = "no/such/file.json";
  CHECK_THAT(test::hardware_error(hw), Contains("hardware.calibration") && Contains("no/such/file.json"));
}
