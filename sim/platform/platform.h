// The hardware compiled into a SimGrid platform, and the one place (with
// sim/platform/streams.cpp) that talks to SimGrid. Every link of the topology becomes
// SimGrid links (a split-duplex link becomes one link per direction, which
// also allows asymmetric bandwidth), every memory or storage device gets media
// links in front of it, and every pair of devices gets an explicit route. So
// concurrent flows share each link as SimGrid's max-min sharing says.
//
// A cluster (hardware.cluster, docs/cluster.md) is SimGrid's own zones: one
// full zone per node holding its devices and their explicit routes, and the
// nodes the leaves of a star or fat-tree zone, each node's gateway its
// fabric NIC. Routes within a node are tabled when the platform is built;
// routes between nodes are asked of SimGrid on first use and kept.
#pragma once

#include <simgrid/s4u.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "models/hardware.h"
#include "models/topology.h"
#include "sim/core/activity_windows.h"

namespace kvtier {

namespace sg4 = simgrid::s4u;

struct SgLinks;  // a platform's SimGrid links (platform.cpp)

// One direction of one link, as the metrics see it.
struct LinkStat {
  std::string name;
  double bandwidth_Bps = 0;  // nominal, for utilization = bytes / (bandwidth x time)
  double bytes = 0;
  double busy_s = 0;
  double busy_since = 0;
  uint32_t active = 0;
  uint32_t track = 0;  // timeline track
  // What the link is, for energy: a direction of topology link `link`
  // (forward: a -> b), or the media of device `device` (write: its write
  // path, or its shared bus), or a constraint two directions share (`both`,
  // which carries no bytes of its own). -1: not that kind.
  int32_t link = -1, device = -1;
  bool forward = true, write = false, both = false;
  double latency_s = 0;  // the SimGrid link's
};

struct PlatformRoute {
  std::vector<uint32_t> stats;  // LinkStat indices along the route
  double latency_s = 0;         // sum of link latencies
  double bottleneck_Bps = 0;    // smallest bandwidth along the route
  double pageable_Bps = 0;      // the slowest pageable-memory rate of its links (0: none)
};

// Starts a SimGrid engine configured for a pure bandwidth-and-latency model.
// One per process (a SimGrid limit).
sg4::Engine& start_simgrid();

// Runs `body` as an actor named `name` on `host` until the engine has
// nothing left to do. An exception must not escape an actor (SimGrid would
// abort): it ends every actor and is rethrown here once the engine returns.
void run_simulation(sg4::Host* host, const std::string& name, std::function<void()> body);
// Several actors at once (a cluster's router and its model instances): the
// same, with the first failure of any of them rethrown.
struct ActorSpec {
  sg4::Host* host;
  std::string name;
  std::function<void()> body;
};
void run_simulation(std::vector<ActorSpec> actors);

class Platform;
// Starts `body` as an actor of its own named `name` on `platform`'s
// controller host, beside the running ones (it first runs when the caller
// next waits), for work no running actor should wait for. Nothing catches
// there: an exception must not escape `body`.
void start_actor(const Platform& platform, const std::string& name, std::function<void()> body);

// Size dependence of one route, precomputed so that the SimGrid factor
// callbacks do no allocation and no route lookup (see Platform).
struct RouteFactors {
  struct CurvedHop {
    const LinkEntry* link;
    bool forward;
    double nominal_Bps;  // the SimGrid link's bandwidth in that direction
  };
  const DeviceModel* read_dev = nullptr;   // source media link, if any
  const DeviceModel* write_dev = nullptr;  // destination media link, if any
  double read_Bps = 0, write_Bps = 0;      // those media links' bandwidths
  double read_lat_s = 0, write_lat_s = 0;  // and latencies
  std::vector<CurvedHop> bw_curved;        // topology links with a bandwidth curve
  double const_min_Bps = 0;    // smallest bandwidth of the route's other links
  double bottleneck_Bps = 0;   // smallest nominal bandwidth on the route
  std::vector<const LinkEntry*> lat_curved;  // topology links with a latency curve
  double const_latency_s = 0;  // sum of the latencies of the route's other links
  double latency_s = 0;        // sum of all nominal latencies (what SimGrid adds up)
};

// The platform also installs SimGrid network-model factor callbacks that make
// a transfer's rate and latency depend on its size: the bandwidth factor is
// the route's effective bottleneck (each media link at its device's
// read/write_efficiency(request, depth), each topology link at its calibrated
// bandwidth_at(size)) over its nominal bottleneck, and the latency factor the
// calibrated latency_at(size) sum over the nominal sum. Both are exactly 1
// where no curve or efficiency applies. A Platform keeps pointers into `hw`,
// which must outlive it; the callbacks follow the most recently built Platform
// (SimGrid allows one per process anyway).
class Platform {
 public:
  // Largest number of outstanding requests a transfer keeps on one device's
  // media (the device models carry no queue-depth limit of their own).
  static constexpr int kMaxQueueDepth = 32;

  // `folds`: rank layouts whose copies may run folded (see folded()), each
  // a device per rank of a tensor-parallel instance, the first rank's first.
  Platform(const Hardware& hw, const Topology& topo, std::vector<std::vector<size_t>> folds = {});
  ~Platform();
  Platform(const Platform&) = delete;
  Platform& operator=(const Platform&) = delete;

  // `device` may also be an adapter view (fabric_ends): its own host.
  sg4::Host* host(size_t device) const { return device < n_ ? hosts_[device] : views_[device - n_].host; }
  // The device model's cores: a host's speed is all of them together.
  int cores(size_t device) const { return cores_[device]; }
  sg4::Host* controller() const { return controller_; }
  // The route from device `from` to device `to` (both not switches), across
  // nodes included.
  const PlatformRoute& route(size_t from, size_t to) const {
    if (nodes_ == 1) return routes_[from * n_ + to];
    return node_of(from) == node_of(to) ? routes_[pair_index(from, to)] : cross(from, to).route;
  }
  std::vector<LinkStat>& stats() { return stats_; }
  const std::vector<LinkStat>& stats() const { return stats_; }
  // Where a node's adapters meet at one port (the node's gateway is not an
  // adapter of its own), each rank of a tensor-parallel copy between nodes
  // crosses the adapter of its own switch, as the GPUs' own copies do
  // (rail-aligned, each rank's worker moving its own shard). A host memory
  // several ranks share is reached through its socket's adapters, the ranks
  // that use it taking them in turn (in rank order, as many ranks to each
  // adapter, the adapters in the node's order; a memory one rank alone uses
  // keeps its own route): Mooncake's Transfer Engine moves a buffer through
  // the adapters near its memory.
  // The ends of each rank of `layout` (a device per rank) in a copy to or
  // from another node: the device, or an adapter view of a host memory
  // (an index of its own, from n devices on, that route(), host() and the
  // factors take). The layout itself where the node has no such port.
  std::vector<size_t> fabric_ends(const std::vector<size_t>& layout) const;
  bool has_views() const { return !views_.empty(); }
  // The device an end (a device or an adapter view) stands for.
  size_t device_of_end(size_t end) const { return end < n_ ? end : views_[end - n_].device; }
  bool across(size_t from, size_t to) const { return crosses(from, to); }
  // Every link an adapter view's routes to and from its gateway cross.
  std::vector<uint32_t> view_links() const;
  // A tensor-parallel copy: every rank moves the same bytes from its device
  // of `from` to its device of `to`, all at once. Where the node is the same
  // seen from every rank (each rank's route has the first rank's links'
  // bandwidths, latencies, size curves and, counted over all ranks' routes,
  // the number of ranks crossing each), max-min sharing gives every rank's
  // flow the same rate, and one SimGrid flow stands for all of them: it runs
  // between two hosts of the layouts, over a route that lists each link of
  // the ranks' routes once per rank crossing it (SimGrid 3.32 counts a link
  // a route lists k times k times in its sharing, the flow using k times its
  // rate there), its latency that of the first rank's route (the latency
  // factor undoes the repeats). `ranks` are the routes the bytes cross, for
  // the links' metrics. nullptr: not foldable (the ranks run their own
  // flows). Layouts must have been given to the constructor.
  struct FoldedPair {
    sg4::Host* src = nullptr;
    sg4::Host* dst = nullptr;
    std::vector<const PlatformRoute*> ranks;
  };
  const FoldedPair* folded(const std::vector<size_t>& from, const std::vector<size_t>& to) const;
  // Whether copies between these pairs of layouts (every pair a run may copy
  // between) may fold: each pair folds, and the ranks' routes agree across
  // pairs (platform.cpp says how). Only then may copies fold: a folded flow
  // beside per-rank flows would load the first rank's links alone with what
  // every rank's carry.
  bool folds_all(const std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>>& pairs) const;
  // The fabric's links between nodes (LinkStat indices; empty in one node).
  const std::vector<uint32_t>& fabric_links() const { return fabric_stats_; }
  // Work executed on each device so far, in seconds of the whole device at
  // full speed (a kernel's seconds on a GPU; threads x seconds / cores for a
  // job on some of a CPU's cores): what its power model charges as busy. The
  // job ran from t0 to t1; windows() keeps when.
  void add_work(size_t device, double device_s, double t0, double t1) {
    work_s_[device] += device_s;
    windows_.add_work(device, device_s, t0, t1);
  }
  const std::vector<double>& work_s() const { return work_s_; }
  // A transfer of `bytes` along `route` that ran from t0 to t1 (its bytes are
  // in stats() from its start; here they are placed in time).
  void transferred(const PlatformRoute& route, double bytes, double t0, double t1) {
    for (uint32_t s : route.stats) windows_.add_bytes(s, bytes, t0, t1);
  }
  const ActivityWindows& windows() const { return windows_; }

  // Transfers are made of requests of `block_bytes` each (one KV block); the
  // queue depth of a transfer is its number of requests, capped at
  // kMaxQueueDepth. 0 (the default): unknown, a transfer is one request.
  // Call before running; it applies to transfers started afterwards.
  void set_request_bytes(double block_bytes) { request_bytes_ = block_bytes > 0 ? block_bytes : 0; }
  double request_bytes() const { return request_bytes_; }
  // The request size of the transfers from `from` to `to` started from now
  // on, where they are not whole blocks (the FPGA's reads of a block's key
  // slice); 0: back to set_request_bytes'. SimGrid evaluates the factors
  // when a transfer starts, in its own context, so this is kept per route:
  // a stream sets it before each of its transfers, which it runs one at a
  // time (sim/platform/streams.cpp).
  void set_route_request_bytes(size_t from, size_t to, double bytes) {
    if (from >= ends_count() || to >= ends_count()) return;
    (crosses(from, to) ? cross(from, to).request_bytes : route_request_[slot(from, to)]) = bytes > 0 ? bytes : 0;
  }
  double route_request_bytes(size_t from, size_t to) const {
    double r = 0;
    if (from < ends_count() && to < ends_count())
      r = crosses(from, to) ? cross(from, to).request_bytes : route_request_[slot(from, to)];
    return r > 0 ? r : request_bytes_;
  }
  size_t nodes() const { return nodes_; }

  // The factors SimGrid applies to one transfer of `bytes` from device `from`
  // to device `to`: the rate is bandwidth_factor x the route's nominal
  // bottleneck (when the transfer runs alone), the latency latency_factor x
  // route(from, to).latency_s. 1 for a pair without a route.
  double bandwidth_factor(size_t from, size_t to, double bytes) const;
  double latency_factor(size_t from, size_t to, double bytes) const;
  // Request size and queue depth of a transfer of `bytes` issued as requests of `request`.
  static void requests(double request, double bytes, double* req, int* qd);

 private:
  // A route between devices of different nodes, found on first use.
  struct CrossRoute {
    PlatformRoute route;
    RouteFactors factors;
    mutable double request_bytes = 0;  // set_route_request_bytes' value for this pair
  };
  size_t n_;
  size_t nodes_ = 1, node_devices_ = 0;  // node_devices_ = n_ for one node
  const Hardware* hw_;
  std::vector<sg4::Host*> hosts_;
  std::vector<int> cores_;
  sg4::Host* controller_ = nullptr;
  // Routes within a node, by node x node_devices_^2 + local from x
  // node_devices_ + local to (from * n_ + to for one node).
  std::vector<PlatformRoute> routes_;
  mutable std::unordered_map<uint64_t, CrossRoute> cross_;  // by from * ends_count() + to
  // A host memory reached through one of its socket's adapters other than
  // the one its own route to the gateway takes (fabric_ends).
  struct View {
    size_t device = 0;   // the memory
    size_t adapter = 0;  // the adapter, within the node
    sg4::Host* host = nullptr;
    std::vector<sg4::Link*> out, in;  // to and from the gateway
    std::vector<uint32_t> stats;      // both routes' links
  };
  std::vector<View> views_;
  std::map<std::pair<size_t, size_t>, size_t> view_of_;  // (memory, adapter within the node) -> its end
  // By device within a node: a host memory's adapters in the node's order
  // (none: the node has no port of adapters, or the memory one adapter).
  std::vector<std::vector<size_t>> memory_adapters_;
  std::vector<size_t> memory_default_;  // by device within a node: the adapter its own routes both take
  size_t gateway_ = 0;  // the gateway, within the node
  std::unordered_map<const sg4::Link*, uint32_t> link_stat_;  // every SimGrid link -> its LinkStat (clusters)
  std::vector<LinkStat> stats_;
  std::vector<uint32_t> fabric_stats_;
  std::vector<double> work_s_;  // by device
  ActivityWindows windows_;
  // By local from x node_devices_ + local to: every node's copy of a route
  // has the same factors.
  std::vector<RouteFactors> factors_;
  std::unordered_map<const sg4::Host*, uint32_t> device_of_;  // host -> device index
  double request_bytes_ = 0;
  std::vector<double> route_request_;  // like routes_; 0 = request_bytes_

  size_t node_of(size_t d) const { return device_of_end(d) / node_devices_; }
  size_t ends_count() const { return n_ + views_.size(); }
  size_t pair_index(size_t from, size_t to) const {
    return node_of(from) * node_devices_ * node_devices_ + (from % node_devices_) * node_devices_ + to % node_devices_;
  }
  const CrossRoute& cross(size_t from, size_t to) const;
  const RouteFactors& factors(size_t from, size_t to) const {
    if (crosses(from, to)) return cross(from, to).factors;
    return factors_[(from % node_devices_) * node_devices_ + to % node_devices_];
  }
  bool crosses(size_t from, size_t to) const { return nodes_ > 1 && node_of(from) != node_of(to); }
  size_t slot(size_t from, size_t to) const { return nodes_ == 1 ? from * n_ + to : pair_index(from, to); }
  void build_one_node(sg4::NetZone* zone, const Hardware& hw, const Topology& topo);
  void build_cluster(const Hardware& hw, const Topology& topo);
  // The star fabric's links of a node, for the folded layouts' routes to
  // and from its gateway (none: no folded copy leaves the node).
  struct FabricPort {
    sg4::Link* up = nullptr;
    sg4::Link* down = nullptr;
    sg4::Link* core = nullptr;
    size_t gateway = 0;  // the gateway device, within the node
  };
  void build_node(sg4::NetZone* zone, const Hardware& hw, size_t node, const std::vector<Route>& local,
                  const FabricPort& port);
  // The folded layouts' hosts of node `node` (devices d0 .. d0 + D - 1) and
  // their routes, `paths` being the node's routes by local pair.
  void add_folds(sg4::NetZone* zone, size_t node, size_t D, const std::vector<std::vector<sg4::Link*>>& paths,
                 const FabricPort& port);
  bool fold_matches(const std::vector<size_t>& from, const std::vector<size_t>& to) const;
  // Each host memory's adapters (memory_adapters_), from node 0's routes
  // `local` (by local pair) and the gateway `gateway` within the node.
  void find_memory_adapters(const Hardware& hw, const Topology& topo, const std::vector<Route>& local, size_t gateway);
  // Node `node`'s adapter views: hosts with routes to and from the gateway
  // through their adapter.
  void add_views(sg4::NetZone* zone, const Hardware& hw, size_t node, const std::vector<Route>& local,
                 const SgLinks& links);
  // Each rank's ends of a copy from layout `from` to layout `to`: the
  // adapter views where a rank's two devices are on different nodes.
  std::pair<std::vector<size_t>, std::vector<size_t>> rank_ends(const std::vector<size_t>& from,
                                                                const std::vector<size_t>& to) const;
  std::vector<std::vector<size_t>> folds_;           // each layout: a device per rank
  std::map<std::vector<size_t>, uint32_t> fold_of_;  // layout -> its index
  std::vector<sg4::Host*> fold_hosts_;               // by layout (nullptr: none made)
  std::unordered_set<const sg4::Host*> fold_host_set_;
  mutable std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<FoldedPair>> fold_pairs_;  // null: checked, not foldable
  void install_callbacks();

  // Device indices of a SimGrid transfer's ends; false if either is not a device.
  bool ends(const sg4::Host* src, const sg4::Host* dst, size_t* from, size_t* to) const;
  static double bandwidth_cb(double size, const sg4::Host* src, const sg4::Host* dst,
                             const std::vector<sg4::Link*>& links, const std::unordered_set<sg4::NetZone*>& zones);
  static double latency_cb(double size, const sg4::Host* src, const sg4::Host* dst,
                           const std::vector<sg4::Link*>& links, const std::unordered_set<sg4::NetZone*>& zones);
};

// One transfer of `bytes`, issued as requests of `request_bytes`.
struct TimedTransfer {
  double request_bytes = 0, bytes = 0;
};
// Each transfer alone, one after the other, from device `from` to device
// `to` of a platform built from `hw`: its simulated time in microseconds
// (what `kvtier validate` holds against a measured storage probe). Runs
// SimGrid in this process: call it where a simulation may start (a child).
std::vector<double> time_transfers_us(const Hardware& hw, size_t from, size_t to, const std::vector<TimedTransfer>& transfers);

}  // namespace kvtier
