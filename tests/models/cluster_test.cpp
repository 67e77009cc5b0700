// hardware.cluster: replication of the node, names, indices, validation;
// and the collectives' closed forms.
#include <catch2/catch.hpp>

#include <fstream>

#include "hw_fixture.h"
#include "models/collective.h"
#include "models/topology.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {
json preset(const std::string& name) {
  std::ifstream f(std::string(KVTIER_SOURCE_DIR) + "/configs/hardware/" + name + ".json");
  REQUIRE(f.good());
  return json::parse(f);
}
json with_cluster(json hw, json cluster) {
  hw["cluster"] = std::move(cluster);
  return hw;
}
json star(int nodes) {
  return json{{"nodes", nodes}, {"fabric", {{"nic", "port"}, {"nic_GBps", 50}, {"latency_us", 2}}}};
}
}  // namespace

TEST_CASE("a one-node cluster keeps the node's names and indices", "[cluster]") {
  json plain = preset("hgx_h100x8"), one = with_cluster(preset("hgx_h100x8"), star(1));
  Hardware a = parse_hardware(plain, "hardware"), b = parse_hardware(one, "hardware");
  REQUIRE(a.devices.size() == b.devices.size());
  for (size_t i = 0; i < a.devices.size(); ++i) CHECK(a.devices[i].name == b.devices[i].name);
  for (size_t i = 0; i < a.links.size(); ++i) CHECK(a.links[i].name == b.links[i].name);
  CHECK(b.nodes() == 1);
  CHECK(b.gpu == "gpu0");
  CHECK(b.device_index(0, "gpu5") == a.device_index("gpu5"));
}

TEST_CASE("N nodes are N copies named n<k>.<name>, node after node", "[cluster]") {
  json j = with_cluster(preset("hgx_h100x8"), star(4));
  Hardware h = parse_hardware(j, "hardware");
  const size_t D = h.cluster.node_devices, L = h.cluster.node_links;
  REQUIRE(h.nodes() == 4);
  CHECK(h.devices.size() == 4 * D);
  CHECK(h.links.size() == 4 * L);
  const int g = h.device_index(3, "gpu5");
  REQUIRE(g >= 0);
  CHECK(h.devices[static_cast<size_t>(g)].name == "n3.gpu5");
  CHECK(h.device_index("n3.gpu5") == g);
  CHECK(h.node_of(static_cast<size_t>(g)) == 3);
  CHECK(h.devices[h.local_index(static_cast<size_t>(g))].name == "n0.gpu5");
  CHECK(h.device_index("n4.gpu5") == -1);
  CHECK(h.device_index("gpu5") == -1);
  CHECK(h.device_index(7, "gpu5") == -1);
  CHECK(h.gpu == "n0.gpu0");
  CHECK(h.tiers.front() == "n0.gpu0");
  CHECK(h.links[2 * L].name == "n2." + h.links[0].name.substr(3));
  // Routes within node 2 are node 0's moved to node 2's links.
  Topology t(h);
  const Route r0 = t.route(static_cast<size_t>(h.device_index(0, "gpu3")), static_cast<size_t>(h.device_index(0, "dram1")));
  const Route r2 = t.route(static_cast<size_t>(h.device_index(2, "gpu3")), static_cast<size_t>(h.device_index(2, "dram1")));
  REQUIRE(r0.size() == r2.size());
  for (size_t i = 0; i < r0.size(); ++i) {
    CHECK(r2[i].link == r0[i].link + 2 * L);
    CHECK(r2[i].forward == r0[i].forward);
  }
  CHECK_THROWS_AS(t.route(static_cast<size_t>(h.device_index(0, "gpu0")), static_cast<size_t>(h.device_index(1, "gpu0"))),
                  ConfigError);
}

TEST_CASE("a leaf-spine fat tree is SimGrid's 2-level fat tree with spines = nodes_per_leaf / oversubscription", "[cluster]") {
  json c = star(16);
  c["fabric"]["topology"] = "fat_tree";
  c["fabric"]["nodes_per_leaf"] = 4;
  c["fabric"]["oversubscription"] = 2;
  json j = with_cluster(preset("a100x4_pcie"), c);
  j["cluster"]["fabric"]["nic"] = "nic0";
  Hardware h = parse_hardware(j, "hardware");
  CHECK(h.cluster.fabric.topology == FabricTopology::FatTree);
  CHECK(h.cluster.fabric.down == std::vector<unsigned>{4, 4});
  CHECK(h.cluster.fabric.up == std::vector<unsigned>{1, 2});
  CHECK(h.cluster.fabric.link_count == std::vector<unsigned>{1, 1});
}

TEST_CASE("cluster errors name the JSON path", "[cluster]") {
  auto err = [](json c) { return hardware_error(with_cluster(preset("hgx_h100x8"), std::move(c))); };
  CHECK_THAT(err(json{{"nodes", 0}}), Catch::Contains("hardware.cluster.nodes"));
  CHECK_THAT(err(json{{"nodes", 2}}), Catch::Contains("hardware.cluster.fabric: a cluster of several nodes needs a fabric"));
  json c = star(2);
  c["fabric"]["nic"] = "gpu0";
  CHECK_THAT(err(c), Catch::Contains("hardware.cluster.fabric.nic: device 'gpu0' is of kind gpu"));
  c = star(2);
  c["fabric"]["nic"] = "nope";
  CHECK_THAT(err(c), Catch::Contains("hardware.cluster.fabric.nic: no device named 'nope'"));
  c = star(2);
  c["fabric"]["nic_GBps"] = 0;
  CHECK_THAT(err(c), Catch::Contains("hardware.cluster.fabric.nic_GBps"));
  c = star(2);
  c["fabric"]["oversubscription"] = 0.5;
  CHECK_THAT(err(c), Catch::Contains("hardware.cluster.fabric.oversubscription"));
  c = star(6);
  c["fabric"]["topology"] = "fat_tree";
  c["fabric"]["nodes_per_leaf"] = 4;
  CHECK_THAT(err(c), Catch::Contains("hardware.cluster.fabric.nodes_per_leaf: 4 does not divide the 6 nodes"));
  c["fabric"]["nodes_per_leaf"] = 3;
  c["fabric"]["oversubscription"] = 2;
  CHECK_THAT(err(c), Catch::Contains("hardware.cluster.fabric.oversubscription"));
  c = star(8);
  c["fabric"]["topology"] = "fat_tree";
  c["fabric"]["fat_tree"] = {{"down", {2, 2}}, {"up", {1, 2}}, {"link_count", {1, 1}}};
  CHECK_THAT(err(c), Catch::Contains("hardware.cluster.fabric.fat_tree.down: the product"));
  c["fabric"]["fat_tree"]["down"] = {2, 4};
  CHECK(err(c).empty());
  c = star(2);
  c["fabric"]["nodes_per_leaf"] = 2;
  CHECK_THAT(err(c), Catch::Contains("hardware.cluster.fabric.topology"));
  CHECK_THAT(err(json{{"nodes", 2}, {"fabrik", 1}}), Catch::Contains("hardware.cluster.fabrik"));
}

TEST_CASE("collective closed forms", "[collective]") {
  const double S = 1e9, B = 450e9, a = 1e-6;
  CHECK(ring_allreduce_s(8, S, B, a) == Approx(2.0 * 7 / 8 * S / B + 14 * a).epsilon(1e-15));
  CHECK(switch_allreduce_s(8, S, B, a) == Approx(2.0 * 7 / 8 * S / B + 2 * a).epsilon(1e-15));
  CHECK(ring_allgather_s(4, S, B, a) == Approx(3.0 / 4 * S / B + 3 * a).epsilon(1e-15));
  CHECK(send_recv_s(S, B, a) == Approx(a + S / B));
  CHECK(ring_allreduce_s(1, S, B, a) == 0.0);
  // A port-bound all-reduce has NCCL's bus bandwidth equal to the port's.
  CHECK(allreduce_bus_Bps(8, S, 2.0 * 7 / 8 * S / B) == Approx(B));
  // Halving the bandwidth never makes it faster.
  for (int n : {2, 4, 8}) CHECK(ring_allreduce_s(n, S, B / 2, a) > ring_allreduce_s(n, S, B, a));
}
