// A network adapter's power over the run: its board power, drawn whether or
// not it moves data (the fabric links carry no energy of their own in this
// model).
#include "models/power/power_model.h"

namespace kvtier {

class NicPower : public PowerModel {
 public:
  static ParamList params() { return {num("idle_W", 0.0, "power of the adapter, W", 0)}; }
  explicit NicPower(const json& p) : idle_(get_num(p, "idle_W")) {}
  double idle_W() const override { return idle_; }
  DeviceEnergy energy(const DeviceActivity& a) const override { return {idle_ * a.run_s, 0, 0}; }

 private:
  double idle_;
};
KVTIER_REGISTER(PowerModel, NicPower, "nic", "network adapter: its board power");

}  // namespace kvtier
