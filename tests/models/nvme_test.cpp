#include <catch2/catch.hpp>

#include "hw_fixture.h"
#include "models/flash_wear.h"
#include "models/nvme.h"
#include "models/pcie.h"
#include "models/topology.h"

using namespace kvtier;
using Catch::Matchers::Contains;

namespace {
// The 990 PRO figures of configs/hardware/rtx4090_dram_nvme.json.
json pro990() {
  return {{"capacity_GB", 2000}, {"read_GBps", 7.45}, {"write_GBps", 6.9}, {"latency_us", 45},
          {"write_latency_us", 15}, {"read_kIOPS", 1400}, {"write_kIOPS", 1550}, {"rated_TBW", 1200}};
}
}  // namespace

TEST_CASE("A 4 KB read at QD1 is latency-bound, a 1 MB read at QD32 bandwidth-bound", "[nvme]") {
  auto d = test::make_device("nvme", pro990());
  // QD1: one 4 KB request per (45 us + 4096 B / 7.45 GB/s) = 45.55 us: ~90 MB/s.
  double t_qd1 = 4096.0 / (45e-6 + 4096.0 / 7.45e9);
  CHECK(d->read_Bps() * d->read_efficiency(4096, 1) == Approx(t_qd1));
  CHECK(d->read_efficiency(4096, 1) < 0.02);
  CHECK(d->read_efficiency(1 << 20, 32) == Approx(1.0));
  // 4 KB at QD32 is still depth-bound (32 x 4096 / 45.55 us = 2.88 GB/s < IOPS x 4 KB = 5.7 GB/s)...
  CHECK(d->read_Bps() * d->read_efficiency(4096, 32) == Approx(32 * t_qd1));
  // ...and at QD256 the 1.4M IOPS ceiling binds.
  CHECK(d->read_Bps() * d->read_efficiency(4096, 256) == Approx(1.4e6 * 4096));
}

TEST_CASE("NVMe reads and writes are asymmetric and on separate paths", "[nvme]") {
  auto d = test::make_device("nvme", pro990());
  CHECK(d->read_Bps() == Approx(7.45e9));
  CHECK(d->write_Bps() == Approx(6.9e9));
  CHECK_FALSE(d->media_shared());
  // QD1 writes use the write latency: 4096 / (15 us + 4096 / 6.9 GB/s).
  CHECK(d->write_Bps() * d->write_efficiency(4096, 1) == Approx(4096.0 / (15e-6 + 4096.0 / 6.9e9)));
  // Defaults keep the foundation's behaviour (no IOPS cap, 80 us).
  auto plain = test::make_device("nvme", {{"capacity_GB", 100}, {"read_GBps", 3}, {"write_GBps", 2}});
  CHECK(plain->media_latency_s() == Approx(80e-6));
  CHECK(plain->read_efficiency(64 << 20, 8) == Approx(1.0));
}

TEST_CASE("RAID-0 of 4 drives: 4x the sequential rate; a QD1 4 KB read is no faster", "[nvme][raid]") {
  json p = pro990();
  p["drives"] = 4;
  auto raid = test::make_device("nvme", p);
  auto one = test::make_device("nvme", pro990());
  CHECK(raid->read_Bps() == Approx(4 * 7.45e9));
  CHECK(raid->capacity_bytes() == Approx(4 * 2000e9));
  CHECK(raid->rated_endurance_bytes() == Approx(4 * 1200e12));
  CHECK(raid->read_Bps() * raid->read_efficiency(8 << 20, 32) == Approx(4 * 7.45e9));
  CHECK(raid->read_Bps() * raid->read_efficiency(4096, 1) == Approx(one->read_Bps() * one->read_efficiency(4096, 1)));
  // A 2 MB request spans 4 chunks of 512 KiB: all four drives at depth 1.
  NvmeSpec s;
  s.read_Bps = 7.45e9;
  s.read_latency_s = 45e-6;
  s.drives = 4;
  double per = (512 * 1024.0) / (45e-6 + 512 * 1024.0 / 7.45e9);
  CHECK(nvme_throughput_Bps(s, false, 2 * 1024 * 1024, 1) == Approx(4 * per));
}

TEST_CASE("RAID-0 behind one upstream link reads at min(4 x drive, link)", "[nvme][raid][topology]") {
  json p = pro990();
  p["drives"] = 4;
  for (const char* up : {"gen4x4", "gen4x16", "gen5x16"}) {
    json hw = test::one_tier_hw("nvme", p, {{"pcie", up}});
    Hardware h = parse_hardware(hw, "hardware");
    Topology t(h);
    PcieConfig c = parse_pcie_spec(up, "t");
    double expect = std::min(4 * 7.45e9, pcie_effective_Bps(c));
    CAPTURE(up);
    // Read into the root complex: the GPU's own x16 link is not what is tested.
    CHECK(read_path_Bps(h, t, static_cast<size_t>(h.device_index("dev")), static_cast<size_t>(h.device_index("root")),
                        8 << 20, 32) == Approx(expect));
  }
  // gen5x16 (57.6 GB/s effective) is above 4 x 7.45 = 29.8 GB/s: the drives bind.
  json hw = test::one_tier_hw("nvme", p, {{"pcie", "gen5x16"}});
  Hardware h = parse_hardware(hw, "hardware");
  Topology t(h);
  size_t dev = static_cast<size_t>(h.device_index("dev")), root = static_cast<size_t>(h.device_index("root"));
  CHECK(read_path_Bps(h, t, dev, root) == Approx(4 * 7.45e9));
  // Small requests at depth 1 are latency-bound whatever the link.
  CHECK(read_path_Bps(h, t, dev, root, 4096, 1) == Approx(4096.0 / (45e-6 + 4096.0 / 7.45e9)));
}

TEST_CASE("Endurance: bytes written against rated TBW with write amplification", "[nvme][endurance]") {
  json p = pro990();
  p["write_amplification"] = 2.0;
  auto d = test::make_device("nvme", p);
  FlashWear w(*d);
  w.record_write(300e12);
  CHECK(w.host_bytes_written() == Approx(300e12));
  CHECK(w.nand_bytes_written() == Approx(600e12));
  CHECK(w.life_used() == Approx(0.5));  // 600 TB of 1,200 TBW
  // The remaining 600 TB at 1 GB/s of host writes, amplified 2x: 300,000 s.
  CHECK(w.years_to_wear_out(1e9) == Approx(3e5 / (365.25 * 86400)));
  CHECK(FlashWear(0, 1).life_used() == 0);
}

TEST_CASE("A pSLC region holds the KV: smaller, faster to write, more endurance", "[nvme][pslc]") {
  json p = pro990();
  p["pslc_GB"] = 200;
  p["pslc_write_GBps"] = 6.9;
  p["pslc_endurance_factor"] = 8;
  auto d = test::make_device("nvme", p);
  CHECK(d->capacity_bytes() == Approx(200e9));
  CHECK(d->rated_endurance_bytes() == Approx(8 * 1200e12));
  p["pslc_GB"] = 3000;
  CHECK_THROWS_WITH(test::make_device("nvme", p), Contains("pslc_GB"));
}
