// A PCIe root complex or switch: a vertex where links meet, with no state.
#include "models/device.h"

namespace kvtier {

class Switch : public DeviceModel {
 public:
  static ParamList params() { return {}; }
  explicit Switch(const json&) {}
  DeviceRole role() const override { return DeviceRole::Switch; }
};
KVTIER_REGISTER(DeviceModel, Switch, "switch", "PCIe root complex or switch: where links meet");

}  // namespace kvtier
