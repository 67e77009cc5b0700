// Device models. A device kind ("gpu", "dram", "nvme", ...) is a class that
// registers itself by name; the hardware config picks kinds by name and the
// kind's ParamList validates the device's JSON object.
//
// The engine sees a device through this interface only: its role, its KV
// capacity, its media (the device's own read/write path, which the platform
// turns into links in front of the device) and, for compute devices, its
// throughput.
#pragma once

#include <cstdint>
#include <string>

#include "models/registry.h"

namespace kvtier {

// Network: a network adapter, where a node meets the cluster fabric (a
// transfer endpoint with no memory and no compute of its own).
enum class DeviceRole { Switch, Memory, Storage, Compute, Network };

class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
  virtual DeviceRole role() const = 0;

  // Memory and storage (and GPUs, whose memory can hold KV).
  virtual double capacity_bytes() const { return 0; }
  virtual bool holds_kv() const { return role() == DeviceRole::Memory || role() == DeviceRole::Storage; }
  // The media path. Zero bandwidth means "no media link": the device is as fast
  // as whatever connects to it (a GPU's HBM behind PCIe).
  virtual double read_Bps() const { return 0; }
  virtual double write_Bps() const { return 0; }
  virtual double media_latency_s() const { return 0; }
  // True: reads and writes share one bandwidth (a DRAM bus); false: separate
  // read and write paths (flash read and program run largely independently).
  virtual bool media_shared() const { return true; }
  virtual bool is_storage() const { return role() == DeviceRole::Storage; }

  // Compute (GPU, CPU, FPGA).
  virtual double flops() const { return 0; }           // dense FP16 FLOP/s
  virtual double memory_Bps() const { return 0; }      // bandwidth seen by kernels
  virtual double launch_overhead_s() const { return 0; }
  // How many cores share flops() (a CPU's): work on fewer threads than
  // cores runs at that share of the device, and concurrent work shares it.
  virtual int cores() const { return 1; }
  // GPUs: how many copy engines serve copies between this device and host-side
  // memory, per direction. 0: not modelled (copies from different sources run
  // at once and share the links); 1: they run one after the other, as
  // measured on an H200 (two concurrent 256 MiB H2D cudaMemcpyAsync finished
  // at 1x and 2x the solo time, docs/validation.md).
  virtual int copy_engines() const { return 0; }
  // Sustained FLOP/s of a layer's GEMMs (through the weights) and of its
  // attention's batched matmuls, in prefill and in decode, where they were
  // measured or fitted apart (FlexGen's cost model fits four such rates on a
  // T4); 0 = not given: one roofline over the whole layer at flops().
  struct KernelRates {
    double prefill_gemm = 0, decode_gemm = 0, prefill_attention = 0, decode_attention = 0;
    bool split() const { return prefill_gemm + decode_gemm + prefill_attention + decode_attention > 0; }
  };
  virtual KernelRates kernel_rates() const { return {}; }
  // One decode attention kernel over `kv_bytes` of KV (all heads, one layer):
  // memory-bound, so launch overhead plus bytes over memory bandwidth, or a
  // calibrated curve where the device has one. See models/gpu_compute.h for
  // whole layers.
  virtual double attention_s(double kv_bytes) const {
    return memory_Bps() > 0 ? launch_overhead_s() + kv_bytes / memory_Bps() : 0;
  }

  // Size and depth dependence of the media path: the fraction (0, 1] of
  // read_Bps()/write_Bps() that a transfer issued as requests of
  // `request_bytes` with `queue_depth` of them outstanding achieves. The engine
  // applies it as a SimGrid bandwidth factor on the media link. It already
  // includes the per-I/O latency of every request after the first, so a 4 KB
  // read at depth 1 comes out latency-bound; media_latency_s() stays the
  // first-byte latency of the whole transfer.
  virtual double read_efficiency(double /*request_bytes*/, int /*queue_depth*/) const { return 1.0; }
  virtual double write_efficiency(double /*request_bytes*/, int /*queue_depth*/) const { return 1.0; }

  // Importance scoring (the raw Q.K^T of HillInfer's APP): bytes of keys
  // scored per second with keys quantized to `bits` (4, 8 or 16). 0: this
  // device does not score.
  virtual double scoring_Bps(int /*bits*/) const { return 0; }

  // Flash endurance: host bytes the device is rated to absorb (its TBW; 0 =
  // not flash or unknown) and the write amplification that turns host bytes
  // into NAND bytes. See models/flash_wear.h for the running account.
  virtual double rated_endurance_bytes() const { return 0; }
  virtual double write_amplification() const { return 1.0; }
};
KVTIER_REGISTRY_FAMILY(DeviceModel, "device kind")

constexpr double kGB = 1e9;  // configs use decimal units: 1 GB = 1e9 bytes, 1 GB/s = 1e9 B/s
constexpr double kUs = 1e-6;

}  // namespace kvtier
