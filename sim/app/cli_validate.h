// `kvtier validate`: the simulator against this machine, no GPU needed
// (docs/validation.md). It measures the host paths (cuda_validate/
// kvtier_host_probe, or reads a given measurement), fits each path on half of
// the measured sizes and reports the error on the other half, then runs a
// real tiered decode pipeline (cuda_validate/kvtier_host_pipeline) and the
// engine on the same shapes, capacities and host calibration, and reports
// the end-to-end error per decode step.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace kvtier {

// Adds `validate` to `app`. The returned function, called after parsing,
// runs it if it was chosen and returns its exit code (0 within tolerance or
// no tolerance given, 1 outside it), or -1 if it was not chosen. Input
// problems are thrown as ConfigError.
std::function<int()> add_validate_command(CLI::App& app);

}  // namespace kvtier
