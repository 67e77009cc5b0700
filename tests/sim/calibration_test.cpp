// Size-dependent efficiency in simulations: device read/write efficiencies and
// link calibration curves reach SimGrid through the Platform's network-model
// factor callbacks. Each case times one transfer alone on its route.
#include <catch2/catch.hpp>

#include "models/nvme.h"
#include "models/topology.h"
#include "sim/platform/platform.h"
#include "sim/platform/streams.h"
#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

constexpr double kSsdGBps = 7.0;  // NVMe sequential read
constexpr double kSsdWriteGBps = 5.0;
constexpr double kSsdLatUs = 80.0;

json nvme_device() {
  return json{{"kind", "nvme"},       {"capacity_GB", 100},         {"read_GBps", kSsdGBps},
              {"write_GBps", kSsdWriteGBps}, {"latency_us", kSsdLatUs}};
}

json fast_dram() { return json{{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}; }

// GPU and one other device `dev` joined by one link.
json two_device_hardware(const json& dev, const json& link) {
  json l = link;
  l["ends"] = {"dev", "gpu"};
  return json{{"devices", {{"gpu", fast_gpu(1)}, {"dev", dev}}}, {"links", {{"link", l}}}, {"tiers", {"dev"}}};
}

// Simulates one transfer of `bytes` from device `from` to device `to` with
// requests of `request_bytes` (0: one request) and returns its duration, the
// platform's factors for it, and `expect(hw, topo)` computed in the child
// (where the device models live).
json time_transfer(json hw_json, const std::string& from, const std::string& to, double bytes, double request_bytes,
                   const std::function<double(const Hardware&, const Topology&)>& expect) {
  return in_child([=]() mutable {
    Hardware h = parse_hardware(hw_json, "hardware");
    Topology topo(h);
    start_simgrid();
    Platform p(h, topo);
    p.set_request_bytes(request_bytes);
    JobBoard board;
    Timeline tl;
    const size_t a = h.device_index(from), b = h.device_index(to);
    Stream s("transfer", p, board, tl);
    JobId j = board.create();
    s.submit(TransferJob{j, a, b, bytes, {}});
    s.start();
    json out;
    sg4::Actor::create("waiter", p.controller(), [&] {
      const double t0 = sg4::Engine::get_clock();
      board.wait(j);
      out["time"] = sg4::Engine::get_clock() - t0;
      s.stop();
    });
    sg4::Engine::get_instance()->run();
    out["bw_factor"] = p.bandwidth_factor(a, b, bytes);
    out["lat_factor"] = p.latency_factor(a, b, bytes);
    out["expect"] = expect(h, topo);
    return out;
  });
}

}  // namespace

TEST_CASE("a 4 KB single-request NVMe read is latency-bound as the device model predicts") {
  const double S = 4096;
  json hw = two_device_hardware(nvme_device(), {{"bandwidth_GBps", 1e6}, {"latency_us", 0}});
  json m = time_transfer(hw, "dev", "gpu", S, 0, [S](const Hardware& h, const Topology&) {
    const DeviceModel& d = *h.device("dev").model;
    // The efficiency already charges the request's latency (Little's law),
    // so the media link's own latency is not added on top.
    return S / (d.read_Bps() * d.read_efficiency(S, 1));
  });
  REQUIRE(m.contains("time"));
  const double t = m["time"].get<double>();
  // Straight from the model's own functions.
  CHECK(rel_err(t, m["expect"].get<double>()) < 1e-6);
  // And in closed form: one request at depth 1 takes L + s/B.
  const double L = kSsdLatUs * 1e-6, B = kSsdGBps * 1e9;
  CHECK(rel_err(t, L + S / B) < 1e-6);
  // Far from the size / bandwidth a constant-rate medium would give.
  CHECK(t > 10 * S / B);
  CHECK(m["bw_factor"].get<double>() < 0.02);
  CHECK(m["lat_factor"].get<double>() == 0.0);
}

TEST_CASE("a transfer of many blocks reads at the queue depth of its requests, capped at 32") {
  // 64 requests of 4 KB: depth 64 would reach 3.3 GB/s, the cap of 32 gives 1.6.
  const double req = 4096, S = 64 * req;
  json hw = two_device_hardware(nvme_device(), {{"bandwidth_GBps", 1e6}, {"latency_us", 0}});
  json m = time_transfer(hw, "dev", "gpu", S, req, [S, req](const Hardware& h, const Topology&) {
    const DeviceModel& d = *h.device("dev").model;
    return S / (d.read_Bps() * d.read_efficiency(req, Platform::kMaxQueueDepth));
  });
  REQUIRE(m.contains("time"));
  const double t = m["time"].get<double>();
  CHECK(rel_err(t, m["expect"].get<double>()) < 1e-6);
  const double L = kSsdLatUs * 1e-6, B = kSsdGBps * 1e9;
  CHECK(rel_err(t, S / (32 * req / (L + req / B))) < 1e-6);
}

TEST_CASE("a small NVMe write is latency-bound through write_efficiency") {
  const double S = 8192;
  json hw = two_device_hardware(nvme_device(), {{"bandwidth_GBps", 1e6}, {"latency_us", 0}});
  json m = time_transfer(hw, "gpu", "dev", S, 0, [S](const Hardware& h, const Topology&) {
    const DeviceModel& d = *h.device("dev").model;
    return S / (d.write_Bps() * d.write_efficiency(S, 1));
  });
  REQUIRE(m.contains("time"));
  const double t = m["time"].get<double>();
  CHECK(rel_err(t, m["expect"].get<double>()) < 1e-6);
  const double L = kSsdLatUs * 1e-6, W = kSsdWriteGBps * 1e9;
  CHECK(rel_err(t, L + S / W) < 1e-6);
}

TEST_CASE("device efficiency and a slower link compose as the smaller effective bandwidth") {
  // 1 MiB at depth 1 reads at 4.6 GB/s from the drive, so the 1 GB/s link
  // binds: the factor is not the product or the minimum of the two factors.
  const double S = 1048576;
  json hw = two_device_hardware(nvme_device(), {{"bandwidth_GBps", 1.0}, {"latency_us", 0}});
  json m = time_transfer(hw, "dev", "gpu", S, 0, [S](const Hardware& h, const Topology& topo) {
    const size_t a = h.device_index("dev"), g = h.device_index("gpu");
    return h.device("dev").model->media_latency_s() + S / read_path_Bps(h, topo, a, g, S, 1);
  });
  REQUIRE(m.contains("time"));
  const double t = m["time"].get<double>();
  CHECK(rel_err(t, m["expect"].get<double>()) < 1e-6);
  CHECK(rel_err(t, kSsdLatUs * 1e-6 + S / 1e9) < 1e-6);
  CHECK(m["bw_factor"].get<double>() == 1.0);
}

TEST_CASE("a link's calibration curve gives the curve's bandwidth at the transfer's size") {
  // 1 GB/s at 4 KB rising linearly to 10 GB/s at 1 MiB: the link's nominal
  // bandwidth is the peak, 10 GB/s; at 64 KiB the curve gives 1.53 GB/s.
  const double S = 65536, lat_us = 5;
  json curves{{"forward_GBps", {{4096, 1.0}, {1048576, 10.0}}}};
  json hw = two_device_hardware(fast_dram(), {{"bandwidth_GBps", 1.0}, {"latency_us", lat_us}, {"curves", curves}});
  json m = time_transfer(hw, "dev", "gpu", S, 0, [S, lat_us](const Hardware& h, const Topology&) {
    return lat_us * 1e-6 + S / h.links[0].bandwidth_at(true, S);
  });
  REQUIRE(m.contains("time"));
  const double t = m["time"].get<double>();
  CHECK(rel_err(t, m["expect"].get<double>()) < 1e-6);
  const double curve_Bps = (1.0 + 9.0 * (S - 4096) / (1048576 - 4096)) * 1e9;
  CHECK(rel_err(t, lat_us * 1e-6 + S / curve_Bps) < 1e-6);
  CHECK(rel_err(m["bw_factor"].get<double>(), curve_Bps / 10e9) < 1e-12);
}

TEST_CASE("a link's latency curve gives the curve's latency at the transfer's size") {
  // Nominal 5 us; the curve gives 8 us at 1 B rising to 10 us at 1 MiB.
  const double S = 524288, lat_us = 5, B = 10.0;
  json curves{{"latency_us", {{1, 8.0}, {1048576, 10.0}}}};
  json hw = two_device_hardware(fast_dram(), {{"bandwidth_GBps", B}, {"latency_us", lat_us}, {"curves", curves}});
  json m = time_transfer(hw, "dev", "gpu", S, 0, [S, B](const Hardware& h, const Topology&) {
    return h.links[0].latency_at(S) + S / (B * 1e9);
  });
  REQUIRE(m.contains("time"));
  const double t = m["time"].get<double>();
  CHECK(rel_err(t, m["expect"].get<double>()) < 1e-6);
  const double curve_s = (8.0 + 2.0 * (S - 1) / (1048576 - 1)) * 1e-6;
  CHECK(rel_err(t, curve_s + S / (B * 1e9)) < 1e-6);
  CHECK(m["bw_factor"].get<double>() == 1.0);
}

TEST_CASE("without curves the factors are exactly 1 and a transfer takes L + S/B") {
  // Requests of one block set, but DRAM without curves has efficiency 1.
  const double S = 1e8, lat_us = 5, B = 10.0;
  json hw = two_device_hardware(fast_dram(), {{"bandwidth_GBps", B}, {"latency_us", lat_us}});
  json m = time_transfer(hw, "dev", "gpu", S, 65536, [](const Hardware&, const Topology&) { return 0.0; });
  REQUIRE(m.contains("time"));
  CHECK(m["bw_factor"].get<double>() == 1.0);
  CHECK(m["lat_factor"].get<double>() == 1.0);
  CHECK(rel_err(m["time"].get<double>(), lat_us * 1e-6 + S / (B * 1e9)) < 1e-6);
}
