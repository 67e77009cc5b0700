// Energy and cost (sim/engine/energy_metrics.h): closed forms, the rule that
// moving less data never costs more at equal time, and runs whose energy must
// follow what the devices and links did.
#include <catch2/catch.hpp>
#include <random>

#include "sim/core/activity_windows.h"
#include "sim/engine/energy_metrics.h"
#include "sim/serving/serving.h"
#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {
// GPU + root + DRAM + NVMe, their power figures given; links PCIe and a structural DRAM join.
json energy_hw() {
  return json{{"devices",
               {{"gpu", {{"kind", "gpu"}, {"capacity_GB", 24}, {"memory_GBps", 1000}, {"fp16_TFLOPS", 100},
                         {"power", {{"idle_W", 20}, {"busy_W", 300}, {"memory_pJ_per_bit", 4}}}}},
                {"root", {{"kind", "switch"}}},
                {"dram", {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 50},
                          {"power", {{"background_W_per_GB", 0.1}, {"access_pJ_per_bit", 20}}}}},
                {"ssd", {{"kind", "nvme"}, {"capacity_GB", 1000}, {"read_GBps", 5}, {"write_GBps", 2}, {"drives", 2},
                         {"write_amplification", 2.0},
                         {"power", {{"idle_W", 3}, {"read_nJ_per_byte", 1}, {"program_nJ_per_byte", 2}}}}}}},
              {"links",
               {{"pcie_gpu", {{"ends", {"root", "gpu"}}, {"pcie", "gen4x16"}}},
                {"dram_bus", {{"ends", {"root", "dram"}}, {"bandwidth_GBps", 100}, {"duplex", "fatpipe"}}},
                {"pcie_ssd", {{"ends", {"root", "ssd"}}, {"pcie", "gen4x4"}, {"energy_pJ_per_bit", 5}}}}},
              {"tiers", {"gpu", "dram", "ssd"}}};
}

// The LinkStats a platform of energy_hw() would have: each split link's two
// directions, the DRAM bus, the media of DRAM (shared) and of the SSD.
std::vector<LinkStat> energy_stats(const Hardware& hw) {
  std::vector<LinkStat> s;
  auto link = [&](const std::string& name, bool fwd) {
    LinkStat st;
    st.name = name;
    for (size_t i = 0; i < hw.links.size(); ++i)
      if (name.rfind(hw.links[i].name, 0) == 0) st.link = static_cast<int32_t>(i);
    st.forward = fwd;
    s.push_back(st);
  };
  auto media = [&](const std::string& dev, bool write, const std::string& suffix) {
    LinkStat st;
    st.name = dev + suffix;
    st.device = hw.device_index(dev);
    st.write = write;
    s.push_back(st);
  };
  link("pcie_gpu:root->gpu", true);
  link("pcie_gpu:gpu->root", false);
  link("dram_bus", true);
  link("pcie_ssd:root->ssd", true);
  link("pcie_ssd:ssd->root", false);
  media("dram", false, ".media");
  media("ssd", false, ".read");
  media("ssd", true, ".write");
  return s;
}
}  // namespace

TEST_CASE("energy: an idle run costs each device's idle power times the run") {
  json j = energy_hw();
  const Hardware hw = parse_hardware(j, "hardware");
  const auto stats = energy_stats(hw);
  const double T = 12.5;
  const EnergyTotals t = integrate_energy(hw, stats, std::vector<double>(stats.size(), 0.0), {0, 0, 0, 0}, T, 0);
  // GPU 20 W, DRAM 100 GB x 0.1 W, two drives x 3 W, the root switch 0 W.
  CHECK(t.total_J == Approx((20 + 10 + 6) * T));
  for (size_t d = 0; d < hw.devices.size(); ++d) CHECK(t.devices[d].total_J() == Approx(hw.devices[d].power->idle_W() * T));
}

TEST_CASE("energy: a copy costs its bytes at each hop's and each end's energy per byte") {
  json j = energy_hw();
  const Hardware hw = parse_hardware(j, "hardware");
  const auto stats = energy_stats(hw);
  // 1 GB from the SSD to the GPU (its read, PCIe ssd->root, the structural
  // DRAM bus is not on that route, PCIe root->gpu), and 0.5 GB from the GPU
  // to the SSD (PCIe gpu->root, root->ssd, its write).
  const double B = 1e9, W = 0.5e9;
  std::vector<double> bytes = {B, W, 0, W, B, 0, B, W};
  const EnergyTotals idle = integrate_energy(hw, stats, std::vector<double>(stats.size(), 0.0), {0, 0, 0, 0}, 1.0, 0);
  const EnergyTotals t = integrate_energy(hw, stats, bytes, {0, 0, 0, 0}, 1.0, 0);
  const double pcie_gpu = (B + W) * 6.5e-12 * 8, pcie_ssd = (B + W) * 5e-12 * 8;
  const double gpu_mem = (B + W) * 4e-12 * 8, ssd = B * 1e-9 + W * 2.0 * 2e-9;  // programming x the write amplification
  CHECK(t.total_J - idle.total_J == Approx(pcie_gpu + pcie_ssd + gpu_mem + ssd));
  CHECK(t.devices[size_t(hw.device_index("ssd"))].traffic_J == Approx(ssd));
  CHECK(t.devices[size_t(hw.device_index("dram"))].traffic_J == 0);
}

TEST_CASE("energy: a device's work costs its active power over the work's time") {
  json j = energy_hw();
  const Hardware hw = parse_hardware(j, "hardware");
  const auto stats = energy_stats(hw);
  std::vector<double> work(hw.devices.size(), 0.0);
  work[size_t(hw.device_index("gpu"))] = 2.0;
  const EnergyTotals t = integrate_energy(hw, stats, std::vector<double>(stats.size(), 0.0), work, 10.0, 0);
  const DeviceEnergy& g = t.devices[size_t(hw.device_index("gpu"))];
  CHECK(g.active_J == Approx((300 - 20) * 2.0));
  CHECK(g.idle_J == Approx(20 * 10.0));
}

TEST_CASE("energy: moving less data never costs more energy at equal time") {
  json j = energy_hw();
  const Hardware hw = parse_hardware(j, "hardware");
  const auto stats = energy_stats(hw);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> bytes(stats.size()), less(stats.size());
    for (size_t i = 0; i < bytes.size(); ++i) {
      bytes[i] = u(rng) * 1e10;
      less[i] = bytes[i] * (u(rng) < 0.5 ? u(rng) : 1.0);
    }
    std::vector<double> work(hw.devices.size(), 0.0);
    work[size_t(hw.device_index("gpu"))] = u(rng) * 5;
    const double T = 5 + u(rng) * 5;
    CHECK(integrate_energy(hw, stats, less, work, T, 0).total_J <= integrate_energy(hw, stats, bytes, work, T, 0).total_J);
  }
}

TEST_CASE("energy: every device kind has a power model") {
  for (const auto& [kind, e] : Registry<DeviceModel>::instance().entries()) {
    INFO(kind);
    CHECK(Registry<PowerModel>::instance().has(kind));
  }
}

TEST_CASE("energy: an FPGA's throttled share runs its dynamic power at the lower clock") {
  json j = {{"devices", {{"gpu", {{"kind", "gpu"}, {"capacity_GB", 24}, {"memory_GBps", 1000}, {"fp16_TFLOPS", 100}}},
                         {"fpga", {{"kind", "ku15p"}}}}},
            {"links", {{"l", {{"ends", {"gpu", "fpga"}}, {"pcie", "gen3x4"}}}}},
            {"tiers", {"gpu"}}};
  const Hardware hw = parse_hardware(j, "hardware");
  const PowerModel& p = *hw.devices[size_t(hw.device_index("fpga"))].power;
  DeviceActivity a;
  a.run_s = 10, a.work_s = 4;
  const double cool = p.energy(a).active_J;
  CHECK(cool == Approx((14.0 - 6.0) * 4));  // the thermal model's load_W and idle_W
  a.throttled_fraction = 1;
  CHECK(p.energy(a).active_J == Approx(cool * 300.0 / 350.0));
}

TEST_CASE("energy: bad power and price objects are named by their JSON path") {
  json j = energy_hw();
  j["devices"]["gpu"]["power"]["busy_W"] = 10;
  CHECK_THROWS_WITH(parse_hardware(j, "hardware"), Catch::Contains("hardware.devices.gpu.power.busy_W"));
  j = energy_hw();
  j["devices"]["gpu"]["power"]["idle_Watts"] = 10;
  CHECK_THROWS_WITH(parse_hardware(j, "hardware"), Catch::Contains("hardware.devices.gpu.power"));
  j = energy_hw();
  j["devices"]["ssd"]["price"] = {{"usd", 100}, {"usd_per_hour", 1}};
  CHECK_THROWS_WITH(parse_hardware(j, "hardware"), Catch::Contains("hardware.devices.ssd.price"));
}

TEST_CASE("energy: a run with no active or per-byte energy costs idle power times its length") {
  json m = simulate(load_config("configs/default.json",
                                {"workload.decode_steps=4", "workload.warmup_steps=0",
                                 "hardware.devices.gpu.power.busy_W=20", "hardware.devices.gpu.power.memory_pJ_per_bit=0",
                                 "hardware.devices.cpu.power.tdp_W=30", "hardware.devices.dram.power.access_pJ_per_bit=0",
                                 "hardware.devices.ssd.power.read_nJ_per_byte=0", "hardware.devices.ssd.power.program_nJ_per_byte=0",
                                 "hardware.links.pcie_gpu.energy_pJ_per_bit=0", "hardware.links.pcie_ssd.energy_pJ_per_bit=0"}));
  REQUIRE(m.contains("energy"));
  const double T = m["simulated_time_s"].get<double>();
  // RTX 4090 idle 20 W, Ryzen idle 30 W, 128 GB x 0.1 W, a client drive's 1 W.
  CHECK(m["energy"]["total_J"].get<double>() == Approx((20 + 30 + 12.8 + 1) * T));
}

TEST_CASE("energy: a run's energy follows what its devices and links did") {
  json m = simulate(load_config("configs/default.json", {"workload.decode_steps=8", "workload.warmup_steps=0"}));
  REQUIRE(m.contains("energy"));
  // Each link direction's joules are its bytes at PCIe's 6.5 pJ/bit.
  for (auto& [name, l] : m["links"].items()) {
    if (!m["energy"]["links"].contains(name)) continue;
    INFO(name);
    const double pj = name.rfind("pcie", 0) == 0 ? 6.5 : 0.0;
    CHECK(m["energy"]["links"][name]["J"].get<double>() == Approx(l["bytes"].get<double>() * pj * 8e-12));
  }
  // DRAM's traffic is its media link's bytes at its access energy.
  CHECK(m["energy"]["devices"]["dram"]["traffic_J"].get<double>() ==
        Approx(m["links"]["dram.media"]["bytes"].get<double>() * 20e-12 * 8));
  // The GPU's active joules are its compute stream's busy time, prefill's and decode's, at busy_W - idle_W (RTX 4090: 450 - 20).
  const double busy = m["gpu_busy_fraction"].get<double>() * m["decode_time_s"].get<double>() +
                      m["prefill_gpu_busy_fraction"].get<double>() * m["ttft_s"].get<double>();
  CHECK(m["energy"]["devices"]["gpu"]["active_J"].get<double>() == Approx((450.0 - 20.0) * busy).epsilon(1e-6));
  // A longer decode does more work on the GPU and costs more.
  json longer = simulate(load_config("configs/default.json", {"workload.decode_steps=16", "workload.warmup_steps=0"}));
  CHECK(longer["energy"]["devices"]["gpu"]["active_J"].get<double>() > m["energy"]["devices"]["gpu"]["active_J"].get<double>());
}

TEST_CASE("energy: the FPGA's active energy is its attention work at its dynamic power") {
  json m = simulate(load_config("configs/systems/near_storage_attention.json", {"workload.decode_steps=4", "workload.warmup_steps=0"}));
  REQUIRE(m.contains("near_storage"));
  const double busy = m["near_storage"]["fpga_busy_s"].get<double>();
  REQUIRE(busy > 0);
  CHECK(m["energy"]["devices"]["fpga"]["active_J"].get<double>() == Approx((14.0 - 6.0) * busy));
}

TEST_CASE("energy: serving's GPU active energy is its busy time at its active power") {
  json m = serve(load_config("configs/serving/prefix_example.json", {}));
  REQUIRE(m.contains("energy"));
  const double busy = m["gpu_busy_fraction"].get<double>() * m["simulated_time_s"].get<double>();
  CHECK(m["energy"]["devices"]["gpu"]["active_J"].get<double>() == Approx((400.0 - 50.0) * busy).epsilon(1e-6));  // the A100's figures
  CHECK(m["energy"]["J_per_request"].get<double>() ==
        Approx(m["energy"]["total_J"].get<double>() / m["requests"].get<double>()));
}

TEST_CASE("cost: a rented machine costs its rent, its power included") {
  json m = simulate(load_config("configs/default.json",
                                {"workload.decode_steps=4", "workload.warmup_steps=0", "hardware.devices.gpu.price.usd=0",
                                 "hardware.devices.gpu.price.usd_per_hour=2", "hardware.devices.cpu.price.usd=0",
                                 "hardware.devices.cpu.price.bundled=true", "hardware.devices.dram.price.usd=0",
                                 "hardware.devices.dram.price.bundled=true", "hardware.devices.ssd.price.usd=0",
                                 "hardware.devices.ssd.price.bundled=true"}));
  REQUIRE(m.contains("cost"));
  const json& c = m["cost"];
  CHECK(c["usd_per_hour"].get<double>() == Approx(2.0));
  CHECK(c["electricity_usd_per_hour"].get<double>() == 0);
  CHECK(c["unpriced_devices"].empty());
  const double tokens = 4.0 * 4;  // 4 steps of a batch of 4
  CHECK(c["usd_per_million_tokens"].get<double>() ==
        Approx(2.0 * m["simulated_time_s"].get<double>() / 3600 / tokens * 1e6));
}

TEST_CASE("cost: a bought machine costs its amortised prices and its electricity; its devices add up") {
  json m = simulate(load_config("configs/default.json", {"workload.decode_steps=4", "workload.warmup_steps=0"}));
  const json& c = m["cost"];
  // configs/hardware/rtx4090_dram_nvme.json: $1,599 + $699 + $400 + $170 over 3 years; 13 cents per kWh.
  CHECK(c["capital_usd_per_hour"].get<double>() == Approx((1599.0 + 699 + 400 + 170) / (3 * 8766.0)));
  CHECK(c["electricity_usd_per_hour"].get<double>() == Approx(m["energy"]["mean_W"].get<double>() / 1000 * 0.13));
  double sum = 0;
  for (auto& [name, d] : c["devices"].items()) sum += d["usd_per_hour"].get<double>();
  double links = 0;
  for (auto& [name, l] : m["energy"]["links"].items()) links += l["J"].get<double>();
  CHECK(sum + links / m["simulated_time_s"].get<double>() / 3.6e6 * 3600 * 0.13 == Approx(c["usd_per_hour"].get<double>()));
}

TEST_CASE("cost: a drive worn out before its amortisation ends is bought again sooner") {
  json m = simulate(load_config("configs/systems/ssd_offload.json", {"workload.decode_steps=4", "workload.warmup_steps=0"}));
  REQUIRE(m["tiers"]["ssd"].contains("years_to_wear_out"));
  const double years = m["tiers"]["ssd"]["years_to_wear_out"].get<double>();
  const double used = m["tiers"]["ssd"]["endurance_used"].get<double>(), hours = m["simulated_time_s"].get<double>() / 3600;
  const double price = 170;  // the 990 PRO 2 TB of configs/hardware/rtx4090_dram_nvme.json
  REQUIRE(years < 3);
  // price x endurance used per hour is the price over its years to wear out
  // (which counts the endurance left after the run: 1 - used of it).
  const double per_hour = price * (1 - used) / (years * 8766);
  CHECK(price * used / hours == Approx(per_hour).epsilon(1e-9));
  CHECK(m["cost"]["flash_wear_usd_per_hour"].get<double>() == Approx(per_hour - price / (3 * 8766)).epsilon(1e-9));
  CHECK(m["cost"]["flash"]["ssd"]["replacement_usd_per_million_tokens"].get<double>() ==
        Approx(price * used / (4.0 * 4) * 1e6));  // 4 steps of a batch of 4
}

TEST_CASE("activity windows: work and bytes are kept whole as windows merge, and placed in time") {
  ActivityWindows w(2, 1, 8, 1.0);
  w.add_work(0, 4.0, 0.0, 4.0);   // one unit per second over windows 0-3
  w.add_bytes(0, 10.0, 2.5, 3.0);  // within window 2
  REQUIRE(w.width_s() == 1.0);
  CHECK(w.work(1)[0] == Approx(1.0));
  CHECK(w.bytes(2)[0] == Approx(10.0));
  w.add_work(1, 6.0, 20.0, 26.0);  // past 8 windows of 1 s: they merge to 4 s, then fit
  CHECK(w.width_s() == 4.0);
  double work0 = 0, work1 = 0, bytes = 0;
  for (size_t i = 0; i < w.windows(); ++i) work0 += w.work(i)[0], work1 += w.work(i)[1], bytes += w.bytes(i)[0];
  CHECK(work0 == Approx(4.0));
  CHECK(work1 == Approx(6.0));
  CHECK(bytes == Approx(10.0));
  CHECK(w.work(0)[0] == Approx(4.0));  // [0, 4) is the first 4 s window
  CHECK(w.work(5)[1] == Approx(6.0 * 4.0 / 6.0));  // [20, 24) of [20, 26)
  CHECK(w.work(6)[1] == Approx(6.0 * 2.0 / 6.0));                           // [24, 26)
}

TEST_CASE("energy: peak power is the busiest window's mean power, never below idle") {
  json m = simulate(load_config("configs/default.json", {"workload.decode_steps=8", "workload.warmup_steps=0"}));
  const json& e = m["energy"];
  CHECK(e["peak_window_s"].get<double>() > 0);
  CHECK(e["peak_W"].get<double>() >= e["mean_W"].get<double>());
  for (auto& [name, d] : e["devices"].items()) {
    INFO(name);
    CHECK(d["peak_W"].get<double>() >= d["mean_W"].get<double>() * (1 - 1e-9));
  }
  // The GPU computes most of the run: its busiest window draws its busy power (RTX 4090: 450 W), not more.
  CHECK(e["devices"]["gpu"]["peak_W"].get<double>() <= 450.0 + 1e-6 + 7.25e-12 * 8 * 32e9);
  CHECK(e["devices"]["gpu"]["peak_W"].get<double>() > 400.0);
}
