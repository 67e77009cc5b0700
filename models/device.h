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

enum class DeviceRole { Switch, Memory, Storage, Compute };

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
};
KVTIER_REGISTRY_FAMILY(DeviceModel, "device kind")

constexpr double kGB = 1e9;  // configs use decimal units: 1 GB = 1e9 bytes, 1 GB/s = 1e9 B/s
constexpr double kUs = 1e-6;

}  // namespace kvtier
