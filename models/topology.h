// The hardware as a graph (Boost.Graph): devices and switches are vertices,
// links are edges. Routes between devices are shortest paths by latency.
#pragma once

#include <cstdint>
#include <vector>

#include "models/hardware.h"

namespace kvtier {

struct Hop {
  uint32_t link;  // index into Hardware::links
  bool forward;   // true: traversed a -> b
};
using Route = std::vector<Hop>;

// In a cluster (models/cluster.h) the nodes are copies: routes are found
// within node 0's devices and links and moved to the node asked for. Routes
// between nodes cross the fabric, which is the platform's
// (sim/platform/platform.h); asking this for one is a ConfigError.
class Topology {
 public:
  explicit Topology(const Hardware& hw);
  // Links from device `from` to device `to` (indices into Hardware::devices).
  // Throws ConfigError if they are not connected.
  Route route(size_t from, size_t to) const;

 private:
  const Hardware& hw_;
  // Ends of each of node 0's links (device indices within the node).
  std::vector<std::pair<size_t, size_t>> ends_;
};

// The narrowest link along a route, B/s, each link taken in its direction of
// travel: what one flow alone gets. A RAID-0 behind one upstream port reads at
// min(N x drive, that port) this way; contention between flows is the
// engine's (SimGrid's) business.
double route_bandwidth_Bps(const Hardware& hw, const Route& r);
// One flow reading device `from`'s media into device `to`: min(media read
// bandwidth x read_efficiency(request_bytes, queue_depth), route).
double read_path_Bps(const Hardware& hw, const Topology& t, size_t from, size_t to, double request_bytes = 0,
                     int queue_depth = 1);

}  // namespace kvtier
