#include "sim/serving/serving_energy.h"

namespace kvtier {

EnergyRun serving_energy_run(const EngineSetup& s, const EngineCounters& c, double end, const json& metrics) {
  EnergyRun r;
  r.end_s = end;
  r.generated_tokens = metrics.at("output_tokens").get<double>();
  r.requests = metrics.at("requests").get<double>();
  r.throttled_s = c.throttled_s;
  // Tier 0 is the GPU's pool; the tiers below it may be drives.
  for (size_t t = 1; t < s.tiers() && t < c.wear.size(); ++t)
    if (s.hw.devices[s.tier_dev[t]].model->is_storage()) r.wear.push_back({s.tier_dev[t], c.wear[t].life_used()});
  return r;
}

}  // namespace kvtier
