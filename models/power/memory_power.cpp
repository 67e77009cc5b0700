// Memory as a KV tier (DRAM, CXL expanders, HBM and GDDR used as tiers):
// background power per GB of capacity (refresh and standby) over the whole
// run, a controller's own power (a CXL expander's), and energy per bit read
// or written through the device's media.
#include "models/power/power_model.h"

namespace kvtier {

struct MemoryPowerDefaults {
  double W_per_GB, controller_W, pJ_per_bit;
};

template <const MemoryPowerDefaults& D>
class MemoryPower : public PowerModel {
 public:
  static ParamList params() {
    return {
        num("background_W_per_GB", D.W_per_GB, "standby and refresh power per GB of capacity, W", 0),
        num("controller_W", D.controller_W, "power of the device's own controller, W (a CXL expander's)", 0),
        num("access_pJ_per_bit", D.pJ_per_bit, "energy per bit read or written, pJ", 0),
    };
  }
  explicit MemoryPower(const json& p)
      : per_GB_(get_num(p, "background_W_per_GB")),
        ctrl_(get_num(p, "controller_W")),
        access_(get_num(p, "access_pJ_per_bit") * kPJ * 8) {}
  void bind(const json&, const DeviceModel& m) override { idle_ = ctrl_ + per_GB_ * m.capacity_bytes() / kGB; }
  double idle_W() const override { return idle_; }
  DeviceEnergy energy(const DeviceActivity& a) const override {
    return {idle_ * a.run_s, 0, access_ * (a.read_bytes + a.write_bytes)};
  }

 private:
  double per_GB_, ctrl_, access_;  // W/GB, W, J per byte
  double idle_ = 0;
};

// Figures and their sources: docs/sources.md ("Power and energy").
constexpr MemoryPowerDefaults kDdr{0.1, 0.0, 20.0};
constexpr MemoryPowerDefaults kCxl{0.1, 8.0, 25.0};
constexpr MemoryPowerDefaults kHbm{0.0, 0.0, 3.9};    // its background is in the GPU's idle power
constexpr MemoryPowerDefaults kGddr{0.0, 0.0, 7.25};  // likewise
using DramPower = MemoryPower<kDdr>;
using CxlPower = MemoryPower<kCxl>;
using HbmPower = MemoryPower<kHbm>;
using GddrPower = MemoryPower<kGddr>;
KVTIER_REGISTER(PowerModel, DramPower, "dram", "host DRAM: background per GB, energy per bit accessed");
KVTIER_REGISTER(PowerModel, CxlPower, "cxl", "CXL memory expander: background per GB, controller, energy per bit accessed");
KVTIER_REGISTER(PowerModel, HbmPower, "hbm", "HBM as a KV tier: energy per bit accessed (background in the GPU's idle power)");
KVTIER_REGISTER(PowerModel, GddrPower, "gddr", "GDDR as a KV tier: energy per bit accessed (background in the GPU's idle power)");

}  // namespace kvtier
