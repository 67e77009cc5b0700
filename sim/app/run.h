// Which engine runs a configuration, and running it: the one place that
// chooses between the single-batch decode engine (sim/engine/engine.h) and
// the serving engine (sim/serving/serving.h, a config with a "serving"
// section) and the cluster engine (sim/cluster/cluster.h, one with a
// "cluster" section too). `kvtier run`, `kvtier config` and `kvtier sweep` (each point's
// validation and its run) all go through here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/param.h"
#include "sim/core/validation_cache.h"

namespace kvtier {

enum class EngineKind { single_batch, serving, cluster };

// The engine a loaded configuration runs on.
EngineKind engine_kind(const json& cfg);

// Resolves (defaults filled) and validates `cfg` in place by constructing
// the engine that runs it; nothing runs and SimGrid is not started. Throws
// ConfigError naming the file and JSON path.
void resolve_config(json& cfg);

// As resolve_config, for validation only: the engine makes every check its
// run would but allocates nothing a run holds (sim/core/validation_cache.h),
// and takes the hardware as `hardware`, the parse of cfg's hardware section
// (that section is neither read nor resolved: `hardware->text` is its
// resolved text).
void validate_config(json& cfg, ValidationCache& cache, std::shared_ptr<const ParsedHardware> hardware);

// sim.out_dir of a resolved config, out/<name> when empty.
std::string out_dir_for(const json& cfg);

struct RunOptions {
  std::string config;              // the config file
  std::vector<std::string> sets;   // PATH=VALUE overrides, in order
  std::string out;                 // --out ("" = sim.out_dir)
  std::string timeline;            // --timeline ("" = sim.timeline)
  std::vector<std::string> seed;   // --seed (at most one)
  bool quiet = false;
  std::string max_memory;         // --max-memory ("" = the machine's available memory less a tenth)
  std::string max_events;         // --max-events ("" = sim/core/event_budget.h's default)
};

// `kvtier run`: loads, resolves and runs the config on its engine and writes
// result.json (and steps.csv, requests.csv or iterations.csv as the config asks), staged so
// that a failure leaves nothing. Returns the exit status.
int cmd_run(const RunOptions& options);

// `kvtier config`: prints the fully resolved configuration.
int cmd_config(const std::string& config, const std::vector<std::string>& sets);

// `kvtier trace gen`: writes the synthetic trace of a config.
int cmd_trace_gen(const std::string& config, const std::vector<std::string>& sets, const std::string& out);

}  // namespace kvtier
