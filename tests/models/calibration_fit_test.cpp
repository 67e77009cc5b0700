// Fitting a calibration file to a kvtier_calibrate measurement
// (models/calibration_fit.h): synthetic measurements with a known latency and
// bandwidth come back out, and the result loads into a hardware preset.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "models/calibration.h"
#include "models/calibration_fit.h"
#include "models/hardware.h"

using namespace kvtier;
namespace fs = std::filesystem;

namespace {

constexpr double kKiB = 1024.0;

// A copy probe whose every repetition takes latency_us + bytes / (GBps * 1e3) us,
// times `slow(bytes)` (1 = ideal); three repetitions around the median.
template <class Slow>
json copy_probe(double latency_us, double GBps, Slow slow) {
  json p = {{"kind", "copy"}, {"samples", json::array()}};
  for (double s = 4 * kKiB; s <= 1024 * kKiB * kKiB; s *= 4) {
    const double t = (latency_us + s / (GBps * 1e3)) * slow(s);
    p["samples"].push_back({{"bytes", s}, {"times_us", {t * 1.3, t, t * 0.999}}});
  }
  return p;
}
json copy_probe(double latency_us, double GBps) {
  return copy_probe(latency_us, GBps, [](double) { return 1.0; });
}

// The kv_read kernel: launch_us + bytes / (GBps * 1e3) us, 4 KiB .. 4 GiB.
json kernel_probe(double launch_us, double GBps) {
  json p = {{"kind", "kernel"}, {"samples", json::array()}};
  for (double s = 4 * kKiB; s <= 4 * kKiB * kKiB * kKiB; s *= 4)
    p["samples"].push_back({{"bytes", s}, {"times_us", {launch_us + s / (GBps * 1e3)}}});
  return p;
}

json measurement(double latency_us = 9.5, double h2d_GBps = 24.0, double d2h_GBps = 26.5) {
  json m = {{"format", "kvtier-measurement"},
            {"version", 1},
            {"date", "2025-01-01T00:00:00Z"},
            {"host", "testhost"},
            {"device", {{"name", "Synthetic GPU"}, {"driver_version", 13000}, {"runtime_version", 13000}}},
            {"probes", json::object()}};
  m["probes"]["h2d_pinned"] = copy_probe(latency_us, h2d_GBps);
  m["probes"]["d2h_pinned"] = copy_probe(latency_us, d2h_GBps);
  m["probes"]["kv_read"] = kernel_probe(4.0, 900.0);
  return m;
}

FitOptions options() {
  FitOptions o;
  o.measurement_file = "synthetic.json";
  return o;
}

std::string fit_error(const json& m, FitOptions o = options()) {
  try {
    fit_calibration(m, o);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

json load_preset(const std::string& name) {
  std::ifstream f(std::string(KVTIER_SOURCE_DIR) + "/configs/hardware/" + name + ".json");
  REQUIRE(f.good());
  return json::parse(f);
}

}  // namespace

TEST_CASE("An ideal L + S/B measurement fits back to L and B within 1%", "[calibration_fit]") {
  const json cal = fit_calibration(measurement(9.5, 24.0, 26.5), options());
  const json& l = cal["links"]["pcie_gpu"];
  const Curve fwd = parse_curve(l["forward_GBps"], "forward"), back = parse_curve(l["backward_GBps"], "backward");
  const Curve lat = parse_curve(l["latency_us"], "latency");
  CHECK(fwd.interp() == Curve::Interp::LogX);
  for (double s : {4 * kKiB, 64 * kKiB, 3 * kKiB * kKiB, 1024 * kKiB * kKiB}) {
    CAPTURE(s);
    CHECK(lat(s) == Approx(9.5).epsilon(0.01));
    CHECK(fwd(s) == Approx(24.0).epsilon(0.01));    // host -> device: forward on [root, gpu]
    CHECK(back(s) == Approx(26.5).epsilon(0.01));
    // The engine's time L + S / B(S) is the measured time.
    CHECK(lat(s) + s / (fwd(s) * 1e3) == Approx(9.5 + s / 24e3).epsilon(0.01));
  }
  CHECK(cal["source"].get<std::string>().find("synthetic.json") != std::string::npos);
  CHECK(cal["source"].get<std::string>().find("Synthetic GPU") != std::string::npos);
  CHECK(cal["source"].get<std::string>().find("2025-01-01") != std::string::npos);
}

TEST_CASE("A non-ideal measurement: the fitted curves reproduce every measured time", "[calibration_fit]") {
  json m = measurement();
  // Small transfers 40% slower than L + S/B on top, fading out by 16 MiB.
  auto slow = [](double s) { return 1.0 + 0.4 * std::max(0.0, 1.0 - std::log(s / 4096.0) / std::log(4096.0)); };
  m["probes"]["h2d_pinned"] = copy_probe(12.0, 22.0, slow);
  std::vector<std::string> summary;
  const json cal = fit_calibration(m, options(), &summary);
  CHECK(summary.size() >= 2);
  const json& l = cal["links"]["pcie_gpu"];
  const Curve fwd = parse_curve(l["forward_GBps"], "f"), lat = parse_curve(l["latency_us"], "l");
  // The link's latency is the smaller direction's: 9.5 us from d2h.
  CHECK(lat(1.0) == Approx(9.5).epsilon(0.01));
  double peak = 0;
  for (const auto& p : measured_points(m, "h2d_pinned", "")) {
    CAPTURE(p.bytes);
    peak = std::max(peak, p.bytes / p.median_us * 1e-3);
    CHECK(lat(p.bytes) + p.bytes / (fwd(p.bytes) * 1e3) == Approx(p.median_us).epsilon(0.01));
  }
  CHECK(fwd.max_y() == Approx(peak));  // never faster than the best measured rate
}

TEST_CASE("attention_us is the kv_read kernel time, extrapolated linearly past the largest size", "[calibration_fit]") {
  const json cal = fit_calibration(measurement(), options());
  const Curve a = parse_curve(cal["devices"]["gpu"]["attention_us"], "a");
  const double G = kKiB * kKiB * kKiB;
  for (double s : {4 * kKiB, 1.0 * kKiB * kKiB, 1.0 * G, 4.0 * G, 16.0 * G, 100.0 * G}) {
    CAPTURE(s);
    CHECK(a(s) == Approx(4.0 + s / 900e3).epsilon(0.01));
  }
}

TEST_CASE("The fitted file merges into a hardware preset, which parses and uses it", "[calibration_fit][presets]") {
  json hw = load_preset("rtx4090_dram_nvme");
  FitOptions o = options();
  o.h2d_is_forward = link_h2d_is_forward(hw, "pcie_gpu", "gpu", "hardware");
  CHECK(o.h2d_is_forward);
  const json cal = fit_calibration(measurement(9.5, 24.0, 26.5), o);
  merge_calibration(hw, cal, "fitted.json");
  Hardware h = parse_hardware(hw, "hardware");
  const LinkEntry* link = nullptr;
  for (const auto& l : h.links)
    if (l.name == "pcie_gpu") link = &l;
  REQUIRE(link);
  CHECK(link->bandwidth_at(true, 1 << 30) == Approx(24e9).epsilon(0.01));
  CHECK(link->bandwidth_at(false, 1 << 30) == Approx(26.5e9).epsilon(0.01));
  CHECK(link->latency_at(4096) == Approx(9.5e-6).epsilon(0.01));
  const double kv = 256.0 * kKiB * kKiB;
  CHECK(h.device("gpu").model->attention_s(kv) == Approx((4.0 + kv / 900e3) * 1e-6).epsilon(0.01));
}

TEST_CASE("The same file loaded through \"calibration\" in a preset", "[calibration_fit][presets]") {
  const fs::path dir = fs::temp_directory_path() / ("kvtier_fit_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "fitted.json").string();
  write_json_file(file, fit_calibration(measurement(), options()));
  CHECK(read_json_file(file)["name"] == "measured_synthetic_gpu");
  CHECK_FALSE(fs::exists(file + ".tmp." + std::to_string(::getpid())));
  json hw = load_preset("rtx4090_dram_nvme");
  hw["calibration"] = file;
  Hardware h;
  REQUIRE_NOTHROW(h = parse_hardware(hw, "hardware"));
  fs::remove_all(dir);
}

TEST_CASE("The host link's direction comes from the link's ends", "[calibration_fit]") {
  json hw = load_preset("rtx4090_dram_nvme");
  CHECK(link_h2d_is_forward(hw, "pcie_gpu", "gpu", "hardware"));
  hw["links"]["pcie_gpu"]["ends"] = {"gpu", "root"};
  CHECK_FALSE(link_h2d_is_forward(hw, "pcie_gpu", "gpu", "hardware"));
  FitOptions o = options();
  o.h2d_is_forward = false;
  const json cal = fit_calibration(measurement(9.5, 24.0, 26.5), o);
  CHECK(parse_curve(cal["links"]["pcie_gpu"]["backward_GBps"], "b")(1 << 30) == Approx(24.0).epsilon(0.01));
  CHECK_THROWS_WITH(link_h2d_is_forward(hw, "pcie_ssd", "gpu", "hardware"),
                    Catch::Contains("hardware.links.pcie_ssd.ends") && Catch::Contains("does not include the GPU"));
  CHECK_THROWS_WITH(link_h2d_is_forward(hw, "nope", "gpu", "hardware"), Catch::Contains("no link named 'nope'"));
}

TEST_CASE("Bad measurements are one-line errors naming the file and the JSON path", "[calibration_fit]") {
  json m = measurement();
  m["probes"].erase("d2h_pinned");
  CHECK_THAT(fit_error(m), Catch::StartsWith("synthetic.json: probes.d2h_pinned: required probe is missing"));

  m = measurement();
  m["probes"]["kv_read"]["samples"][2]["times_us"][0] = -1;
  CHECK_THAT(fit_error(m), Catch::StartsWith("synthetic.json: probes.kv_read.samples[2].times_us[0]"));

  m = measurement();
  m["probes"]["h2d_pinned"]["samples"][1].erase("bytes");
  CHECK_THAT(fit_error(m), Catch::StartsWith("synthetic.json: probes.h2d_pinned.samples[1].bytes"));

  m = measurement();
  m["probes"]["h2d_pinned"]["samples"] = json::array();
  CHECK_THAT(fit_error(m), Catch::StartsWith("synthetic.json: probes.h2d_pinned.samples"));

  m = measurement();
  m.erase("format");
  CHECK_THAT(fit_error(m), Catch::StartsWith("synthetic.json: format"));

  m = measurement();
  m.erase("device");
  CHECK_THAT(fit_error(m), Catch::StartsWith("synthetic.json: device"));

  FitOptions none = options();
  none.gpu = "";
  none.link = "";
  CHECK_THAT(fit_error(measurement(), none), Catch::Contains("nothing to fit"));

  // Only what was asked for is required: a GPU-only fit needs no copy probes.
  m = measurement();
  m["probes"].erase("h2d_pinned");
  FitOptions gpu_only = options();
  gpu_only.link = "";
  CHECK(fit_error(m, gpu_only).empty());

  const std::string missing = "/nonexistent/kvtier_measurement.json";
  CHECK_THROWS_WITH(read_json_file(missing), Catch::StartsWith(missing + ": cannot open"));
}
