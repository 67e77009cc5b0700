// Flash drives (NVMe, the SmartSSD's NAND side): each drive's idle power over
// the run, energy per byte read, and energy per byte programmed into the NAND
// (host bytes x the device's write amplification, as the wear account counts
// them). Erase energy is part of the program figure: the drives' active-write
// power it is derived from includes the garbage collection that erases.
#include "models/power/power_model.h"

namespace kvtier {

struct FlashPowerDefaults {
  double idle_W, read_nJ_per_byte, program_nJ_per_byte;
};

template <const FlashPowerDefaults& D>
class FlashPower : public PowerModel {
 public:
  static ParamList params() {
    return {
        num("idle_W", D.idle_W, "one drive's power when idle, W (a RAID-0 draws it per member)", 0),
        num("read_nJ_per_byte", D.read_nJ_per_byte, "energy per byte read, above idle, nJ", 0),
        num("program_nJ_per_byte", D.program_nJ_per_byte,
            "energy per byte programmed into the NAND, above idle, erase included, nJ", 0),
    };
  }
  explicit FlashPower(const json& p)
      : idle_(get_num(p, "idle_W")),
        read_(get_num(p, "read_nJ_per_byte") * kNJ),
        program_(get_num(p, "program_nJ_per_byte") * kNJ) {}
  void bind(const json& device, const DeviceModel& m) override {
    drives_ = device.contains("drives") ? double(get_int(device, "drives")) : 1.0;
    waf_ = m.write_amplification();
  }
  double idle_W() const override { return idle_ * drives_; }
  DeviceEnergy energy(const DeviceActivity& a) const override {
    return {idle_W() * a.run_s, 0, read_ * a.read_bytes + program_ * waf_ * a.write_bytes};
  }

 private:
  double idle_, read_, program_;  // W, J per byte, J per byte
  double drives_ = 1, waf_ = 1;
};

// Figures and their sources: docs/sources.md ("Power and energy").
constexpr FlashPowerDefaults kNvme{5.0, 1.0, 2.5};
constexpr FlashPowerDefaults kSmartSsdNand{5.0, 1.0, 2.5};
using NvmePower = FlashPower<kNvme>;
using SmartSsdPower = FlashPower<kSmartSsdNand>;
KVTIER_REGISTER(PowerModel, NvmePower, "nvme", "NVMe drive(s): idle per drive, energy per byte read and per NAND byte programmed");
KVTIER_REGISTER(PowerModel, SmartSsdPower, "smartssd",
                "SmartSSD NAND side: idle, energy per byte read and per NAND byte programmed (the FPGA is its own device)");

}  // namespace kvtier
