// A host CPU's power: the package's idle power over the run, and per busy
// core its share of the rest of its TDP ((tdp - idle) / cores for each core
// working). The CPU's work is the jobs the run put on it (decompression,
// importance scoring, attention on the CPU).
#include "models/power/power_model.h"

namespace kvtier {

class CpuPower : public PowerModel {
 public:
  static ParamList params() {
    return {
        num("idle_W", 50.0, "package power with every core idle, W", 0),
        num("tdp_W", 200.0, "package power with every core busy (TDP), W", 0),
    };
  }
  explicit CpuPower(const json& p) : idle_(get_num(p, "idle_W")), tdp_(get_num(p, "tdp_W")) {
    if (tdp_ < idle_) throw ConfigError("tdp_W: below idle_W");
  }
  double idle_W() const override { return idle_; }
  // work_s is in seconds of the whole CPU: all its cores busy for work_s.
  DeviceEnergy energy(const DeviceActivity& a) const override { return {idle_ * a.run_s, (tdp_ - idle_) * a.work_s, 0}; }

 private:
  double idle_, tdp_;
};
KVTIER_REGISTER(PowerModel, CpuPower, "cpu", "host CPU: package idle power, TDP with every core busy (shared out per busy core)");

}  // namespace kvtier
