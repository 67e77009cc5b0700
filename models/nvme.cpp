// An NVMe SSD as the foundation models it: separate sequential read and write
// bandwidths (flash reads and programs proceed largely independently) and a
// per-I/O latency. Request-size and queue-depth curves come with the device
// models issue.
#include "models/device.h"

namespace kvtier {

class Nvme : public DeviceModel {
 public:
  static ParamList params() {
    return {
        positive("capacity_GB", nullptr, "capacity available to KV, decimal GB"),
        positive("read_GBps", nullptr, "sequential read bandwidth, GB/s"),
        positive("write_GBps", nullptr, "sequential write bandwidth, GB/s"),
        num("latency_us", 80.0, "per-I/O latency, microseconds", 0),
    };
  }
  explicit Nvme(const json& p)
      : cap_(get_num(p, "capacity_GB") * kGB),
        rd_(get_num(p, "read_GBps") * kGB),
        wr_(get_num(p, "write_GBps") * kGB),
        lat_(get_num(p, "latency_us") * kUs) {}
  DeviceRole role() const override { return DeviceRole::Storage; }
  double capacity_bytes() const override { return cap_; }
  double read_Bps() const override { return rd_; }
  double write_Bps() const override { return wr_; }
  double media_latency_s() const override { return lat_; }
  bool media_shared() const override { return false; }

 private:
  double cap_, rd_, wr_, lat_;
};
KVTIER_REGISTER(DeviceModel, Nvme, "nvme", "NVMe SSD: capacity, read/write bandwidth, per-I/O latency");

}  // namespace kvtier
