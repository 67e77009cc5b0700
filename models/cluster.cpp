#include "models/cluster.h"

#include <algorithm>
#include <cmath>

#include "models/device.h"

namespace kvtier {

// A cap that keeps a typo (1e6 nodes) from filling memory: 4096 nodes of a
// few dozen devices are already over 100,000 SimGrid hosts.
constexpr double kMaxNodes = 4096;

ParamList cluster_params() {
  return {
      integer("nodes", 1, "number of identical nodes; 1: the node alone, names as written", 1, kMaxNodes),
  };
}

ParamList fabric_params() {
  return {
      str("nic", nullptr, "the node's device (kind nic) through which all its cross-node traffic passes"),
      positive("nic_GBps", nullptr, "bandwidth of each fabric link per direction (a node's port, a switch's uplink), GB/s"),
      num("latency_us", 1.0, "one-way latency of each fabric link, microseconds", 0),
      str("topology", "star", "star: one non-blocking switch; fat_tree: SimGrid's fat tree (a leaf-spine is 2 levels)",
          {"star", "fat_tree"}),
      num("oversubscription", 1.0,
          "star: the switch core carries nodes x nic_GBps / this; fat_tree: a leaf has this many times fewer uplinks "
          "than nodes (>= 1)",
          1.0),
      integer("nodes_per_leaf", 0,
              "fat_tree without explicit levels: nodes under each leaf switch of a 2-level leaf-spine (spines = "
              "nodes_per_leaf / oversubscription)",
              0, kMaxNodes),
  };
}

std::string node_qualified(size_t nodes, size_t node, const std::string& local) {
  return nodes > 1 ? "n" + std::to_string(node) + "." + local : local;
}

namespace {

std::vector<unsigned> level_vector(const json& ft, const std::string& key, const std::string& where) {
  const std::string path = where + "." + key;
  if (!ft.contains(key) || !ft[key].is_array() || ft[key].empty())
    throw ConfigError(path + ": expected a non-empty array of integers >= 1, one per level");
  std::vector<unsigned> v;
  for (size_t i = 0; i < ft[key].size(); ++i) {
    const json& x = ft[key][i];
    if (!x.is_number_integer() || x.get<long long>() < 1 || x.get<long long>() > kMaxNodes)
      throw ConfigError(path + "[" + std::to_string(i) + "]: expected an integer from 1 to 4096, got " + x.dump());
    v.push_back(x.get<unsigned>());
  }
  return v;
}

void explicit_fat_tree(json& ft, size_t nodes, Fabric& f, const std::string& where) {
  if (!ft.is_object()) throw ConfigError(where + ": expected an object {\"down\": [...], \"up\": [...], \"link_count\": [...]}");
  for (const auto& [k, v] : ft.items())
    if (k != "down" && k != "up" && k != "link_count" && !is_annotation_key(k))
      throw ConfigError(where + "." + k + ": unknown key; expected down, up, link_count");
  f.down = level_vector(ft, "down", where);
  f.up = level_vector(ft, "up", where);
  f.link_count = level_vector(ft, "link_count", where);
  if (f.up.size() != f.down.size() || f.link_count.size() != f.down.size())
    throw ConfigError(where + ": down, up and link_count need one entry per level each (" +
                      std::to_string(f.down.size()) + " levels in down)");
  double leaves = 1;
  for (unsigned d : f.down) leaves *= d;
  if (leaves != double(nodes))
    throw ConfigError(where + ".down: the product of children per level is the number of leaves, " +
                      std::to_string(static_cast<long long>(leaves)) + "; expected the cluster's " +
                      std::to_string(nodes) + " nodes");
}

// A 2-level leaf-spine: nodes_per_leaf nodes under each leaf switch, every
// leaf joined to every spine by one link, nodes_per_leaf / oversubscription
// spines.
void leaf_spine(const json& fj, size_t nodes, Fabric& f, const std::string& where) {
  const long long npl = get_int(fj, "nodes_per_leaf");
  if (npl < 1)
    throw ConfigError(where + ".nodes_per_leaf: a fat_tree needs nodes_per_leaf >= 1 (or an explicit fat_tree object)");
  if (nodes % static_cast<size_t>(npl) != 0)
    throw ConfigError(where + ".nodes_per_leaf: " + std::to_string(npl) + " does not divide the " +
                      std::to_string(nodes) + " nodes into whole leaves");
  const double spines = double(npl) / f.oversubscription;
  if (spines < 1 || std::abs(spines - std::round(spines)) > 1e-9)
    throw ConfigError(where + ".oversubscription: nodes_per_leaf / oversubscription is the number of spines, " +
                      std::to_string(spines) + "; expected a whole number >= 1");
  f.down = {static_cast<unsigned>(npl), static_cast<unsigned>(nodes / static_cast<size_t>(npl))};
  f.up = {1, static_cast<unsigned>(std::lround(spines))};
  f.link_count = {1, 1};
}

}  // namespace

ClusterLayout parse_cluster(json& c, const std::vector<std::string>& names, const std::vector<std::string>& kinds,
                            const std::string& where) {
  if (!c.is_object()) throw ConfigError(where + ": expected an object {\"nodes\": N, \"fabric\": {...}}");
  // `fabric` (fabric_params()) is optional for one node.
  resolve_params(c, cluster_params(), where, {"fabric"});
  ClusterLayout out;
  out.present = true;
  out.nodes = static_cast<size_t>(get_int(c, "nodes"));
  out.local_names = names;
  out.node_devices = names.size();
  const std::string fw = where + ".fabric";
  if (!c.contains("fabric")) {
    if (out.nodes > 1) throw ConfigError(fw + ": a cluster of several nodes needs a fabric object");
    return out;
  }
  json& fj = c["fabric"];
  if (!fj.is_object()) throw ConfigError(fw + ": expected an object {\"nic\": ..., \"nic_GBps\": ..., ...}");
  // `fat_tree` (explicit levels: {"down", "up", "link_count"}) is optional.
  resolve_params(fj, fabric_params(), fw, {"fat_tree"});
  const bool has_levels = fj.contains("fat_tree");
  Fabric& f = out.fabric;
  f.nic = fj["nic"].get<std::string>();
  const auto it = std::find(names.begin(), names.end(), f.nic);
  if (it == names.end()) throw ConfigError(fw + ".nic: no device named '" + f.nic + "' in the node's devices");
  const std::string& kind = kinds[static_cast<size_t>(it - names.begin())];
  if (kind != "nic")
    throw ConfigError(fw + ".nic: device '" + f.nic + "' is of kind " + kind +
                      "; the fabric's gateway must be a network adapter (kind nic)");
  f.nic_Bps = get_num(fj, "nic_GBps") * kGB;
  f.latency_s = get_num(fj, "latency_us") * kUs;
  f.oversubscription = get_num(fj, "oversubscription");
  const bool fat = fj["topology"].get<std::string>() == "fat_tree";
  f.topology = fat ? FabricTopology::FatTree : FabricTopology::Star;
  if (!fat && (get_int(fj, "nodes_per_leaf") != 0 || has_levels))
    throw ConfigError(fw + ".topology: nodes_per_leaf and fat_tree describe a fat tree; this fabric is a star");
  if (fat && has_levels) {
    if (get_int(fj, "nodes_per_leaf") != 0 || f.oversubscription != 1.0)
      throw ConfigError(fw + ".fat_tree: explicit levels give the uplinks themselves; leave nodes_per_leaf and "
                             "oversubscription out");
    explicit_fat_tree(fj["fat_tree"], out.nodes, f, fw + ".fat_tree");
  } else if (fat) {
    leaf_spine(fj, out.nodes, f, fw);
  }
  return out;
}

}  // namespace kvtier
