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
//
// Disaggregated prefill and decode (DistServe, Splitwise, Mooncake): the
// first cluster.prefill_replicas instances only prefill; when a prompt's
// prefill is done (its first token out) its request goes to a decode
// instance (cluster.decode_router), which pulls the prompt's KV from the
// prefill GPU over the route between them once it has room for it; or,
// with cluster.kv_transfer "layerwise", the decode instance is picked when
// the prefill starts and the KV streams to it layer by layer as the prefill
// computes it (sim/cluster/layerwise_transfer.h).
//
// A KV pool across the nodes (cluster.kv_pool "pooled", Mooncake Store): the
// instances' prefix caches become members of one cache (sim/serving/kv_pool.h)
// whose blocks any instance reads from the node holding them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/param.h"
#include "sim/serving/requests.h"

namespace kvtier {

class ServingSimulation;
struct ServingTotals;
class LayerwiseTransfer;
class KvPool;
class RouterPolicy;
struct InstanceLoad;
class Platform;
class Timeline;
struct Hardware;

ParamList cluster_run_params();  // the config's "cluster" section (hardware.cluster is the machines: models/cluster.h)

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
  std::vector<bool> allreduce_alone(bool through_switch) const;
  std::vector<std::vector<std::vector<size_t>>> rank_parts(size_t ranks) const;
  std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> fold_pairs(
      const std::vector<std::vector<std::vector<size_t>>>& parts) const;
  void build_pool();
  // Before attach, pooled: each instance's streams to and from the other
  // members' shares, and each rank's part of them.
  void connect_pool();
  json pool_metrics(const json& m) const;
  json instance_config(size_t gpu, const std::vector<size_t>& tier_devs, const std::vector<uint32_t>& sharers) const;
  void route_all();
  void hand_over(size_t from, size_t engine, uint32_t local);
  // cluster.kv_transfer "layerwise": request `local` of prefill instance
  // `from` is first scheduled; its decode instance is picked now.
  void stream_over(size_t from, size_t engine, uint32_t local);
  // The decode instance (by the decode router) and its virtual engine that
  // request k goes to, which accepts it next.
  std::pair<size_t, size_t> pick_decode(uint32_t k);
  void close_decode_side();
  // Request k of the stream as served: with disaggregation, its decode
  // instance's record with what the prefill instance did.
  ServingRequest served(size_t k) const;
  json metrics(double end);
  json node_metrics(const Hardware& hw, const std::vector<json>& per, const json& links) const;
  // An instance's metrics: its engine's, or its virtual engines' together
  // with each pipeline stage's.
  json instance_metrics(size_t i, double end, ServingTotals& totals);
  // Pipeline parallelism: each instance's stages, wired before attach.
  void build_stages();
  // For a router that reads estimates: the prefills queued at instance i and
  // request q's own first token there (InstanceLoad::queue_s, service_s).
  void estimate_first_token(size_t i, const ServingRequest& q, InstanceLoad& load);

  json& cfg_;
  RequestStream stream_;
  std::unique_ptr<RouterPolicy> router_, decode_router_;
  size_t prefill_ = 0;  // the first this many instances prefill only (0: every instance does both)
  uint64_t to_hand_over_ = 0, handed_over_ = 0;
  bool routed_all_ = false;
  std::vector<std::unique_ptr<Instance>> inst_;
  std::vector<uint32_t> instance_of_;  // per request of the stream: the instance it went to
  std::vector<uint32_t> local_id_;     // and its id there
  std::vector<uint32_t> engine_of_, decode_engine_;  // pipeline parallelism: the virtual engine it went to (each side)
  std::vector<uint32_t> decode_of_, decode_local_;  // disaggregated: its decode instance and id there
  std::vector<double> estimated_ttft_;  // per request, with a router that estimates: its estimate where it went
  std::vector<std::pair<size_t, uint32_t>> hit_from_;  // scratch: where a prompt's cached tokens lie
  std::unique_ptr<KvPool> pool_;  // cluster.kv_pool "pooled"
  std::unique_ptr<LayerwiseTransfer> layerwise_;  // cluster.kv_transfer "layerwise"
  std::unique_ptr<Platform> platform_;
  std::unique_ptr<Timeline> timeline_;
};

}  // namespace kvtier
