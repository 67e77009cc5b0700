#include "models/power/power_model.h"

namespace kvtier {

std::unique_ptr<PowerModel> make_power_model(const std::string& kind, json& power, const json& device,
                                             const DeviceModel& model, const std::string& where) {
  if (power.is_null()) power = json::object();
  if (!power.is_object()) throw ConfigError(where + ": expected an object of power parameters (see `kvtier list`)");
  const auto& entry = Registry<PowerModel>::instance().find(kind, where);
  resolve_params(power, entry.params, where);
  auto m = entry.make(power);
  m->bind(device, model);
  return m;
}

}  // namespace kvtier
