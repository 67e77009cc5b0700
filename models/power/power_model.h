// Power models, one per device kind, registered under the kind's name (a
// "gpu" device gets the "gpu" power model). A device's `power` object holds
// the model's parameters; absent ones take the kind's defaults, each sourced
// in docs/sources.md. The model turns what the device did in a run (its
// activity: busy time, bytes through its media and ports) into joules, so
// energy follows the same activity the timeline shows and cannot disagree
// with the time model. sim/engine/energy_metrics.h gathers the activity.
#pragma once

#include <memory>
#include <string>

#include "models/device.h"
#include "models/registry.h"

namespace kvtier {

// What one device did over a run of `run_s` seconds.
struct DeviceActivity {
  double run_s = 0;
  // Work executed on the device, in seconds of the whole device at full
  // speed (a CPU job of 2 s on 4 of 36 cores counts 2 x 4 / 36): busy time
  // for a GPU's compute stream, busy cores for a CPU.
  double work_s = 0;
  // Bytes through the device's own media: read from it and written to it
  // (a device whose reads and writes share one bus has them added in read_bytes).
  double read_bytes = 0, write_bytes = 0;
  // Bytes that crossed the links ending at the device, either way (copies
  // into and out of a GPU's memory).
  double port_bytes = 0;
  // Share of the run the device's clock was throttled (an FPGA's thermal model).
  double throttled_fraction = 0;
};

// Joules, split by what they are for.
struct DeviceEnergy {
  double idle_J = 0;     // background power over the whole run
  double active_J = 0;   // above idle while computing
  double traffic_J = 0;  // per byte moved, read, written or programmed
  double total_J() const { return idle_J + active_J + traffic_J; }
};

class PowerModel {
 public:
  virtual ~PowerModel() = default;
  // Reads what the model needs of its device (cores, capacity, drives,
  // clocks); `device` is the device's resolved JSON object.
  virtual void bind(const json& /*device*/, const DeviceModel& /*model*/) {}
  // Power drawn by the idle device, W (what a run with no activity costs per second).
  virtual double idle_W() const = 0;
  virtual DeviceEnergy energy(const DeviceActivity& a) const = 0;
};
KVTIER_REGISTRY_FAMILY(PowerModel, "power model")

// The power model of a device of `kind`: validates `power` (at `where`, the
// object filled with defaults in place; created when null) against the kind's
// parameters and binds it to the device.
std::unique_ptr<PowerModel> make_power_model(const std::string& kind, json& power, const json& device,
                                             const DeviceModel& model, const std::string& where);

constexpr double kPJ = 1e-12;  // picojoule
constexpr double kNJ = 1e-9;   // nanojoule

}  // namespace kvtier
