// The SmartSSD's KU15P: static power over the run and dynamic power while its
// kernels run, both the thermal model's figures (idle_W, load_W at the
// nominal clock, declared once in models/thermal.h), the dynamic part scaled
// by the clock: the share of the run spent throttled ran at the throttled clock.
#include "models/fpga_ku15p.h"
#include "models/power/power_model.h"
#include "models/thermal.h"

namespace kvtier {

class FpgaPower : public PowerModel {
 public:
  static ParamList params() { return {}; }
  explicit FpgaPower(const json&) {}
  void bind(const json&, const DeviceModel& m) override {
    if (const ThermalParams* t = fpga_thermal(m)) th_ = *t;
  }
  double idle_W() const override { return th_.idle_W; }
  DeviceEnergy energy(const DeviceActivity& a) const override {
    const double f = a.throttled_fraction;
    const double clock = (1 - f) + f * th_.throttled_clock_MHz / th_.nominal_clock_MHz;
    return {th_.idle_W * a.run_s, (th_.load_W - th_.idle_W) * clock * a.work_s, 0};
  }

 private:
  ThermalParams th_;
};
KVTIER_REGISTER(PowerModel, FpgaPower, "ku15p",
                "KU15P FPGA: the thermal model's idle_W and load_W, the dynamic part scaled by the clock");

}  // namespace kvtier
