// The cluster engine: a config with a "serving" and a "cluster" section.
// Several model instances (replicas) on the hardware's GPUs, each a serving
// engine (sim/serving/serving.h) with its own scheduler, paged KV pool and
// prefix cache, all on one SimGrid platform, so that their copies share the
// links, switches and host memories they have in common; a router
// (policies/router.h) hands each request to an instance when it arrives.
//
// One instance on the hardware's GPU is today's serving run, exactly: the
// router hands requests over at their arrival times, which is when the
// instance would have seen them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/param.h"
#include "sim/serving/requests.h"

namespace kvtier {

class ServingSimulation;
class RouterPolicy;
class Platform;
class Timeline;

ParamList cluster_params();

class ClusterSimulation {
 public:
  // Validates everything; cfg is resolved in place.
  explicit ClusterSimulation(json& cfg);
  ~ClusterSimulation();
  json run(const std::string& timeline_path);
  // One line per request, with the instance that served it.
  std::string requests_csv() const;
  std::string iterations_csv() const { return std::string(); }

 private:
  struct Instance;
  void place_instances();
  json instance_config(size_t gpu, const std::vector<size_t>& tier_devs, const std::vector<uint32_t>& sharers) const;
  void route_all();
  json metrics(double end);

  json& cfg_;
  RequestStream stream_;
  std::unique_ptr<RouterPolicy> router_;
  std::vector<std::unique_ptr<Instance>> inst_;
  std::vector<uint32_t> instance_of_;  // per request of the stream: the instance it went to
  std::vector<uint32_t> local_id_;     // and its id there
  std::unique_ptr<Platform> platform_;
  std::unique_ptr<Timeline> timeline_;
};

}  // namespace kvtier
