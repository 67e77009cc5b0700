// Host DRAM: capacity and a bus whose reads and writes share one bandwidth
// (channels x per-channel rate, e.g. DDR4-3200 = 25.6 GB/s per channel).
#include "models/device.h"

namespace kvtier {

class Dram : public DeviceModel {
 public:
  static ParamList params() {
    return {
        positive("capacity_GB", nullptr, "capacity available to KV, decimal GB"),
        positive("bandwidth_GBps", nullptr, "bus bandwidth, reads and writes together, GB/s"),
        num("latency_us", 0.1, "access latency, microseconds", 0),
    };
  }
  explicit Dram(const json& p)
      : cap_(get_num(p, "capacity_GB") * kGB), bw_(get_num(p, "bandwidth_GBps") * kGB), lat_(get_num(p, "latency_us") * kUs) {}
  DeviceRole role() const override { return DeviceRole::Memory; }
  double capacity_bytes() const override { return cap_; }
  double read_Bps() const override { return bw_; }
  double write_Bps() const override { return bw_; }
  double media_latency_s() const override { return lat_; }

 private:
  double cap_, bw_, lat_;
};
KVTIER_REGISTER(DeviceModel, Dram, "dram", "host DRAM: capacity, shared read/write bus bandwidth, latency");

}  // namespace kvtier
