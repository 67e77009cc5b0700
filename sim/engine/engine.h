// The decode engine: replays an attention trace through the device models
// with the configured policies, on SimGrid.
//
// Lifecycle (after MQSim): the constructor validates the whole configuration
// and builds every component (throwing ConfigError before anything runs or is
// written); run() builds the SimGrid platform, runs the simulation and
// returns the metrics.
//
// The pieces, one concept per file: what a run is (engine_setup.h), where
// blocks live and how they move between tiers (kv_store.h), how moves become
// transfers on streams (transfer_planner.h), what the GPU does layer by
// layer (layer_pipeline.h), what is counted and reported (engine_metrics.h).
//
// Concurrency mirrors the hardware: the GPU compute stream is the driver
// actor; every copy direction between two devices is its own Stream actor.
// All actors live on one controller host so that hand-offs cost nothing
// (see shared/reference/simgrid-3.32.md); transfers are sendto_async between
// device hosts and compute runs on the GPU host.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/engine/engine_metrics.h"
#include "sim/core/engine_setup.h"
#include "sim/core/validation_cache.h"
#include "sim/kv/kv_store.h"

namespace kvtier {

class Platform;
class JobBoard;
class Timeline;
class TransferPlanner;
class LayerPipeline;

class Simulation {
 public:
  // cfg is resolved in place (defaults filled). With `validating` the
  // configuration is only validated (sim/core/validation_cache.h): the
  // hardware comes parsed as `hardware` (cfg's hardware section is not read
  // or resolved) and the engine cannot run.
  explicit Simulation(json& cfg, ValidationCache* validating = nullptr,
                      std::shared_ptr<const ParsedHardware> hardware = nullptr);
  ~Simulation();
  json run(const std::string& timeline_path);
  // Decode step end times (seconds), for steps.csv.
  const std::vector<double>& step_ends() const { return c_.step_end; }
  double decode_start() const { return c_.decode_start; }

 private:
  void check_staging_fits() const;
  json& cfg_;
  EngineSetup s_;
  EngineCounters c_;
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<Platform> platform_;
  std::unique_ptr<JobBoard> board_;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<TransferPlanner> planner_;
  std::unique_ptr<LayerPipeline> pipeline_;
};

}  // namespace kvtier
