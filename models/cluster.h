// A cluster of identical nodes: `hardware.cluster` replicates the node that
// `hardware.devices` and `hardware.links` describe N times and joins the
// copies by a fabric (docs/cluster.md). The Hardware keeps the copies node
// after node: device i belongs to node i / devices-per-node. With one node
// (or no cluster object) names and indices are those of the node itself;
// with more, every device and link of node k is named "n<k>.<name>".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

enum class FabricTopology { Star, FatTree };

// How the nodes' gateways are joined (SimGrid zones, sim/platform/platform.cpp).
struct Fabric {
  std::string nic;      // the node's device (kind nic) that is its gateway
  double nic_Bps = 0;   // each fabric link, per direction
  double latency_s = 0; // each fabric link (a route crosses 2 in a star, up to 2 x levels in a fat tree)
  FabricTopology topology = FabricTopology::Star;
  // Star: the switch's core carries nodes x nic_Bps / oversubscription in
  // each direction. Fat tree: the leaves' uplinks are that much fewer than
  // their downlinks.
  double oversubscription = 1;
  // SimGrid's fat-tree parameters (FatTreeParams): per level, children per
  // switch, parents per element, parallel links; empty for a star.
  std::vector<unsigned> down, up, link_count;
};

struct ClusterLayout {
  size_t nodes = 1;
  size_t node_devices = 0, node_links = 0;  // per node
  std::vector<std::string> local_names;     // the node's device names, in index order
  Fabric fabric;
  bool present = false;  // a cluster object was given (even with one node)
};

ParamList cluster_params();
ParamList fabric_params();

// The name of a node's device or link: `local` itself in a one-node
// hardware, "n<node>.<local>" otherwise.
std::string node_qualified(size_t nodes, size_t node, const std::string& local);

// Validates `c` (at JSON path `where`, "hardware.cluster") in place
// (defaults filled) against the node's devices: `names` and `kinds` in index
// order.
ClusterLayout parse_cluster(json& c, const std::vector<std::string>& names, const std::vector<std::string>& kinds,
                            const std::string& where);

}  // namespace kvtier
