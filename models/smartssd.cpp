// The NAND side of a Samsung SmartSSD: a 3.84 TB U.2 drive whose controller
// sits behind the card's KU15P FPGA, which is also the card's PCIe switch. In
// a hardware description the card is three vertices: this storage device, a
// "ku15p" compute device, and a switch joining them to the Gen3 x4 host link;
// so SSD-to-FPGA (P2P) traffic never crosses the host link, as on the card.
//
// The media path follows the measured SSD-to-FPGA read curve rather than a
// datasheet rate: Xilinx's p2p_bandwidth example on xilinx_u2_gen3x4 reads
// 0.05 GB/s at 4 KB, 0.87 at 64 KB, 1.59 at 1 MB and 2.36 GB/s at 128 MB
// (interpolated in log size: the sweep doubles the size at each step), and
// writes about 1.04 GB/s. These are single-stream figures, so queue depth does
// not enter; a calibration curve replaces them.
#include <cmath>

#include "models/media.h"

namespace kvtier {

class SmartSsd : public DeviceModel {
 public:
  static Curve default_read_curve() {
    return Curve({{4096, 0.05}, {65536, 0.87}, {1048576, 1.59}, {134217728, 2.36}}, Curve::Interp::LogX,
                 "smartssd default read curve");
  }
  static ParamList params() {
    return {
        positive("capacity_GB", 3840.0, "NAND capacity available to KV, decimal GB"),
        positive("write_GBps", 1.04, "write bandwidth into the NAND, GB/s (measured, p2p_bandwidth)"),
        num("latency_us", 90.0, "per-I/O read latency, microseconds", 0),
        num("rated_TBW", 5466.0, "rated endurance, TB written (PM983-class 3.84 TB: 5,466 TBW)", 0),
        num("write_amplification", 1.0, "NAND bytes per host byte, relative to the TBW rating's workload", 1.0),
        curves_param(MediaCurves::names()),
    };
  }
  explicit SmartSsd(const json& p)
      : cap_(get_num(p, "capacity_GB") * kGB),
        lat_(get_num(p, "latency_us") * kUs),
        tbw_(get_num(p, "rated_TBW") * 1e12),
        waf_(get_num(p, "write_amplification")) {
    MediaCurves given(p, false);
    Curve rd = given.has_read() ? given.read_curve() : default_read_curve().scaled(kGB);
    Curve wr = given.has_write() ? given.write_curve() : Curve({{1, get_num(p, "write_GBps") * kGB}});
    curves_ = MediaCurves(rd, wr, false);
  }
  DeviceRole role() const override { return DeviceRole::Storage; }
  double capacity_bytes() const override { return cap_; }
  double read_Bps() const override { return curves_.read_Bps(0); }
  double write_Bps() const override { return curves_.write_Bps(0); }
  double media_latency_s() const override { return lat_; }
  bool media_shared() const override { return false; }
  double read_efficiency(double s, int) const override { return curves_.read_efficiency(s, read_Bps()); }
  double write_efficiency(double s, int) const override { return curves_.write_efficiency(s, write_Bps()); }
  double rated_endurance_bytes() const override { return tbw_; }
  double write_amplification() const override { return waf_; }

 private:
  double cap_, lat_, tbw_, waf_;
  MediaCurves curves_;
};
KVTIER_REGISTER(DeviceModel, SmartSsd, "smartssd",
                "Samsung SmartSSD NAND behind its FPGA: measured SSD-to-FPGA read curve, write rate, endurance");

}  // namespace kvtier
