// Host DRAM: capacity and a bus whose reads and writes share one bandwidth.
// The bandwidth is either given or computed as channels x MT/s x 8 bytes (a
// DDR4/DDR5 channel is 64 data bits: DDR4-3200 = 25.6 GB/s per channel),
// times a sustained-to-peak efficiency (STREAM reaches ~70-85% of peak).
#include <cmath>

#include "models/media.h"

namespace kvtier {

class Dram : public BusMemory {
 public:
  static ParamList params() {
    return {
        positive("capacity_GB", nullptr, "capacity available to KV, decimal GB"),
        num("bandwidth_GBps", 0.0, "bus bandwidth, reads and writes together, GB/s; 0 = channels x MTps x 8 B", 0),
        integer("channels", 0, "memory channels populated (with MTps, instead of bandwidth_GBps)", 0),
        num("MTps", 0.0, "transfer rate per channel, MT/s (DDR4-3200 = 3200)", 0),
        num("efficiency", 1.0, "sustained / peak bandwidth (STREAM-like), applied to either form", 0.01, 1.0),
        num("latency_us", 0.1, "access latency, microseconds", 0),
        curves_param(MediaCurves::names()),
    };
  }
  explicit Dram(const json& p)
      : BusMemory(p, get_num(p, "capacity_GB") * kGB, bandwidth(p), bandwidth(p), get_num(p, "latency_us") * kUs, true) {}

 private:
  static double bandwidth(const json& p) {
    double given = get_num(p, "bandwidth_GBps") * kGB;
    double computed = static_cast<double>(get_int(p, "channels")) * get_num(p, "MTps") * 1e6 * 8.0;
    if (given > 0 && computed > 0) throw ConfigError("bandwidth_GBps: give bandwidth_GBps or channels + MTps, not both");
    if (!(given > 0) && !(computed > 0))
      throw ConfigError("bandwidth_GBps: required; give bandwidth_GBps > 0 or channels and MTps > 0");
    return (given > 0 ? given : computed) * get_num(p, "efficiency");
  }
};
KVTIER_REGISTER(DeviceModel, Dram, "dram",
                "host DRAM: capacity, shared read/write bus (given, or channels x MT/s x 8 B), latency");

}  // namespace kvtier
