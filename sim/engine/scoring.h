// APP (HillInfer's adaptive placement of scoring): the keys of each layer
// are scored where they live, host memory on the CPU, the SmartSSD's on its
// FPGA, the GPU tier's on the GPU, with keys moved to the other side as the
// split asks; or, with near-storage attention, the SmartSSD's FPGA attends
// the drive's blocks in place. The FPGA's clock follows its temperature
// (the thermal model the setup holds). Owned by the layer pipeline; its
// jobs go into the layer's slot.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/counters.h"
#include "sim/core/engine_setup.h"
#include "sim/engine/layer_slot.h"
#include "sim/kv/kv_store.h"
#include "sim/platform/transfer_planner.h"

namespace kvtier {

class Platform;

class AppScoring {
 public:
  // Before the run: validates the hardware for `policy` (a CPU and an FPGA,
  // every tier below the GPU scorable) and binds devices, rates and the key
  // copy into `s`; ConfigError names what is missing.
  static void bind(EngineSetup& s, const BlockTable& table, const std::string& policy);
  // Once the platform exists: the closed form's path bandwidths, and the
  // device pairs scoring moves data between (streams to create).
  static void configure(EngineSetup& s, Platform& platform, std::vector<std::pair<size_t, size_t>>& pairs);

  AppScoring(EngineSetup& s, EngineCounters& c, const KvStore& kv, TransferPlanner& planner, JobBoard& board);
  // Scores layer `layer` of step `step` (`n` blocks per sequence) and adds
  // its jobs to `slot`; near-storage attention also takes the SmartSSD's
  // blocks out of `sel` (the drive attends them).
  void score(LayerSlot& slot, uint32_t step, uint32_t layer, uint32_t n, std::vector<BlockId>& sel);
  // When the layer's kernel may start: the time each side of its scoring took.
  void report(const LayerSlot& slot);

 private:
  static void bind_storage_attention(EngineSetup& s);  // the FPGA kernel, the drive's tier, the schedule
  void attend_in_storage(LayerSlot& slot, uint32_t step, uint32_t layer, std::vector<BlockId>& sel);
  // The share of the SmartSSD's keys its FPGA's memory holds (key_copy
  // fpga_dram; 0 otherwise), brought up to date.
  double key_copy_fit(double key_bytes_per_block);
  // A kernel of `nominal_s` on the FPGA at the clock its temperature allows; advances the thermal model.
  double fpga_kernel_s(double nominal_s);

  EngineSetup& s_;
  EngineCounters& c_;
  const KvStore& kv_;
  const BlockTable& t_;
  TransferPlanner& tp_;
  JobBoard& board_;
  double thermal_t_ = 0;  // when the FPGA's last kernel ends
};

}  // namespace kvtier
