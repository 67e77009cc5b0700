// Host calibration (models/calibration_piecewise.h, models/calibration_host.h):
// piecewise-linear fits find known segments, the held-out split and error
// statistics mean what they say, the NVMe parameters come back out of
// synthetic storage runs, a host measurement becomes a hardware description
// that parses, and a calibration names the device it was measured on.
#include <catch2/catch.hpp>

#include <cmath>

#include "models/calibration.h"
#include "models/calibration_host.h"
#include "models/calibration_piecewise.h"
#include "models/hardware.h"
#include "models/nvme.h"

using namespace kvtier;

namespace {

std::vector<MeasuredPoint> points(double lo, double hi, double f, double (*t)(double)) {
  std::vector<MeasuredPoint> v;
  for (double s = lo; s <= hi; s *= f) v.push_back({s, t(s)});
  return v;
}

// A cache-like step: 1 us + S / 20 GB/s up to 1 MiB, then 30 us + S / 5 GB/s.
double two_regimes(double s) { return s <= 1048576 ? 1.0 + s / 20e3 : 30.0 + s / 5e3; }

json storage_probe(int q, double B, double L_us, double kiops) {
  json p = {{"kind", "storage"}, {"queue_depth", q}, {"samples", json::array()}};
  for (double s = 4096; s <= 64.0 * 1048576; s *= 4) {
    const double t = q * s / nvme_drive_throughput_Bps(B * 1e9, kiops * 1e3, L_us * 1e-6, s, q) * 1e6;
    p["samples"].push_back({{"bytes", s}, {"times_us", {t, t * 1.1, t * 0.95}}});
  }
  return p;
}

json host_measurement() {
  json m = {{"format", "kvtier-measurement"}, {"version", 1}, {"host", "testhost"}, {"date", "2026-01-01T00:00:00Z"},
            {"device", {{"name", "Test CPU 9000X"}, {"kind", "host"}}},
            {"machine", {{"hostname", "testhost"}, {"cpu_model", "Test CPU 9000X"}, {"online_cpus", 4},
                         {"memory_bytes", 16e9}}},
            {"storage", {{"device_model", "test disk"}, {"file_system", "ext4"}, {"free_bytes", 1e11}}},
            {"probes", json::object()}};
  for (int q : {1, 4, 16}) {
    m["probes"]["storage_read_qd" + std::to_string(q)] = storage_probe(q, 2.0, 80, 200);
    m["probes"]["storage_write_qd" + std::to_string(q)] = storage_probe(q, 1.5, 20, 150);
  }
  json att = {{"kind", "compute"}, {"samples", json::array()}};
  for (double s = 262144; s <= 64.0 * 1048576; s *= 2) att["samples"].push_back({{"bytes", s}, {"times_us", {2 + s / 10e3}}});
  m["probes"]["cpu_attention"] = att;
  json sc = {{"kind", "scoring"}, {"samples", {{{"bytes", 1048576}, {"times_us", {100.0}}}, {{"bytes", 4194304}, {"times_us", {400.0}}}}}};
  m["probes"]["score_int8_1t"] = sc;
  m["probes"]["score_int8_all"] = sc;
  return m;
}

}  // namespace

TEST_CASE("piecewise fit finds the two regimes of a path and predicts sizes between", "[calibration][host]") {
  const auto pts = points(4096, 256.0 * 1048576, 2, two_regimes);
  const PiecewiseFit f = fit_piecewise(pts);
  REQUIRE(f.segments.size() == 2);
  CHECK(f.segments[0].hi_bytes == 1048576);
  for (double s : {6000.0, 300000.0, 3e6, 1e8}) CHECK(f.predict_us(s) == Approx(two_regimes(s)).epsilon(0.02));
}

TEST_CASE("piecewise fit keeps one segment for one line, even with noise", "[calibration][host]") {
  std::vector<MeasuredPoint> v;
  int k = 0;
  for (double s = 4096; s <= 1e8; s *= 2, ++k) v.push_back({s, (10 + s / 1e3) * (k % 2 ? 1.01 : 0.99)});
  const PiecewiseFit f = fit_piecewise(v);
  CHECK(f.segments.size() == 1);
  CHECK(f.predict_us(1e7) == Approx(10 + 1e4).epsilon(0.02));
}

TEST_CASE("held-out split alternates sizes; error statistics are fractions of the measurement", "[calibration][host]") {
  const auto pts = points(1, 64, 2, [](double s) { return s; });  // 1, 2, ..., 64: 7 sizes
  std::vector<MeasuredPoint> tr, te;
  split_alternate(pts, &tr, &te);
  REQUIRE(tr.size() == 4);
  REQUIRE(te.size() == 3);
  CHECK(tr[1].bytes == 4);
  CHECK(te[0].bytes == 2);
  const ErrorStats e = error_stats({1.1, 2.0, 2.7, 4.0}, {1.0, 2.0, 3.0, 4.0});
  CHECK(e.n == 4);
  CHECK(e.mape == Approx((0.1 + 0 + 0.1 + 0) / 4));
  CHECK(e.p50 == Approx(0.05));
  CHECK(e.p99 == Approx(0.1));
  CHECK(e.max == Approx(0.1));
}

TEST_CASE("NVMe parameters come back out of synthetic storage runs at several depths", "[calibration][host]") {
  const json m = host_measurement();
  const NvmeFit r = fit_nvme(storage_points(m, false));
  CHECK(r.points == 3 * 8);  // 4 KiB .. 64 MiB by 4 at three depths
  CHECK(r.seq_GBps == Approx(2.0).epsilon(0.03));
  CHECK(r.latency_us == Approx(80).epsilon(0.05));
  CHECK(r.rms_log_error < 0.05);
  const NvmeFit w = fit_nvme(storage_points(m, true));
  CHECK(w.seq_GBps == Approx(1.5).epsilon(0.03));
  // The held-out filter keeps only the sizes named.
  const std::vector<double> keep = {4096, 65536};
  CHECK(storage_points(m, false, &keep).size() == 3 * 2);
}

TEST_CASE("a host measurement becomes a calibration and a hardware description that parse", "[calibration][host]") {
  const json m = host_measurement();
  HostFitOptions o;
  o.measurement_file = "meas.json";
  const json cal = fit_host_calibration(m, o);
  CHECK(cal["device"] == "Test CPU 9000X");
  REQUIRE(cal["devices"]["host_cpu"].contains("attention_us"));
  CHECK(cal["paths"].contains("storage_read_qd4"));
  json hw = host_hardware(m, "", o);
  CHECK(hw["tiers"] == json::array({"host_cpu", "disk"}));
  CHECK(hw["devices"]["disk"]["read_GBps"].get<double>() == Approx(2.0).epsilon(0.03));
  CHECK(hw["devices"]["cpu"]["scoring_GBps_per_core"].get<double>() == Approx(10.48576));
  CHECK(calibration_device_mismatch(hw, cal).empty());  // its description names the CPU
  merge_calibration(hw, cal, "cal.json");
  Hardware h = parse_hardware(hw, "hardware");
  const auto& gpu = *h.devices[static_cast<size_t>(h.device_index("host_cpu"))].model;
  CHECK(gpu.attention_s(4.0 * 1048576) * 1e6 == Approx(2 + 4.0 * 1048576 / 10e3).epsilon(0.01));
}

TEST_CASE("a host measurement without the expected header is an error naming the file", "[calibration][host]") {
  json m = host_measurement();
  m["format"] = "other";
  HostFitOptions o;
  o.measurement_file = "meas.json";
  CHECK_THROWS_WITH(fit_host_calibration(m, o), Catch::Contains("meas.json: format"));
  json s = host_measurement();
  s["probes"].erase("storage_read_qd1");
  s["probes"].erase("storage_read_qd4");
  s["probes"].erase("storage_read_qd16");
  CHECK_THROWS_WITH(host_hardware(s, "", o), Catch::Contains("storage"));
}

TEST_CASE("a calibration names its device: another device's hardware is a mismatch", "[calibration][host]") {
  const json cal = {{"device", "NVIDIA H200"}, {"devices", json::object()}};
  const json rtx = {{"name", "rtx4090_dram_nvme"}, {"description", "Consumer workstation: RTX 4090, DDR5"}};
  const json h200 = {{"name", "h200_cxl_nvme"}, {"description", "H200, a CXL memory expander"}};
  CHECK(calibration_device_mismatch(rtx, cal) == "NVIDIA H200");
  CHECK(calibration_device_mismatch(h200, cal).empty());
  // Without a device name there is nothing to check.
  CHECK(calibration_device_mismatch(rtx, json{{"devices", json::object()}}).empty());
}
