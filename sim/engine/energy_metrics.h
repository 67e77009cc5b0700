// Energy and cost of a run, from the activity the run already accounts for:
// each device's work (Platform::work_s: kernels, CPU and FPGA jobs), the bytes
// through each link direction and each device's media (Platform::stats), the
// run's length, and the flash's wear. Each device's power model
// (models/power/) turns its activity into joules; links charge their energy
// per byte. Both engines report "energy" and "cost" through
// energy_cost_metrics, so the two cannot count differently.
//
// SimGrid's host and link energy plugins are not used: they charge a host by
// its load and a link by its bandwidth in use, whereas the drives here cost
// per byte read and per NAND byte programmed (the device's write
// amplification), a GPU per byte copied into its memory, an FPGA at the share
// of its clock its thermal model left it; and they would have to be set up in
// sim/platform/ before the platform exists, for figures the run's counts
// already give.
#pragma once

#include <vector>

#include "models/hardware.h"
#include "models/power/power_model.h"
#include "sim/platform/platform.h"

namespace kvtier {

struct EnergyTotals {
  std::vector<DeviceEnergy> devices;  // by device
  std::vector<double> link_J;         // by LinkStat (0 for media links and shared constraints)
  double total_J = 0;
};

// Each device's activity over `run_s` seconds, given each LinkStat's bytes
// (`link_bytes`, in `stats` order) and each device's work (`work_s`).
std::vector<DeviceActivity> device_activity(const Hardware& hw, const std::vector<LinkStat>& stats,
                                            const std::vector<double>& link_bytes, const std::vector<double>& work_s,
                                            double run_s, double throttled_fraction);
// The joules of that activity.
EnergyTotals integrate_energy(const Hardware& hw, const std::vector<LinkStat>& stats,
                              const std::vector<double>& link_bytes, const std::vector<double>& work_s, double run_s,
                              double throttled_fraction);

// Each LinkStat's bytes so far (for a snapshot of the activity at some time).
std::vector<double> link_bytes_now(const Platform& platform);

// What a run knows besides the platform's counts.
struct EnergyRun {
  double end_s = 0;
  double generated_tokens = 0;  // tokens out
  double requests = 0;          // serving: requests served (0: not reported)
  // The prefill phase, where the run has one apart: its end and the
  // activity then (empty: no phase apart), and the prompt tokens it took in.
  double prefill_end_s = 0, prefill_tokens = 0;
  std::vector<double> work_at_prefill_end, bytes_at_prefill_end;
  double throttled_s = 0;  // the FPGA's time at its throttled clock
  // Flash wear per storage device: its share of rated endurance used in the run.
  struct Wear {
    size_t device = 0;
    double life_used = 0;
  };
  std::vector<Wear> wear;
};

// {"energy": ..., "cost": ...}: the keys are the contract in docs/results.md.
json energy_cost_metrics(const Hardware& hw, const Platform& platform, const EnergyRun& run);

}  // namespace kvtier
