// A GPU: compute (FP16 tensor throughput, memory bandwidth, kernel launch
// overhead) and device memory that can hold KV. Its memory sits behind its
// PCIe link, so it has no media link of its own: HBM/GDDR bandwidth (1-5 TB/s)
// is two orders above any link that feeds it and only matters to kernels.
#include "models/device.h"

namespace kvtier {

class Gpu : public DeviceModel {
 public:
  static ParamList params() {
    return {
        positive("capacity_GB", nullptr, "device memory, decimal GB"),
        num("reserved_GB", 1.0, "memory kept for activations and workspace, not for KV or weights", 0),
        positive("memory_GBps", nullptr, "memory bandwidth seen by kernels, GB/s"),
        positive("fp16_TFLOPS", nullptr, "dense FP16/BF16 tensor throughput, TFLOP/s"),
        num("launch_overhead_us", 5.0, "fixed cost per layer of kernel launches, microseconds", 0),
    };
  }
  explicit Gpu(const json& p)
      : capacity_(get_num(p, "capacity_GB") * kGB),
        reserved_(get_num(p, "reserved_GB") * kGB),
        mem_(get_num(p, "memory_GBps") * kGB),
        flops_(get_num(p, "fp16_TFLOPS") * 1e12),
        launch_(get_num(p, "launch_overhead_us") * kUs) {}
  DeviceRole role() const override { return DeviceRole::Compute; }
  bool holds_kv() const override { return true; }
  // What remains for KV and weights; the engine subtracts the weights.
  double capacity_bytes() const override { return capacity_ - reserved_; }
  double flops() const override { return flops_; }
  double memory_Bps() const override { return mem_; }
  double launch_overhead_s() const override { return launch_; }

 private:
  double capacity_, reserved_, mem_, flops_, launch_;
};
KVTIER_REGISTER(DeviceModel, Gpu, "gpu", "GPU: compute plus device memory usable as the top KV tier");

}  // namespace kvtier
