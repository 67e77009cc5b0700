// Collectives among GPUs as SimGrid flows on the platform's routes, so that
// they contend with KV copies on every link they share (models/collective.h
// has their closed forms; docs/cluster.md). A collective is a set of flows
// started together and the latency steps its algorithm pays after the first:
//
// * ring all-reduce: rank i sends 2(n-1)/n x bytes to rank i+1 as one flow
//   (what its 2(n-1) steps move over that hop), then 2(n-1) - 1 more
//   per-step latencies (the flow paid one);
// * switch all-reduce (NVSwitch): every rank sends 2 x bytes / n to each of
//   the n-1 others (its reduce-scatter and all-gather shares), all at once,
//   then one more latency (two phases);
// * ring all-gather: rank i sends (n-1)/n x bytes to rank i+1, then n-2
//   more latencies.
//
// The per-step latency is the largest latency of the routes the flows take,
// so on an idle, symmetric platform a run takes exactly the closed form.
#pragma once

#include <simgrid/s4u.hpp>
#include <cstddef>
#include <vector>

#include "sim/platform/platform.h"

namespace kvtier {

enum class CollectiveAlgorithm { Ring, Switch };

struct CollectiveFlow {
  size_t from = 0, to = 0;  // device indices
  double bytes = 0;
};
struct CollectivePlan {
  std::vector<CollectiveFlow> flows;
  double extra_latency_s = 0;  // slept once every flow is done
};

// Plans over `gpus` (device indices, in ring order; at least one). One rank:
// nothing to do.
CollectivePlan allreduce_plan(const Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo);
CollectivePlan allgather_plan(const Platform& p, const std::vector<size_t>& gpus, double bytes);
// `count` all-reduces of `bytes` back to back as one set of flows carrying
// their bytes and the latency steps of all of them: on an idle platform
// exactly `count` times one all-reduce (the bandwidth term is linear in
// bytes), with count times fewer SimGrid activities. Under contention the
// flows share links as one longer all-reduce would.
CollectivePlan allreduce_repeated_plan(const Platform& p, const std::vector<size_t>& gpus, double bytes,
                                       CollectiveAlgorithm algo, size_t count);

// A collective in flight: its flows are running and counted on the links.
class CollectiveRun {
 public:
  // From an actor: returns once every flow is done and the latency steps
  // have passed; the links' busy time and activity windows are updated as
  // each flow ends. Returns the collective's duration, s.
  double wait();

 private:
  friend CollectiveRun collective_start(Platform& p, CollectivePlan plan);
  Platform* platform_ = nullptr;
  CollectivePlan plan_;
  std::vector<sg4::CommPtr> comms_;
  double t0_ = 0;
};

// From an actor: starts the plan's flows now.
CollectiveRun collective_start(Platform& p, CollectivePlan plan);
CollectiveRun allreduce_start(Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo);
// From an actor: an all-reduce start to end; its duration, s.
double allreduce(Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo);
// From an actor: allreduce_repeated_plan start to end; its duration, s.
double allreduce_repeated(Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo,
                          size_t count);

}  // namespace kvtier
