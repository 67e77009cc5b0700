// GPU-class device memory (HBM stacks, or a GDDR bus) as a KV tier of its own:
// a second GPU's memory reached over NVLink/PCIe, or a memory pool modelled
// apart from the GPU that computes. The GPU kind already includes its own
// memory; use these when the memory is a separate place KV can live.
// Bandwidth is either given or built from the part's organisation, the way
// datasheets derive it: HBM = stacks x per-stack GB/s; GDDR = bus bits x
// per-pin Gb/s / 8 (RTX 4090: 384 x 21 / 8 = 1008 GB/s).
#include <cmath>

#include "models/media.h"

namespace kvtier {

class Hbm : public BusMemory {
 public:
  static ParamList params() {
    return {
        positive("capacity_GB", nullptr, "capacity available to KV, decimal GB"),
        num("bandwidth_GBps", 0.0, "total bandwidth, GB/s; 0 = stacks x stack_GBps", 0),
        integer("stacks", 0, "HBM stacks (with stack_GBps)", 0),
        num("stack_GBps", 0.0, "bandwidth per stack, GB/s (HBM3 ~819 at 6.4 Gb/s/pin)", 0),
        num("latency_us", 0.5, "access latency seen by a copy engine, microseconds", 0),
        curves_param(MediaCurves::names()),
    };
  }
  explicit Hbm(const json& p)
      : BusMemory(p, get_num(p, "capacity_GB") * kGB, bandwidth(p), bandwidth(p), get_num(p, "latency_us") * kUs, true) {}

 private:
  static double bandwidth(const json& p) {
    double given = get_num(p, "bandwidth_GBps") * kGB;
    double computed = static_cast<double>(get_int(p, "stacks")) * get_num(p, "stack_GBps") * kGB;
    if ((given > 0) == (computed > 0))
      throw ConfigError("bandwidth_GBps: give exactly one of bandwidth_GBps or stacks + stack_GBps");
    return given > 0 ? given : computed;
  }
};
KVTIER_REGISTER(DeviceModel, Hbm, "hbm", "HBM device memory as a KV tier: capacity, stacks x per-stack bandwidth");

class Gddr : public BusMemory {
 public:
  static ParamList params() {
    return {
        positive("capacity_GB", nullptr, "capacity available to KV, decimal GB"),
        num("bandwidth_GBps", 0.0, "total bandwidth, GB/s; 0 = bus_bits x Gbps_per_pin / 8", 0),
        integer("bus_bits", 0, "memory bus width in bits (with Gbps_per_pin)", 0),
        num("Gbps_per_pin", 0.0, "data rate per pin, Gb/s (GDDR6X on RTX 4090: 21)", 0),
        num("latency_us", 0.5, "access latency seen by a copy engine, microseconds", 0),
        curves_param(MediaCurves::names()),
    };
  }
  explicit Gddr(const json& p)
      : BusMemory(p, get_num(p, "capacity_GB") * kGB, bandwidth(p), bandwidth(p), get_num(p, "latency_us") * kUs, true) {}

 private:
  static double bandwidth(const json& p) {
    double given = get_num(p, "bandwidth_GBps") * kGB;
    double computed = static_cast<double>(get_int(p, "bus_bits")) * get_num(p, "Gbps_per_pin") * 1e9 / 8.0;
    if ((given > 0) == (computed > 0))
      throw ConfigError("bandwidth_GBps: give exactly one of bandwidth_GBps or bus_bits + Gbps_per_pin");
    return given > 0 ? given : computed;
  }
};
KVTIER_REGISTER(DeviceModel, Gddr, "gddr", "GDDR device memory as a KV tier: capacity, bus bits x per-pin rate");

}  // namespace kvtier
