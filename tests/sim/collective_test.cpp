// Collectives as SimGrid flows: on an idle HGX node they take their closed
// form; a concurrent copy on a shared link slows them; slower NVLink never
// makes them faster.
#include <catch2/catch.hpp>

#include <fstream>

#include "models/collective.h"
#include "sim/platform/collective.h"
#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

json hgx_nvlink(double nvlink_GBps = 450) {
  std::ifstream f(std::string(KVTIER_SOURCE_DIR) + "/configs/hardware/hgx_h100x8.json");
  REQUIRE(f.good());
  json hw = json::parse(f);
  for (int k = 0; k < 8; ++k) hw["links"]["nvlink" + std::to_string(k)]["bandwidth_GBps"] = nvlink_GBps;
  return hw;
}

// gpu0..gpu<ranks-1>'s device indices.
std::vector<size_t> first_gpus(const Hardware& h, int ranks) {
  std::vector<size_t> gpus;
  for (int k = 0; k < ranks; ++k) gpus.push_back(static_cast<size_t>(h.device_index("gpu" + std::to_string(k))));
  return gpus;
}

// An all-reduce of `bytes` over gpu0..gpu<ranks-1>, and optionally a copy of
// `copy_bytes` from gpu0 to gpu1 started with it: the all-reduce's time, the
// closed form's inputs (the ring hop's bottleneck and the largest latency)
// and the bytes nvlink0 carried towards the switch.
json run_allreduce(const json& hw, int ranks, double bytes, CollectiveAlgorithm algo, double copy_bytes = 0) {
  return in_child([&] {
    json hwc = hw;
    Hardware h = parse_hardware(hwc, "hardware");
    Topology topo(h);
    start_simgrid();
    Platform p(h, topo);
    const std::vector<size_t> gpus = first_gpus(h, ranks);
    double t = 0;
    sg4::Actor::create("allreduce", p.controller(), [&] { t = allreduce(p, gpus, bytes, algo); });
    if (copy_bytes > 0)
      sg4::Actor::create("copy", p.controller(), [&] {
        sg4::CommPtr c = sg4::Comm::sendto_async(p.host(gpus[0]), p.host(gpus[1]), static_cast<uint64_t>(copy_bytes));
        c->wait();
      });
    sg4::Engine::get_instance()->run();
    double lat = 0;
    for (size_t a : gpus)
      for (size_t b : gpus)
        if (a != b) lat = std::max(lat, p.route(a, b).latency_s);
    double nvlink0 = 0;
    for (const LinkStat& s : p.stats())
      if (s.name == "nvlink0:gpu0->nvswitch") nvlink0 = s.bytes;
    const double bw = gpus.size() > 1 ? p.route(gpus[0], gpus[1]).bottleneck_Bps : 0.0;  // one rank: no route
    return json{{"time_s", t}, {"bw", bw}, {"latency_s", lat}, {"nvlink0", nvlink0}};
  });
}

}  // namespace

TEST_CASE("a ring all-reduce on an idle HGX node takes the closed form", "[collective]") {
  const double S = 256.0 * (1 << 20);
  for (int n : {2, 4, 8}) {
    CAPTURE(n);
    json m = run_allreduce(hgx_nvlink(), n, S, CollectiveAlgorithm::Ring);
    REQUIRE(m.contains("time_s"));
    CHECK(m["bw"].get<double>() == 450e9);
    CHECK(m["latency_s"].get<double>() == Approx(1e-6));  // two NVLink hops of 0.5 us
    const double expect = ring_allreduce_s(n, S, m["bw"], m["latency_s"]);
    CHECK(rel_err(m["time_s"].get<double>(), expect) < 1e-9);
    CHECK(m["nvlink0"].get<double>() == Approx(allreduce_bytes_per_rank(n, S)).epsilon(1e-12));
  }
}

TEST_CASE("an all-reduce through the NVSwitch on an idle HGX node takes the closed form", "[collective]") {
  const double S = 64.0 * (1 << 20);
  json m = run_allreduce(hgx_nvlink(), 8, S, CollectiveAlgorithm::Switch);
  REQUIRE(m.contains("time_s"));
  CHECK(rel_err(m["time_s"].get<double>(), switch_allreduce_s(8, S, m["bw"], m["latency_s"])) < 1e-9);
  CHECK(m["nvlink0"].get<double>() == Approx(allreduce_bytes_per_rank(8, S)).epsilon(1e-12));
}

TEST_CASE("a copy on a link the all-reduce uses makes it slower", "[collective][physics]") {
  const double S = 256.0 * (1 << 20);
  for (auto algo : {CollectiveAlgorithm::Ring, CollectiveAlgorithm::Switch}) {
    json idle = run_allreduce(hgx_nvlink(), 8, S, algo), busy = run_allreduce(hgx_nvlink(), 8, S, algo, 4e9);
    REQUIRE(idle.contains("time_s"));
    REQUIRE(busy.contains("time_s"));
    CHECK(busy["time_s"].get<double>() > idle["time_s"].get<double>() * 1.1);
  }
}

TEST_CASE("halving NVLink bandwidth never makes an all-reduce faster", "[collective][physics]") {
  const double S = 128.0 * (1 << 20);
  for (auto algo : {CollectiveAlgorithm::Ring, CollectiveAlgorithm::Switch}) {
    json full = run_allreduce(hgx_nvlink(450), 8, S, algo), half = run_allreduce(hgx_nvlink(225), 8, S, algo);
    REQUIRE(full.contains("time_s"));
    REQUIRE(half.contains("time_s"));
    CHECK(half["time_s"].get<double>() > full["time_s"].get<double>());
    CHECK(half["bw"].get<double>() == 225e9);
  }
}

TEST_CASE("a collective over one rank does nothing; a repeated rank is refused", "[collective]") {
  json m = run_allreduce(hgx_nvlink(), 1, 1e9, CollectiveAlgorithm::Ring);
  REQUIRE(m.contains("time_s"));
  CHECK(m["time_s"].get<double>() == 0.0);
  json bad = in_child([] {
    json hwc = hgx_nvlink();
    Hardware h = parse_hardware(hwc, "hardware");
    Topology topo(h);
    start_simgrid();
    Platform p(h, topo);
    const auto g = static_cast<size_t>(h.device_index("gpu0"));
    allreduce_plan(p, {g, g}, 1e9, CollectiveAlgorithm::Ring);
    return json::object();
  });
  CHECK_THAT(bad.value("config_error", std::string()), Catch::Contains("listed twice"));
}

namespace {

// In a child: the NVLink node's platform, `body(p, gpus)` as one actor from
// 0.25 s on (not at time 0: busy times start where the clock is) over
// gpu0..gpu<ranks-1>, then what `result(p, gpus)` reads once it has run.
template <class Body, class Result>
json on_nvlink(int ranks, Body body, Result result) {
  return in_child([&] {
    json hwc = hgx_nvlink();
    Hardware h = parse_hardware(hwc, "hardware");
    Topology topo(h);
    start_simgrid();
    Platform p(h, topo);
    const std::vector<size_t> gpus = first_gpus(h, ranks);
    sg4::Actor::create("allreduce", p.controller(), [&] {
      sg4::this_actor::sleep_for(0.25);
      body(p, gpus);
    });
    sg4::Engine::get_instance()->run();
    return result(p, gpus);
  });
}

// `count` all-reduces of `bytes` back to back over gpu0..gpu<ranks-1>, run
// alone (closed forms) or as flows: their time and every link's bytes and
// busy time.
json run_repeated(int ranks, double bytes, CollectiveAlgorithm algo, size_t count, bool alone) {
  double t = 0, t2 = 0;
  auto body = [&](Platform& p, const std::vector<size_t>& gpus) {
    t = allreduce_repeated(p, gpus, bytes, algo, count, alone);
    t2 = allreduce_repeated(p, gpus, bytes / 3, algo, 1, alone);
  };
  return on_nvlink(ranks, body, [&](Platform& p, const std::vector<size_t>& gpus) {
    CollectivePlan one = allreduce_plan(p, gpus, bytes, algo);
    CollectivePlan uneven = one;
    if (uneven.flows.size() > 1) uneven.flows[0].bytes *= 2;
    json links = json::object();
    for (const LinkStat& s : p.stats())
      if (s.bytes > 0) links[s.name] = {s.bytes, s.busy_s};
    return json{{"time_s", t},
                {"second_s", t2},
                {"end_s", sg4::Engine::get_clock()},
                {"links", links},
                {"closed_form", !alone_durations(p, one).empty()},
                {"uneven_closed_form", !alone_durations(p, uneven).empty()}};
  });
}

}  // namespace

TEST_CASE("an all-reduce whose links nothing else crosses, run as a closed form, takes what its flows take", "[collective]") {
  const double S = 3.0 * (1 << 20) + 7;
  for (auto algo : {CollectiveAlgorithm::Ring, CollectiveAlgorithm::Switch})
    for (int n : {2, 4, 8})
      for (size_t count : {size_t(1), size_t(160)}) {
        CAPTURE(int(algo), n, count);
        json flows = run_repeated(n, S, algo, count, false), alone = run_repeated(n, S, algo, count, true);
        REQUIRE(flows.contains("time_s"));
        REQUIRE(alone.contains("time_s"));
        // Both algorithms have a closed form on the NVSwitch; one flow larger
        // than the others sharing its links has none (it runs as flows); two
        // ranks share no link.
        CHECK(alone["closed_form"].get<bool>());
        CHECK(alone["uneven_closed_form"].get<bool>() == (algo == CollectiveAlgorithm::Ring || n == 2));
        // Times are differences of clock readings near 0.25 s: equal to its rounding.
        CHECK(std::abs(alone["time_s"].get<double>() - flows["time_s"].get<double>()) < 1e-12);
        CHECK(std::abs(alone["second_s"].get<double>() - flows["second_s"].get<double>()) < 1e-12);
        CHECK(std::abs(alone["end_s"].get<double>() - flows["end_s"].get<double>()) < 1e-12);
        CHECK(alone["second_s"].get<double>() > 0);
        REQUIRE(alone["links"].size() == flows["links"].size());
        for (auto& [name, v] : flows["links"].items()) {
          CAPTURE(name);
          REQUIRE(alone["links"].contains(name));
          CHECK(alone["links"][name][0].get<double>() == v[0].get<double>());
          CHECK(std::abs(alone["links"][name][1].get<double>() - v[1].get<double>()) < 1e-12);
        }
      }
}

TEST_CASE("a link is as busy under all-reduces run one by one as under one repeated plan of them", "[collective]") {
  // A layer's all-reduces run one by one (serving.coarsen false) or as one
  // plan carrying all their bytes and latency steps: the same time, bytes
  // and busy time on every link, latency steps counted busy in both.
  const double S = 1.5 * (1 << 20);
  const size_t count = 12;
  for (auto algo : {CollectiveAlgorithm::Ring, CollectiveAlgorithm::Switch})
    for (int n : {2, 4, 8})
      for (bool alone : {false, true}) {
        CAPTURE(int(algo), n, alone);
        double one_by_one = 0, repeated = 0;
        std::vector<double> busy_after_singles;
        auto body = [&](Platform& p, const std::vector<size_t>& gpus) {
          const double t0 = sg4::Engine::get_clock();
          for (size_t i = 0; i < count; ++i) allreduce_repeated(p, gpus, S, algo, 1, alone);
          one_by_one = sg4::Engine::get_clock() - t0;
          for (const LinkStat& s : p.stats()) busy_after_singles.push_back(s.busy_s);
          sg4::this_actor::sleep_for(0.25);
          repeated = allreduce_repeated(p, gpus, S, algo, count, alone);
        };
        json r = on_nvlink(n, body, [&](Platform& p, const std::vector<size_t>&) {
          json links = json::array();
          for (size_t i = 0; i < p.stats().size(); ++i)
            links.push_back({busy_after_singles[i], p.stats()[i].busy_s - busy_after_singles[i]});
          return json{{"one_by_one", one_by_one}, {"repeated", repeated}, {"links", links}};
        });
        REQUIRE(r.contains("links"));
        CHECK(std::abs(r["one_by_one"].get<double>() - r["repeated"].get<double>()) < 1e-12);
        size_t busy_links = 0;
        for (const json& l : r["links"]) {
          CHECK(std::abs(l[0].get<double>() - l[1].get<double>()) < 1e-12);
          if (l[0].get<double>() > 0) ++busy_links;
        }
        CHECK(busy_links > 0);
      }
}
