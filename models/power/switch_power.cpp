// A PCIe switch chip's power over the run; a root complex is part of the CPU.
#include "models/power/power_model.h"

namespace kvtier {

class SwitchPower : public PowerModel {
 public:
  static ParamList params() {
    return {num("idle_W", 0.0, "power of the switch chip, W (0: a root complex, whose power is the CPU's)", 0)};
  }
  explicit SwitchPower(const json& p) : idle_(get_num(p, "idle_W")) {}
  double idle_W() const override { return idle_; }
  DeviceEnergy energy(const DeviceActivity& a) const override { return {idle_ * a.run_s, 0, 0}; }

 private:
  double idle_;
};
KVTIER_REGISTER(PowerModel, SwitchPower, "switch", "PCIe switch: its chip's power (0 for a root complex)");

}  // namespace kvtier
