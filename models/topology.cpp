#include "models/topology.h"

#include <algorithm>
#include <limits>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>

namespace kvtier {

namespace {
struct EdgeProps {
  uint32_t link;
  double weight;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, boost::no_property, EdgeProps>;
}  // namespace

Topology::Topology(const Hardware& hw) : hw_(hw) {
  const size_t nl = hw.nodes() > 1 ? hw.cluster.node_links : hw.links.size();
  for (size_t i = 0; i < nl; ++i)
    ends_.emplace_back(static_cast<size_t>(hw.device_index(hw.links[i].a)), static_cast<size_t>(hw.device_index(hw.links[i].b)));
}

Route Topology::route(size_t from_device, size_t to_device) const {
  const size_t node = hw_.node_of(from_device);
  if (hw_.node_of(to_device) != node)
    throw ConfigError("hardware: '" + hw_.devices[from_device].name + "' and '" + hw_.devices[to_device].name +
                      "' are on different nodes; their route crosses the fabric (the platform's)");
  const size_t from = hw_.local_index(from_device), to = hw_.local_index(to_device);
  const uint32_t link0 = static_cast<uint32_t>(node * (hw_.nodes() > 1 ? hw_.cluster.node_links : 0));
  Graph g(hw_.nodes() > 1 ? hw_.cluster.node_devices : hw_.devices.size());
  for (uint32_t i = 0; i < ends_.size(); ++i) {
    const auto& l = hw_.links[i];
    // Latency first; the small per-hop term breaks ties toward fewer hops.
    boost::add_edge(ends_[i].first, ends_[i].second, EdgeProps{i, l.latency_s + 1e-9}, g);
  }
  std::vector<Graph::vertex_descriptor> pred(boost::num_vertices(g));
  std::vector<double> dist(boost::num_vertices(g));
  boost::dijkstra_shortest_paths(g, from,
                                 boost::weight_map(boost::get(&EdgeProps::weight, g))
                                     .predecessor_map(pred.data())
                                     .distance_map(dist.data()));
  if (from != to && pred[to] == to)
    throw ConfigError("hardware.links: no path from '" + hw_.devices[from_device].name + "' to '" +
                      hw_.devices[to_device].name + "'");
  Route r;
  for (size_t v = to; v != from; v = pred[v]) {
    size_t u = pred[v];
    // Among parallel edges take the one Dijkstra relaxed: the lightest.
    uint32_t best = 0;
    double bw = -1;
    auto [ei, ee] = boost::out_edges(u, g);
    for (; ei != ee; ++ei) {
      if (boost::target(*ei, g) != v) continue;
      const auto& p = g[*ei];
      if (bw < 0 || p.weight < bw) {
        bw = p.weight;
        best = p.link;
      }
    }
    const auto& l = hw_.links[best];
    r.push_back(Hop{best + link0, l.a == hw_.devices[u].name});
  }
  std::reverse(r.begin(), r.end());
  return r;
}

double route_bandwidth_Bps(const Hardware& hw, const Route& r) {
  double bw = std::numeric_limits<double>::infinity();
  for (const Hop& h : r) {
    const LinkEntry& l = hw.links[h.link];
    bw = std::min(bw, h.forward ? l.bw_Bps : l.bw_back_Bps);
  }
  return bw;
}

double read_path_Bps(const Hardware& hw, const Topology& t, size_t from, size_t to, double request_bytes,
                     int queue_depth) {
  const DeviceModel& d = *hw.devices[from].model;
  double bw = route_bandwidth_Bps(hw, t.route(from, to));
  if (d.read_Bps() > 0) {
    double eff = request_bytes > 0 ? d.read_efficiency(request_bytes, queue_depth) : 1.0;
    bw = std::min(bw, d.read_Bps() * eff);
  }
  return bw;
}

}  // namespace kvtier
