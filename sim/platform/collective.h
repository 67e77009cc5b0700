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
//
// Run alone (`alone` below): the caller has proved that nothing else can
// ever use the collective's links (the cluster engine checks every route its
// KV may take). If no two of its flows share a link either, each flow takes
// exactly what it takes by itself, latency x the route's latency factor +
// bytes / (bottleneck x its bandwidth factor), so the collective is one sleep
// instead of a SimGrid flow per rank, with the links' bytes, busy time and
// activity windows counted as the flows would count them. Flows that share
// links symmetrically (an NVSwitch all-reduce) take their fair share; others
// that share a link run as flows.
class CollectiveRun {
 public:
  // From an actor: returns once every flow is done and the latency steps
  // have passed; the links' busy time and activity windows are updated as
  // each flow ends. Returns the collective's duration, s.
  double wait();

 private:
  friend CollectiveRun collective_start(Platform& p, CollectivePlan plan, bool alone);
  Platform* platform_ = nullptr;
  CollectivePlan plan_;
  std::vector<sg4::CommPtr> comms_;
  std::vector<double> alone_s_;  // run alone: each flow's duration (empty: flows)
  double t0_ = 0;
};

// From an actor: starts the plan's flows now.
CollectiveRun collective_start(Platform& p, CollectivePlan plan, bool alone = false);
CollectiveRun allreduce_start(Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo);
// From an actor: an all-reduce start to end; its duration, s.
double allreduce(Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo);
// From an actor: allreduce_repeated_plan start to end; its duration, s.
double allreduce_repeated(Platform& p, const std::vector<size_t>& gpus, double bytes, CollectiveAlgorithm algo,
                          size_t count, bool alone = false);
// Run alone, each flow's duration (CollectiveRun above); empty where the
// flows must run as flows.
std::vector<double> alone_durations(const Platform& p, const CollectivePlan& plan);
// What the plan takes on an otherwise idle platform: its longest flow as
// alone_durations times it, plus its latency steps; where its flows share
// links unevenly, each flow as if it had its route to itself (a lower bound).
double idle_duration_s(const Platform& p, const CollectivePlan& plan);
// The links the plan's flows cross (LinkStat indices, sorted, each once).
std::vector<uint32_t> collective_links(const Platform& p, const CollectivePlan& plan);

}  // namespace kvtier
