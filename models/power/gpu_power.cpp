// A GPU's power: idle power over the whole run, the rest up to its board
// power while its compute stream is busy, and its device memory's energy per
// bit for the copies into and out of it. A kernel's own memory traffic is in
// the board power it draws while busy (a datasheet's board power is measured
// with the memory working), so only copies are charged per byte.
#include "models/power/power_model.h"

namespace kvtier {

class GpuPower : public PowerModel {
 public:
  static ParamList params() {
    return {
        num("idle_W", 70.0, "power with nothing running, W", 0),
        num("busy_W", 700.0, "board power while the compute stream is busy, W (the datasheet's maximum board power)", 0),
        num("memory_pJ_per_bit", 3.9, "device memory energy per bit a copy writes into it or reads out of it, pJ", 0),
    };
  }
  explicit GpuPower(const json& p)
      : idle_(get_num(p, "idle_W")), busy_(get_num(p, "busy_W")), mem_(get_num(p, "memory_pJ_per_bit") * kPJ * 8) {
    if (busy_ < idle_) throw ConfigError("busy_W: below idle_W");
  }
  double idle_W() const override { return idle_; }
  DeviceEnergy energy(const DeviceActivity& a) const override {
    return {idle_ * a.run_s, (busy_ - idle_) * a.work_s, mem_ * a.port_bytes};
  }

 private:
  double idle_, busy_, mem_;  // W, W, J per byte
};
KVTIER_REGISTER(PowerModel, GpuPower, "gpu", "GPU: idle power, board power while computing, device memory energy per copied bit");

}  // namespace kvtier
