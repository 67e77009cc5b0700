// A GPU: compute (FP16 tensor throughput, memory bandwidth, kernel launch
// overhead) and device memory that can hold KV. Its memory sits behind its
// PCIe link, so it has no media link of its own: HBM/GDDR bandwidth (1-5 TB/s)
// is two orders above any link that feeds it and only matters to kernels.
// Datasheet peaks are rarely reached; the two efficiencies turn them into
// sustained rates (H200 measured here: ~4.3 of 4.8 TB/s copy, ~790 of 989
// TFLOP/s bf16 matmul), and an "attention_us" curve against KV bytes replaces
// the bandwidth model of the attention kernel outright.
#include "models/calibration.h"
#include "models/device.h"

namespace kvtier {

class Gpu : public DeviceModel {
 public:
  static ParamList params() {
    return {
        positive("capacity_GB", nullptr, "device memory, decimal GB"),
        num("reserved_GB", 1.0, "memory kept for activations and workspace, not for KV or weights", 0),
        positive("memory_GBps", nullptr, "memory bandwidth (datasheet), GB/s"),
        positive("fp16_TFLOPS", nullptr, "dense FP16/BF16 tensor throughput (datasheet), TFLOP/s"),
        num("launch_overhead_us", 5.0, "fixed cost per layer of kernel launches, microseconds", 0),
        num("memory_efficiency", 1.0, "sustained / datasheet memory bandwidth seen by kernels", 0.01, 1.0),
        num("flops_efficiency", 1.0, "sustained / datasheet tensor throughput", 0.001, 1.0),
        integer("copy_engines", 0,
                "copy engines per direction for copies with host-side memory: 0 = not modelled (concurrent copies "
                "share the link), 1 = serialised (measured on H200)", 0, 1),
        num("prefill_gemm_TFLOPS", 0.0,
            "sustained FLOP/s of prefill GEMMs, TFLOP/s, as measured or fitted (not scaled by flops_efficiency); "
            "0 = fp16_TFLOPS x flops_efficiency. Any of the four rates set: a layer takes launch + max(GEMM FLOPs / "
            "rate, weight bytes / bandwidth) + max(attention FLOPs / rate, KV read time), not one roofline", 0),
        num("decode_gemm_TFLOPS", 0.0, "sustained FLOP/s of decode GEMMs (few rows), TFLOP/s; 0 = as above", 0),
        num("prefill_attention_TFLOPS", 0.0, "sustained FLOP/s of prefill attention's batched matmuls, TFLOP/s; 0 = as above", 0),
        num("decode_attention_TFLOPS", 0.0, "sustained FLOP/s of decode attention's batched matmuls, TFLOP/s; 0 = as above", 0),
        curves_param({"attention_us"}),
    };
  }
  explicit Gpu(const json& p)
      : capacity_(get_num(p, "capacity_GB") * kGB),
        reserved_(get_num(p, "reserved_GB") * kGB),
        mem_(get_num(p, "memory_GBps") * kGB * get_num(p, "memory_efficiency")),
        flops_(get_num(p, "fp16_TFLOPS") * 1e12 * get_num(p, "flops_efficiency")),
        launch_(get_num(p, "launch_overhead_us") * kUs),
        copy_engines_(static_cast<int>(get_int(p, "copy_engines"))) {
    rates_.prefill_gemm = get_num(p, "prefill_gemm_TFLOPS") * 1e12;
    rates_.decode_gemm = get_num(p, "decode_gemm_TFLOPS") * 1e12;
    rates_.prefill_attention = get_num(p, "prefill_attention_TFLOPS") * 1e12;
    rates_.decode_attention = get_num(p, "decode_attention_TFLOPS") * 1e12;
    CurveSet cs = parse_curve_set(p, {"attention_us"}, "");
    if (cs.count("attention_us")) attention_ = cs["attention_us"].scaled(kUs);
  }
  DeviceRole role() const override { return DeviceRole::Compute; }
  bool holds_kv() const override { return true; }
  // What remains for KV and weights; the engine subtracts the weights.
  double capacity_bytes() const override { return capacity_ - reserved_; }
  double flops() const override { return flops_; }
  double memory_Bps() const override { return mem_; }
  double launch_overhead_s() const override { return launch_; }
  int copy_engines() const override { return copy_engines_; }
  KernelRates kernel_rates() const override { return rates_; }
  double attention_s(double kv_bytes) const override {
    return attention_.empty() ? DeviceModel::attention_s(kv_bytes) : attention_(kv_bytes);
  }

 private:
  double capacity_, reserved_, mem_, flops_, launch_;
  int copy_engines_;
  KernelRates rates_;
  Curve attention_;
};
KVTIER_REGISTER(DeviceModel, Gpu, "gpu", "GPU: compute plus device memory usable as the top KV tier");

}  // namespace kvtier
