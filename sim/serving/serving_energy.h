// What a serving run's energy and cost metrics (sim/engine/energy_metrics.h)
// need besides the platform's counts: tokens out, requests, the FPGA's
// throttled time and the wear of the drives that hold KV.
#pragma once

#include "sim/core/counters.h"
#include "sim/core/engine_setup.h"
#include "sim/engine/energy_metrics.h"

namespace kvtier {

// `metrics`: the run's serving metrics so far (their output_tokens and requests).
EnergyRun serving_energy_run(const EngineSetup& s, const EngineCounters& c, double end, const json& metrics);

}  // namespace kvtier
