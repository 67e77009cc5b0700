// A host CPU as a compute device: importance scoring (HillInfer's f_c) and
// decompression. Scoring is the raw Q.K^T over quantized keys: each core
// sustains a rate of key elements per second (SIMD-bound), so bytes of keys
// per second scale with the key precision, until the socket's memory
// bandwidth caps them. Attention over KV in host memory (FlexGen's CPU
// attention) is bound by the cores' FLOP/s or by the memory bandwidth the
// cores see (models/cpu_attention.h).
#include <algorithm>

#include "models/device.h"

namespace kvtier {

class Cpu : public DeviceModel {
 public:
  static ParamList params() {
    return {
        integer("cores", 16, "cores available to the simulator's CPU work", 1),
        positive("fp32_GFLOPS_per_core", 50.0, "FP32 throughput per core, GFLOP/s"),
        num("scoring_GBps_per_core", 1.0,
            "importance scoring per core with INT8 keys, GB of keys/s (profile offline; 0 = does not score)", 0),
        num("scoring_max_GBps", 0.0, "memory-bandwidth cap on scoring over all cores, GB/s (0 = none)", 0),
        num("memory_GBps", 0.0,
            "memory bandwidth the cores see for attention over host-resident KV, GB/s (0 = the host memory device's)", 0),
    };
  }
  explicit Cpu(const json& p)
      : cores_(static_cast<double>(get_int(p, "cores"))),
        flops_(cores_ * get_num(p, "fp32_GFLOPS_per_core") * 1e9),
        score_core_(get_num(p, "scoring_GBps_per_core") * kGB),
        score_cap_(get_num(p, "scoring_max_GBps") * kGB),
        mem_(get_num(p, "memory_GBps") * kGB) {}
  DeviceRole role() const override { return DeviceRole::Compute; }
  double flops() const override { return flops_; }
  int cores() const override { return static_cast<int>(cores_); }
  double memory_Bps() const override { return mem_; }
  double scoring_Bps(int bits) const override {
    double r = cores_ * score_core_ * bits / 8.0;
    return score_cap_ > 0 ? std::min(r, score_cap_) : r;
  }

 private:
  double cores_, flops_, score_core_, score_cap_, mem_;
};
KVTIER_REGISTER(DeviceModel, Cpu, "cpu", "host CPU: cores x per-core throughput, importance-scoring rate");

}  // namespace kvtier
