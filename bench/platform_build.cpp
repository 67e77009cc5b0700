// Builds the SimGrid platform of a hardware description (a node preset
// replicated by hardware.cluster) and nothing else, and prints what it cost:
// what bench/cluster_platform.py measures at several node counts.
//
//   kvtier_platform_bench HARDWARE.json NODES TOPOLOGY [CROSS_ROUTES]
//
// TOPOLOGY is star or fat_tree (a leaf-spine of 8 nodes per leaf at 2:1
// oversubscription). CROSS_ROUTES routes between nodes are asked for too
// (each from node k's first GPU to node k+1's), to time the lazy routes.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "models/hardware.h"
#include "models/topology.h"
#include "sim/platform/platform.h"

using namespace kvtier;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: kvtier_platform_bench HARDWARE.json NODES star|fat_tree [CROSS_ROUTES]\n";
    return 2;
  }
  std::ifstream f(argv[1]);
  json hw = json::parse(f);
  const int nodes = std::stoi(argv[2]);
  const std::string topo = argv[3];
  const int cross = argc > 4 ? std::stoi(argv[4]) : 0;
  json fabric = {{"nic", hw.contains("cluster") ? hw["cluster"]["fabric"]["nic"] : json("port")},
                 {"nic_GBps", 50}, {"topology", topo}};
  if (topo == "fat_tree") fabric["nodes_per_leaf"] = nodes % 8 == 0 ? 8 : nodes, fabric["oversubscription"] = nodes % 8 == 0 ? 2 : 1;
  hw["cluster"] = {{"nodes", nodes}, {"fabric", fabric}};
  const auto t0 = std::chrono::steady_clock::now();
  Hardware h = parse_hardware(hw, "hardware");
  const auto t1 = std::chrono::steady_clock::now();
  Topology t(h);
  start_simgrid();
  Platform p(h, t);
  const auto t2 = std::chrono::steady_clock::now();
  const size_t D = h.cluster.node_devices;
  double lat = 0;
  for (int i = 0; i < cross && nodes > 1; ++i) {
    const size_t a = static_cast<size_t>(i % nodes) * D, b = static_cast<size_t>((i + 1) % nodes) * D;
    const int ga = h.device_index(h.node_of(a), "gpu0"), gb = h.device_index(h.node_of(b), "gpu0");
    lat += p.route(static_cast<size_t>(ga), static_cast<size_t>(gb)).latency_s;
  }
  const auto t3 = std::chrono::steady_clock::now();
  auto s = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::cout << json{{"nodes", nodes}, {"topology", topo}, {"devices", h.devices.size()}, {"links", p.stats().size()},
                    {"parse_s", s(t0, t1)}, {"platform_s", s(t1, t2)}, {"cross_routes", cross}, {"cross_routes_s", s(t2, t3)},
                    {"mean_cross_latency_s", cross ? lat / cross : 0.0}}
                   .dump()
            << "\n";
  return 0;
}
