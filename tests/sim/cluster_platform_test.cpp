// The cluster on SimGrid's zones: a transfer between GPUs of two nodes over
// an idle fabric takes its route's latency + bytes / bottleneck, the fabric
// links count its bytes, and a slower fabric never makes it faster.
#include <catch2/catch.hpp>

#include <fstream>

#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

json hgx_node() {
  std::ifstream f(std::string(KVTIER_SOURCE_DIR) + "/configs/hardware/hgx_h100x8.json");
  REQUIRE(f.good());
  return json::parse(f);
}

json cluster_hw(int nodes, double nic_GBps, const std::string& topology = "star", double oversub = 1, int per_leaf = 0) {
  json fabric{{"nic", "port"}, {"nic_GBps", nic_GBps}, {"latency_us", 2.0}, {"topology", topology},
              {"oversubscription", oversub}};
  if (per_leaf) fabric["nodes_per_leaf"] = per_leaf;
  json hw = hgx_node();
  hw["cluster"] = {{"nodes", nodes}, {"fabric", fabric}};
  return hw;
}

struct NodeFlow {
  int from_node;
  std::string from;
  int to_node;
  std::string to;
  double bytes;
};

// Runs the flows at once (in a child) on `hw`: each one's time, its route's
// latency and bottleneck, and the bytes every link with traffic counted.
json run_cluster_flows(const json& hw, const std::vector<NodeFlow>& flows) {
  return in_child([&] {
    json hwc = hw;
    Hardware h = parse_hardware(hwc, "hardware");
    Topology topo(h);
    start_simgrid();
    Platform p(h, topo);
    json out = json::array();
    std::vector<double> done(flows.size(), 0.0);
    for (size_t i = 0; i < flows.size(); ++i) {
      const auto a = static_cast<size_t>(h.device_index(flows[i].from_node, flows[i].from));
      const auto b = static_cast<size_t>(h.device_index(flows[i].to_node, flows[i].to));
      const PlatformRoute& r = p.route(a, b);
      for (uint32_t s : r.stats) p.stats()[s].bytes += flows[i].bytes;
      out.push_back({{"latency_s", r.latency_s}, {"bottleneck_Bps", r.bottleneck_Bps}});
      sg4::Actor::create("flow", p.controller(), [&, i, a, b] {
        sg4::CommPtr c = sg4::Comm::sendto_async(p.host(a), p.host(b), static_cast<uint64_t>(flows[i].bytes));
        c->wait();
        done[i] = sg4::Engine::get_clock();
      });
    }
    sg4::Engine::get_instance()->run();
    json links = json::object();
    for (const LinkStat& s : p.stats())
      if (s.bytes > 0) links[s.name] = s.bytes;
    for (size_t i = 0; i < flows.size(); ++i) out[i]["time_s"] = done[i];
    return json{{"flows", out}, {"links", links}};
  });
}

}  // namespace

TEST_CASE("a transfer between GPUs of two nodes over an idle star fabric takes latency + B / bottleneck", "[cluster]") {
  const double B = 1e9;
  json m = run_cluster_flows(cluster_hw(4, 50), {{0, "gpu2", 3, "gpu5", B}});
  REQUIRE(m.contains("flows"));
  const json& f = m["flows"][0];
  const double lat = f["latency_s"], bw = f["bottleneck_Bps"];
  CHECK(bw == 50e9);  // the adapters' ports and the fabric link
  // gpu2 -> its switch -> nic1 -> port, the fabric's up and down (2 us each), then node 3's port -> nic2 -> switch -> gpu5.
  CHECK(lat == Approx(1e-6 + 1e-6 + 0 + 2e-6 + 2e-6 + 0 + 1e-6 + 1e-6).epsilon(1e-12));
  CHECK(rel_err(f["time_s"].get<double>(), lat + B / bw) < 1e-9);
  const json& links = m["links"];
  CHECK(links["n0.fabric:up"] == B);
  CHECK(links["fabric.core"] == B);
  CHECK(links["n3.fabric:down"] == B);
  CHECK(links["n0.nic_port1:n0.nic1->n0.port"] == B);
  CHECK(links["n3.pcie_gpu5:n3.pcie_sw2->n3.gpu5"] == B);
  CHECK(!links.contains("n1.fabric:up"));
}

TEST_CASE("a slower fabric never makes a cross-node transfer faster", "[cluster][physics]") {
  const double B = 2e9;
  double last = 0;
  for (double nic : {400.0, 50.0, 25.0, 10.0}) {
    CAPTURE(nic);
    json m = run_cluster_flows(cluster_hw(2, nic), {{0, "gpu0", 1, "gpu7", B}});
    REQUIRE(m.contains("flows"));
    const double t = m["flows"][0]["time_s"];
    CHECK(t >= last);
    last = t;
    const json& f = m["flows"][0];
    CHECK(rel_err(t, f["latency_s"].get<double>() + B / f["bottleneck_Bps"].get<double>()) < 1e-9);
  }
}

TEST_CASE("the star's core carries nodes x nic / oversubscription", "[cluster]") {
  // Four flows between disjoint node pairs, each alone at 50 GB/s; a core of
  // 8 x 50 / 4 = 100 GB/s shares them: 25 GB/s each.
  const double B = 1e9;
  std::vector<NodeFlow> flows{{0, "gpu0", 1, "gpu0", B}, {2, "gpu0", 3, "gpu0", B}, {4, "gpu0", 5, "gpu0", B}, {6, "gpu0", 7, "gpu0", B}};
  json free = run_cluster_flows(cluster_hw(8, 50, "star", 1), flows), over = run_cluster_flows(cluster_hw(8, 50, "star", 4), flows);
  REQUIRE(free.contains("flows"));
  REQUIRE(over.contains("flows"));
  for (size_t i = 0; i < flows.size(); ++i) {
    const double lat = free["flows"][i]["latency_s"];
    CHECK(rel_err(free["flows"][i]["time_s"].get<double>(), lat + B / 50e9) < 1e-9);
    CHECK(rel_err(over["flows"][i]["time_s"].get<double>(), lat + B / 25e9) < 1e-9);
  }
}

TEST_CASE("a leaf-spine fat tree: one flow at the closed form, a leaf's flows share its oversubscribed uplinks", "[cluster]") {
  const double B = 1e9;
  // 8 nodes, 4 per leaf, 2:1: two spines, so a leaf has 2 uplinks for 4 nodes.
  json one = run_cluster_flows(cluster_hw(8, 50, "fat_tree", 2, 4), {{0, "gpu0", 4, "gpu1", B}});
  REQUIRE(one.contains("flows"));
  const json& f = one["flows"][0];
  // Node, leaf, spine, leaf, node: four fabric links of 2 us.
  CHECK(f["latency_s"].get<double>() == Approx(1e-6 * 4 + 4 * 2e-6).epsilon(1e-12));
  CHECK(rel_err(f["time_s"].get<double>(), f["latency_s"].get<double>() + B / f["bottleneck_Bps"].get<double>()) < 1e-9);
  std::vector<NodeFlow> four{{0, "gpu0", 4, "gpu0", B}, {1, "gpu0", 5, "gpu0", B}, {2, "gpu0", 6, "gpu0", B}, {3, "gpu0", 7, "gpu0", B}};
  json m = run_cluster_flows(cluster_hw(8, 50, "fat_tree", 2, 4), four);
  REQUIRE(m.contains("flows"));
  for (size_t i = 0; i < four.size(); ++i) {
    const double lat = m["flows"][i]["latency_s"];
    CHECK(rel_err(m["flows"][i]["time_s"].get<double>(), lat + B / 25e9) < 1e-9);  // 2 x 50 GB/s for 4 flows
  }
  // Within one leaf the spines are not crossed.
  json near = run_cluster_flows(cluster_hw(8, 50, "fat_tree", 2, 4), {{0, "gpu0", 1, "gpu0", B}});
  REQUIRE(near.contains("flows"));
  CHECK(near["flows"][0]["latency_s"].get<double>() == Approx(1e-6 * 4 + 2 * 2e-6).epsilon(1e-12));
}

TEST_CASE("routes within a node of a cluster are the node's own", "[cluster]") {
  json m = in_child([] {
    json one = hgx_node(), four = cluster_hw(4, 50);
    Hardware h1 = parse_hardware(one, "hardware"), h4 = parse_hardware(four, "hardware");
    Topology t1(h1), t4(h4);
    start_simgrid();
    Platform p(h4, t4);
    // The single-node platform cannot be built in the same process; compare
    // against the topology's own route instead.
    const auto a = static_cast<size_t>(h4.device_index(2, "gpu3")), b = static_cast<size_t>(h4.device_index(2, "dram1"));
    const PlatformRoute& r = p.route(a, b);
    const Route hops = t1.route(static_cast<size_t>(h1.device_index("gpu3")), static_cast<size_t>(h1.device_index("dram1")));
    json names = json::array();
    for (uint32_t s : r.stats) names.push_back(p.stats()[s].name);
    return json{{"names", names}, {"hops", hops.size()}, {"bottleneck", r.bottleneck_Bps},
                {"expect", route_bandwidth_Bps(h1, hops)}};
  });
  REQUIRE(m.contains("names"));
  CHECK(m["names"].front() == "n2.pcie_gpu3:n2.gpu3->n2.pcie_sw1");
  CHECK(m["names"].back() == "n2.dram1.media");
  CHECK(m["names"].size() == m["hops"].get<size_t>() + 1);  // the hops and the DRAM's media
}
