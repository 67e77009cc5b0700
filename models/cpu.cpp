// A host CPU as a compute device (importance scoring, decompression).
#include "models/device.h"

namespace kvtier {

class Cpu : public DeviceModel {
 public:
  static ParamList params() {
    return {
        integer("cores", 16, "cores available to the simulator's CPU work", 1),
        positive("fp32_GFLOPS_per_core", 50.0, "FP32 throughput per core, GFLOP/s"),
    };
  }
  explicit Cpu(const json& p) : flops_(get_int(p, "cores") * get_num(p, "fp32_GFLOPS_per_core") * 1e9) {}
  DeviceRole role() const override { return DeviceRole::Compute; }
  double flops() const override { return flops_; }

 private:
  double flops_;
};
KVTIER_REGISTER(DeviceModel, Cpu, "cpu", "host CPU: cores x per-core throughput");

}  // namespace kvtier
