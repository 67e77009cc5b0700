// The hardware compiled into a SimGrid platform, and the one place (with
// sim/streams.cpp) that talks to SimGrid. Every link of the topology becomes
// SimGrid links (a split-duplex link becomes one link per direction, which
// also allows asymmetric bandwidth), every memory or storage device gets media
// links in front of it, and every pair of devices gets an explicit route. So
// concurrent flows share each link as SimGrid's max-min sharing says.
#pragma once

#include <simgrid/s4u.hpp>
#include <string>
#include <vector>

#include "models/hardware.h"
#include "models/topology.h"

namespace kvtier {

namespace sg4 = simgrid::s4u;

// One direction of one link, as the metrics see it.
struct LinkStat {
  std::string name;
  double bytes = 0;
  double busy_s = 0;
  double busy_since = 0;
  uint32_t active = 0;
  uint32_t track = 0;  // timeline track
};

struct PlatformRoute {
  std::vector<uint32_t> stats;  // LinkStat indices along the route
  double latency_s = 0;         // sum of link latencies
  double bottleneck_Bps = 0;    // smallest bandwidth along the route
};

// Starts a SimGrid engine configured for a pure bandwidth-and-latency model.
// One per process (a SimGrid limit).
sg4::Engine& start_simgrid();

class Platform {
 public:
  Platform(const Hardware& hw, const Topology& topo);
  sg4::Host* host(size_t device) const { return hosts_[device]; }
  sg4::Host* controller() const { return controller_; }
  // The route from device `from` to device `to` (both not switches).
  const PlatformRoute& route(size_t from, size_t to) const { return routes_[from * n_ + to]; }
  std::vector<LinkStat>& stats() { return stats_; }

 private:
  size_t n_;
  std::vector<sg4::Host*> hosts_;
  sg4::Host* controller_ = nullptr;
  std::vector<PlatformRoute> routes_;
  std::vector<LinkStat> stats_;
};

}  // namespace kvtier
