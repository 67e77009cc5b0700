#include "sim/platform/platform.h"

#include "sim/platform/sanitizer_fibers.h"

#include <signal.h>

#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <xbt/log.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace kvtier {

void run_simulation(sg4::Host* host, const std::string& name, std::function<void()> body) {
  std::vector<ActorSpec> one;
  one.push_back(ActorSpec{host, name, std::move(body)});
  run_simulation(std::move(one));
}

void run_simulation(std::vector<ActorSpec> actors) {
  std::exception_ptr failure;
  for (ActorSpec& a : actors)
    sg4::Actor::create(a.name, a.host, [&a, &failure] {
      try {
        a.body();
      } catch (...) {
        if (!failure) failure = std::current_exception();
        sg4::Actor::kill_all();
      }
    });
  sg4::Engine::get_instance()->run();
  if (failure) std::rethrow_exception(failure);
}

void start_actor(const Platform& platform, const std::string& name, std::function<void()> body) {
  sg4::Actor::create(name, platform.controller(), std::move(body));
}

sg4::Engine& start_simgrid() {
  static char arg0[] = "kvtier";
  static char arg1[] = "--log=root.thresh:critical";  // no "Configuration change" line on stderr
  static char* argv[] = {arg0, nullptr, nullptr, nullptr};
  static int argc = 1;
  if (const char* factory = context_factory_option()) {
    argv[1] = arg1;
    argv[2] = const_cast<char*>(factory);
    argc = 3;
  }
  // SimGrid installs its own SIGINT handler (it ends the process with exit
  // status 1); kvtier's (sim/core/result.cpp: remove staged outputs, exit 130)
  // stays in place.
  struct sigaction before_int;
  sigaction(SIGINT, nullptr, &before_int);
  static sg4::Engine engine(&argc, argv);
  sigaction(SIGINT, &before_int, nullptr);
  xbt_log_control_set("root.thresh:critical");
  // See shared/reference/simgrid-3.32.md: LV08's TCP corrections are wrong for
  // PCIe; CM02 without cross-traffic and without the TCP-gamma window cap
  // makes a transfer take latency + size / bandwidth. Must precede the platform.
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
  // Flows share a link equally (weight-S models TCP RTT-unfairness, not PCIe).
  sg4::Engine::set_config("network/weight-S:0");
  // Lazy updates lose flows' bandwidth shares when link bandwidths on one
  // route differ by ~1e5 (measured: a 512 KiB copy over a 10 GB/s link behind
  // a 1e6 GB/s media link took 5 us instead of 57 us on every other layer).
  // Full recomputation is exact and our flow counts are small.
  sg4::Engine::set_config("network/optim:Full");
  return engine;
}

struct SgLink {
  sg4::Link* link;
  uint32_t stat;
};

// The SimGrid links of a platform: each topology link's directions (one
// SimGrid link per direction for split duplex, `both` where the directions
// slow each other), and the media in front of each memory or storage device.
struct SgLinks {
  std::vector<SgLink> fwd, back, both;
  std::vector<SgLink> media_read, media_write;  // per device
};

namespace {

// The Platform whose routes the SimGrid factor callbacks describe. SimGrid
// keeps a callback for the life of its network model, longer than a Platform;
// a destroyed Platform clears this and the callbacks then return 1.
const Platform* g_active = nullptr;

// SimGrid rejects a zero bandwidth factor.
constexpr double kMinFactor = 1e-12;

// Node `node`'s links and media (all of them for one node); the SgLinks are
// indexed by link and device within the node.
SgLinks make_links(sg4::NetZone* zone, const Hardware& hw, std::vector<LinkStat>& stats, size_t node = 0,
                   std::unordered_map<const sg4::Link*, uint32_t>* index = nullptr) {
  auto new_link = [&](const std::string& name, double bw, double lat, sg4::Link::SharingPolicy pol) {
    stats.push_back(LinkStat{name, bw});
    stats.back().latency_s = lat;
    auto* l = zone->create_link(name, bw)->set_latency(lat)->set_sharing_policy(pol);
    if (index) index->emplace(l, static_cast<uint32_t>(stats.size() - 1));
    return SgLink{l, static_cast<uint32_t>(stats.size() - 1)};
  };
  auto tag = [&](const SgLink& sl, int32_t link, int32_t device, bool forward, bool write) {
    LinkStat& st = stats[sl.stat];
    st.link = link;
    st.device = device;
    st.forward = forward;
    st.write = write;
  };
  SgLinks k;
  const size_t nl = hw.nodes() > 1 ? hw.cluster.node_links : hw.links.size();
  const size_t nd = hw.nodes() > 1 ? hw.cluster.node_devices : hw.devices.size();
  const size_t l0 = node * nl, d0 = node * nd;
  k.fwd.resize(nl);
  k.back.resize(nl);
  k.both.assign(nl, SgLink{nullptr, 0});
  for (size_t i = 0; i < nl; ++i) {
    const auto& l = hw.links[l0 + i];
    const auto li = static_cast<int32_t>(l0 + i);
    if (l.duplex == Duplex::Split) {
      k.fwd[i] = new_link(l.name + ":" + l.a + "->" + l.b, l.bw_Bps, l.latency_s, sg4::Link::SharingPolicy::SHARED);
      k.back[i] = new_link(l.name + ":" + l.b + "->" + l.a, l.bw_back_Bps, l.latency_s, sg4::Link::SharingPolicy::SHARED);
      tag(k.fwd[i], li, -1, true, false);
      tag(k.back[i], li, -1, false, false);
      // Directions that slow each other: both also cross one shared
      // constraint of the efficiency times their sum, which a lone flow never
      // reaches (efficiency >= 0.5) and two opposite flows split.
      if (l.duplex_efficiency < 1.0)
        k.both[i] = new_link(l.name + ":both", l.duplex_efficiency * (l.bw_Bps + l.bw_back_Bps), 0.0,
                             sg4::Link::SharingPolicy::SHARED);
      if (k.both[i].link) stats[k.both[i].stat].both = true;
    } else {
      auto pol = l.duplex == Duplex::Shared ? sg4::Link::SharingPolicy::SHARED : sg4::Link::SharingPolicy::FATPIPE;
      k.fwd[i] = k.back[i] = new_link(l.name, l.bw_Bps, l.latency_s, pol);
      tag(k.fwd[i], li, -1, true, false);
    }
  }
  k.media_read.assign(nd, SgLink{nullptr, 0});
  k.media_write.assign(nd, SgLink{nullptr, 0});
  for (size_t i = 0; i < nd; ++i) {
    const auto& m = *hw.devices[d0 + i].model;
    if (m.read_Bps() <= 0) continue;
    const std::string& n = hw.devices[d0 + i].name;
    const auto di = static_cast<int32_t>(d0 + i);
    if (m.media_shared()) {
      k.media_read[i] = k.media_write[i] =
          new_link(n + ".media", m.read_Bps(), m.media_latency_s(), sg4::Link::SharingPolicy::SHARED);
      tag(k.media_read[i], -1, di, true, false);
    } else {
      k.media_read[i] = new_link(n + ".read", m.read_Bps(), m.media_latency_s(), sg4::Link::SharingPolicy::SHARED);
      k.media_write[i] = new_link(n + ".write", m.write_Bps(), m.media_latency_s(), sg4::Link::SharingPolicy::SHARED);
      tag(k.media_read[i], -1, di, true, false);
      tag(k.media_write[i], -1, di, true, true);
    }
  }
  return k;
}

// The route from device a to device b: its SimGrid links in order (the
// source's media, the topology's hops, the destination's media), and what
// the factor callbacks need of it (constant and curved hops).
std::vector<SgLink> make_route(const Hardware& hw, const SgLinks& k, const Route& hops, size_t a, size_t b,
                               PlatformRoute& r, RouteFactors& f) {
  std::vector<SgLink> path;
  if (k.media_read[a].link) path.push_back(k.media_read[a]);
  for (const Hop& h : hops) {
    path.push_back(h.forward ? k.fwd[h.link] : k.back[h.link]);
    if (k.both[h.link].link) path.push_back(k.both[h.link]);
  }
  if (k.media_write[b].link) path.push_back(k.media_write[b]);
  f.const_min_Bps = std::numeric_limits<double>::infinity();
  if (k.media_read[a].link) {
    f.read_dev = hw.devices[a].model.get();
    f.read_Bps = k.media_read[a].link->get_bandwidth();
    f.read_lat_s = k.media_read[a].link->get_latency();
    f.const_latency_s += k.media_read[a].link->get_latency();
  }
  for (const Hop& h : hops) {
    const LinkEntry& le = hw.links[h.link];
    if (!h.forward && le.pageable_back_Bps > 0)
      r.pageable_Bps = r.pageable_Bps > 0 ? std::min(r.pageable_Bps, le.pageable_back_Bps) : le.pageable_back_Bps;
    sg4::Link* l = h.forward ? k.fwd[h.link].link : k.back[h.link].link;
    if (!(h.forward ? le.bw_curve : le.bw_back_curve).empty())
      f.bw_curved.push_back(RouteFactors::CurvedHop{&le, h.forward, l->get_bandwidth()});
    else
      f.const_min_Bps = std::min(f.const_min_Bps, l->get_bandwidth());
    if (!le.latency_curve.empty())
      f.lat_curved.push_back(&le);
    else
      f.const_latency_s += l->get_latency();
  }
  if (k.media_write[b].link) {
    f.write_dev = hw.devices[b].model.get();
    f.write_Bps = k.media_write[b].link->get_bandwidth();
    f.write_lat_s = k.media_write[b].link->get_latency();
    f.const_latency_s += k.media_write[b].link->get_latency();
  }
  r.bottleneck_Bps = std::numeric_limits<double>::infinity();
  for (const auto& l : path) {
    r.stats.push_back(l.stat);
    r.latency_s += l.link->get_latency();
    r.bottleneck_Bps = std::min(r.bottleneck_Bps, l.link->get_bandwidth());
  }
  f.bottleneck_Bps = r.bottleneck_Bps;
  f.latency_s = r.latency_s;
  return path;
}
}  // namespace

Platform::Platform(const Hardware& hw, const Topology& topo, std::vector<std::vector<size_t>> folds)
    : n_(hw.devices.size()), nodes_(hw.nodes()), node_devices_(hw.nodes() > 1 ? hw.cluster.node_devices : n_), hw_(&hw) {
  for (std::vector<size_t>& f : folds) {
    // A layout of one rank, or with a device off its first rank's node, never folds.
    bool ok = f.size() > 1;
    for (size_t d : f) ok = ok && d < n_ && (d / node_devices_) == (f[0] / node_devices_);
    if (ok && fold_of_.emplace(f, static_cast<uint32_t>(folds_.size())).second) folds_.push_back(std::move(f));
  }
  fold_hosts_.assign(folds_.size(), nullptr);
  hosts_.assign(n_, nullptr);
  cores_.assign(n_, 1);
  work_s_.assign(n_, 0.0);
  for (size_t i = 0; i < n_; ++i) cores_[i] = std::max(1, hw.devices[i].model->cores());
  if (nodes_ == 1)
    build_one_node(sg4::create_full_zone("kvtier"), hw, topo);
  else
    build_cluster(hw, topo);
  windows_ = ActivityWindows(n_, stats_.size());
  for (size_t i = 0; i < n_; ++i)
    if (hosts_[i]) device_of_.emplace(hosts_[i], static_cast<uint32_t>(i));
  for (size_t k = 0; k < views_.size(); ++k) device_of_.emplace(views_[k].host, static_cast<uint32_t>(n_ + k));
  // A folded flow's factors are its first rank's.
  for (size_t i = 0; i < folds_.size(); ++i)
    if (fold_hosts_[i]) {
      device_of_.emplace(fold_hosts_[i], static_cast<uint32_t>(folds_[i][0]));
      fold_host_set_.insert(fold_hosts_[i]);
    }
  install_callbacks();
}

void Platform::install_callbacks() {
  g_active = this;
  auto* model = sg4::Engine::get_instance()->get_netzone_root()->get_network_model();
  model->set_bw_factor_cb(&Platform::bandwidth_cb);
  model->set_lat_factor_cb(&Platform::latency_cb);
}

// One node: one full zone, every pair of devices an explicit route.
void Platform::build_one_node(sg4::NetZone* zone, const Hardware& hw, const Topology& topo) {
  controller_ = zone->create_host("kvtier.controller", 1e9);
  route_request_.assign(n_ * n_, 0.0);
  for (size_t i = 0; i < n_; ++i) {
    const auto& d = hw.devices[i];
    if (d.model->role() == DeviceRole::Switch) continue;
    double speed = d.model->flops() > 0 ? d.model->flops() : 1e9;
    hosts_[i] = zone->create_host(d.name, speed);
  }
  const SgLinks links = make_links(zone, hw, stats_);
  routes_.assign(n_ * n_, PlatformRoute{});
  factors_.assign(n_ * n_, RouteFactors{});
  std::vector<std::vector<sg4::Link*>> paths(folds_.empty() ? 0 : n_ * n_);
  for (size_t a = 0; a < n_; ++a) {
    for (size_t b = 0; b < n_; ++b) {
      if (a == b || !hosts_[a] || !hosts_[b]) continue;
      const std::vector<SgLink> path =
          make_route(hw, links, topo.route(a, b), a, b, routes_[a * n_ + b], factors_[a * n_ + b]);
      std::vector<sg4::LinkInRoute> sg;
      for (const auto& l : path) sg.emplace_back(l.link);
      if (!paths.empty())
        for (const auto& l : path) paths[a * n_ + b].push_back(l.link);
      zone->add_route(hosts_[a]->get_netpoint(), hosts_[b]->get_netpoint(), nullptr, nullptr, sg, false);
    }
  }
  add_folds(zone, 0, n_, paths, FabricPort{});
  zone->seal();
}

// A cluster: node 0's routes found once (every node is a copy of it), the
// nodes built as full zones, joined by the fabric's star or fat-tree zone.
void Platform::build_cluster(const Hardware& hw, const Topology& topo) {
  const size_t D = node_devices_;
  std::vector<Route> local(D * D);
  for (size_t a = 0; a < D; ++a)
    for (size_t b = 0; b < D; ++b)
      if (a != b && hw.devices[a].model->role() != DeviceRole::Switch &&
          hw.devices[b].model->role() != DeviceRole::Switch)
        local[a * D + b] = topo.route(a, b);
  routes_.assign(nodes_ * D * D, PlatformRoute{});
  factors_.assign(D * D, RouteFactors{});
  route_request_.assign(nodes_ * D * D, 0.0);
  const Fabric& f = hw.cluster.fabric;
  const size_t nic = static_cast<size_t>(hw.device_index(0, f.nic)) % D;
  find_memory_adapters(hw, topo, local, nic);
  auto stat = [this](sg4::Link* l) {
    stats_.push_back(LinkStat{l->get_name(), l->get_bandwidth()});
    stats_.back().latency_s = l->get_latency();
    link_stat_.emplace(l, static_cast<uint32_t>(stats_.size() - 1));
    fabric_stats_.push_back(static_cast<uint32_t>(stats_.size() - 1));
    return l;
  };
  if (f.topology == FabricTopology::Star) {
    // One switch: each node's port up and down, and the switch's core,
    // which every cross-node flow crosses once (SimGrid's star zone lists a
    // link met on both halves of a route once).
    auto* root = sg4::create_star_zone("kvtier");
    auto* core = stat(root->create_link("fabric.core", double(nodes_) * f.nic_Bps / f.oversubscription)
                          ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED));
    for (size_t k = 0; k < nodes_; ++k) {
      auto* zone = sg4::create_full_zone("n" + std::to_string(k));
      zone->set_parent(root);
      // The node's port exists before its zone is sealed (folded routes
      // list it) and is counted after the node's own links.
      const std::string name = "n" + std::to_string(k) + ".fabric";
      FabricPort port;
      port.up = root->create_link(name + ":up", f.nic_Bps)->set_latency(f.latency_s);
      port.down = root->create_link(name + ":down", f.nic_Bps)->set_latency(f.latency_s);
      port.core = core;
      port.gateway = nic;
      build_node(zone, hw, k, local, port);
      auto* up = stat(port.up);
      auto* down = stat(port.down);
      auto* gw = hosts_[k * D + nic]->get_netpoint();
      root->add_route(zone->get_netpoint(), nullptr, gw, nullptr, {sg4::LinkInRoute(up), sg4::LinkInRoute(core)}, false);
      root->add_route(nullptr, zone->get_netpoint(), nullptr, gw, {sg4::LinkInRoute(core), sg4::LinkInRoute(down)}, false);
    }
    root->seal();
  } else {
    // SimGrid's fat tree: leaf `id` is node `id`'s zone, its gateway the NIC;
    // the tree's links (each direction its own) carry nic_GBps.
    sg4::ClusterCallbacks cb([&](sg4::NetZone* ft, const std::vector<unsigned long>& /*coord*/, unsigned long id) {
      auto* zone = sg4::create_full_zone("n" + std::to_string(id));
      zone->set_parent(ft);
      build_node(zone, hw, id, local, FabricPort{});
      return std::make_pair(zone->get_netpoint(), hosts_[id * D + nic]->get_netpoint());
    });
    const sg4::FatTreeParams params(static_cast<unsigned>(f.down.size()), f.down, f.up, f.link_count);
    auto* root = sg4::create_fatTree_zone("kvtier", nullptr, params, cb, f.nic_Bps, f.latency_s,
                                          sg4::Link::SharingPolicy::SPLITDUPLEX);
    root->seal();
    // The tree's links, in SimGrid's order of names (deterministic).
    for (sg4::Link* l : sg4::Engine::get_instance()->get_all_links())
      if (!link_stat_.count(l) && l->get_name().rfind("__", 0) != 0) {
        stat(l);
        stats_.back().name = "fabric:" + l->get_name();
      }
  }
}

// Node `node` in its zone: its hosts, links and the explicit routes between
// its devices (node 0's routes moved to this node's links).
void Platform::build_node(sg4::NetZone* zone, const Hardware& hw, size_t node, const std::vector<Route>& local,
                          const FabricPort& port) {
  const size_t D = node_devices_, d0 = node * D;
  if (node == 0) controller_ = zone->create_host("kvtier.controller", 1e9);
  for (size_t i = 0; i < D; ++i) {
    const auto& d = hw.devices[d0 + i];
    if (d.model->role() == DeviceRole::Switch) continue;
    hosts_[d0 + i] = zone->create_host(d.name, d.model->flops() > 0 ? d.model->flops() : 1e9);
  }
  const SgLinks links = make_links(zone, hw, stats_, node, &link_stat_);
  std::vector<std::vector<sg4::Link*>> paths(folds_.empty() ? 0 : D * D);
  for (size_t a = 0; a < D; ++a) {
    for (size_t b = 0; b < D; ++b) {
      if (a == b || !hosts_[d0 + a] || !hosts_[d0 + b]) continue;
      RouteFactors other;  // every node's factors are node 0's
      const std::vector<SgLink> path = make_route(hw, links, local[a * D + b], a, b, routes_[node * D * D + a * D + b],
                                                  node == 0 ? factors_[a * D + b] : other);
      std::vector<sg4::LinkInRoute> sg;
      for (const auto& l : path) sg.emplace_back(l.link);
      if (!paths.empty())
        for (const auto& l : path) paths[a * D + b].push_back(l.link);
      zone->add_route(hosts_[d0 + a]->get_netpoint(), hosts_[d0 + b]->get_netpoint(), nullptr, nullptr, sg, false);
    }
  }
  add_views(zone, hw, node, local, links);
  add_folds(zone, node, D, paths, port);
  zone->seal();
}

// Each layout of this node gets a host, and a route to every other layout
// of the node whose ranks' devices all differ from its own: every rank's
// route, one after the other (a link two ranks cross is listed twice). With
// a star fabric, a route to the gateway and back: every rank's route to it,
// and each fabric link the ranks' flows cross once more per rank beyond the
// first (the fabric's own route adds it once; the core with the way out).
void Platform::add_folds(sg4::NetZone* zone, size_t node, size_t D, const std::vector<std::vector<sg4::Link*>>& paths,
                         const FabricPort& port) {
  const size_t d0 = node * D;
  std::vector<uint32_t> here;
  for (size_t i = 0; i < folds_.size(); ++i) {
    if (folds_[i][0] / D != node) continue;
    bool ok = true;
    for (size_t d : folds_[i]) ok = ok && hosts_[d];
    if (!ok) continue;
    fold_hosts_[i] = zone->create_host("fold" + std::to_string(i) + ":" + hw_->devices[folds_[i][0]].name, 1e9);
    here.push_back(static_cast<uint32_t>(i));
  }
  auto chain = [&](const std::vector<size_t>& from, const std::vector<size_t>& to, size_t from_gw, size_t to_gw,
                   std::vector<sg4::LinkInRoute>& out) {
    // To or from the gateway, each rank's end is its adapter view's where it has one.
    const std::vector<size_t> ends = fabric_ends(from_gw < D ? to : from);
    for (size_t r = 0; r < from.size(); ++r) {
      const size_t a = from_gw < D ? from_gw : from[r] - d0, b = to_gw < D ? to_gw : to[r] - d0;
      if (a == b) return false;
      if ((from_gw < D || to_gw < D) && ends[r] >= n_) {
        for (sg4::Link* l : from_gw < D ? views_[ends[r] - n_].in : views_[ends[r] - n_].out) out.emplace_back(l);
        continue;
      }
      for (sg4::Link* l : paths[a * D + b]) out.emplace_back(l);
    }
    return true;
  };
  for (uint32_t i : here)
    for (uint32_t j : here) {
      if (i == j || folds_[i].size() != folds_[j].size()) continue;
      std::vector<sg4::LinkInRoute> sg;
      if (chain(folds_[i], folds_[j], D, D, sg))
        zone->add_route(fold_hosts_[i]->get_netpoint(), fold_hosts_[j]->get_netpoint(), nullptr, nullptr, sg, false);
    }
  if (!port.up) return;
  sg4::Host* gw = hosts_[d0 + port.gateway];
  for (uint32_t i : here) {
    const std::vector<size_t>& f = folds_[i];
    std::vector<sg4::LinkInRoute> out, in;
    if (!chain(f, f, D, port.gateway, out) || !chain(f, f, port.gateway, D, in)) continue;
    for (size_t r = 1; r < f.size(); ++r) {
      out.emplace_back(port.up);
      out.emplace_back(port.core);
      in.emplace_back(port.down);
    }
    zone->add_route(fold_hosts_[i]->get_netpoint(), gw->get_netpoint(), nullptr, nullptr, out, false);
    zone->add_route(gw->get_netpoint(), fold_hosts_[i]->get_netpoint(), nullptr, nullptr, in, false);
  }
}

// A node whose gateway is a port where several adapters meet: each host
// memory's adapters are those nearer to it than to any other host memory
// (fewest hops, then least latency, then first listed), in the node's
// order; memory_default_ the one its own routes to and from the gateway
// both take (none where they take two).
void Platform::find_memory_adapters(const Hardware& hw, const Topology& topo, const std::vector<Route>& local,
                                    size_t gateway) {
  const size_t D = node_devices_;
  gateway_ = gateway;
  memory_adapters_.assign(D, {});
  auto role = [&](size_t d) { return hw.devices[d].model->role(); };
  auto other_end = [&](const LinkEntry& le, size_t d) {
    const int a = hw.device_index(le.a), b = hw.device_index(le.b);
    return a == static_cast<int>(d) ? b : b == static_cast<int>(d) ? a : -1;
  };
  std::vector<size_t> adapters;
  for (size_t l = 0; l < hw.cluster.node_links; ++l) {
    const int e = other_end(hw.links[l], gateway);
    if (e >= 0 && static_cast<size_t>(e) < D && role(static_cast<size_t>(e)) == DeviceRole::Network)
      adapters.push_back(static_cast<size_t>(e));
  }
  if (adapters.size() < 2) return;
  auto cost = [&](size_t a, size_t b) {
    const Route r = topo.route(a, b);
    double lat = 0;
    for (const Hop& h : r) lat += hw.links[h.link].latency_s;
    return std::make_pair(r.size(), lat);
  };
  std::sort(adapters.begin(), adapters.end());
  for (size_t a : adapters) {
    size_t best = D;
    std::pair<size_t, double> best_cost{0, 0};
    for (size_t m = 0; m < D; ++m) {
      if (role(m) != DeviceRole::Memory) continue;
      const auto c = cost(a, m);
      if (best == D || c < best_cost) best = m, best_cost = c;
    }
    if (best < D) memory_adapters_[best].push_back(a);
  }
  memory_default_.assign(D, D);
  for (size_t m = 0; m < D; ++m) {
    std::vector<size_t>& mine = memory_adapters_[m];
    const Route &out = local[m * D + gateway], &in = local[gateway * D + m];
    // The adapters on the memory's own routes: the hop next to the gateway's other end
    // (the two directions may take different ones where two are as near).
    const int a = out.empty() ? -1 : other_end(hw.links[out.back().link], gateway);
    const int b = in.empty() ? -1 : other_end(hw.links[in.front().link], gateway);
    auto mine_has = [&](int x) {
      return x >= 0 && std::find(mine.begin(), mine.end(), static_cast<size_t>(x)) != mine.end();
    };
    if (mine.size() < 2 || !mine_has(a) || !mine_has(b)) {
      mine.clear();  // one adapter, or its routes reach the gateway some other way: no views
      continue;
    }
    // Its own routes stand for an adapter only where both directions take it.
    if (a == b) memory_default_[m] = static_cast<size_t>(a);
  }
}

// A host for each host memory and each of its adapters but its own route's, whose
// routes to and from the gateway go through that adapter (the memory's own
// route to it, then the adapter's to the gateway).
void Platform::add_views(sg4::NetZone* zone, const Hardware& hw, size_t node, const std::vector<Route>& local,
                         const SgLinks& links) {
  const size_t D = node_devices_, d0 = node * D, gw = gateway_;
  for (size_t m = 0; m < memory_adapters_.size(); ++m)
    for (size_t a : memory_adapters_[m]) {
      if (a == memory_default_[m] || !hosts_[d0 + m] || !hosts_[d0 + gw]) continue;
      Route out = local[m * D + a], in = local[gw * D + a];
      out.insert(out.end(), local[a * D + gw].begin(), local[a * D + gw].end());
      in.insert(in.end(), local[a * D + m].begin(), local[a * D + m].end());
      View v;
      v.device = d0 + m;
      v.adapter = a;
      v.host = zone->create_host(hw.devices[d0 + m].name + "~" + hw.cluster.local_names[a], 1e9);
      PlatformRoute pr;
      RouteFactors rf;
      std::vector<sg4::LinkInRoute> sg_out, sg_in;
      for (const SgLink& l : make_route(hw, links, out, m, gw, pr, rf)) {
        v.out.push_back(l.link);
        v.stats.push_back(l.stat);
        sg_out.emplace_back(l.link);
      }
      pr = PlatformRoute{};
      rf = RouteFactors{};
      for (const SgLink& l : make_route(hw, links, in, gw, m, pr, rf)) {
        v.in.push_back(l.link);
        v.stats.push_back(l.stat);
        sg_in.emplace_back(l.link);
      }
      zone->add_route(v.host->get_netpoint(), hosts_[d0 + gw]->get_netpoint(), nullptr, nullptr, sg_out, false);
      zone->add_route(hosts_[d0 + gw]->get_netpoint(), v.host->get_netpoint(), nullptr, nullptr, sg_in, false);
      view_of_.emplace(std::make_pair(d0 + m, a), n_ + views_.size());
      views_.push_back(std::move(v));
    }
}

std::vector<size_t> Platform::fabric_ends(const std::vector<size_t>& layout) const {
  std::vector<size_t> ends(layout);
  if (views_.empty()) return ends;
  // Per memory: the ranks that use it in all, then, rank by rank, those before.
  std::unordered_map<size_t, size_t> all, before;
  for (size_t d : layout) ++all[d];
  for (size_t r = 0; r < layout.size(); ++r) {
    const size_t d = layout[r];
    const size_t k = before[d]++;
    if (d >= n_) continue;
    const std::vector<size_t>& mine = memory_adapters_[d % node_devices_];
    if (mine.size() < 2) continue;
    // One rank alone keeps the memory's own route.
    const size_t a = mine[k * mine.size() / all[d]];
    if (all[d] > 1 && a != memory_default_[d % node_devices_]) ends[r] = view_of_.at({d, a});
  }
  return ends;
}

std::pair<std::vector<size_t>, std::vector<size_t>> Platform::rank_ends(const std::vector<size_t>& from,
                                                                        const std::vector<size_t>& to) const {
  std::pair<std::vector<size_t>, std::vector<size_t>> ends{from, to};
  if (views_.empty()) return ends;
  const std::vector<size_t> ef = fabric_ends(from), et = fabric_ends(to);
  for (size_t r = 0; r < from.size() && r < to.size(); ++r)
    if (crosses(from[r], to[r])) ends.first[r] = ef[r], ends.second[r] = et[r];
  return ends;
}

std::vector<uint32_t> Platform::view_links() const {
  std::vector<uint32_t> out;
  for (const View& v : views_) out.insert(out.end(), v.stats.begin(), v.stats.end());
  return out;
}

// Every pair folds, and the ranks' routes agree across pairs: for each rank
// r, the link at a position of the first rank's route is always the same
// link at that position of rank r's route, and no two of the first rank's
// links stand for one of rank r's. Then seeing the node from rank r is a
// renaming of its links that maps every rank's flow of every copy to a flow
// of the same copy, and the flows of one copy share alike: one flow per copy
// carrying each link's count of ranks is the same system. (Checked pair by
// pair only, a host's memory reaching the fabric through the first rank's
// adapter would pass, and slow the first rank's copies alone.)
bool Platform::folds_all(const std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>>& pairs) const {
  if (pairs.empty()) return false;
  const size_t T = pairs[0].first.size();
  std::vector<std::unordered_map<uint32_t, uint32_t>> to_rank(T), from_rank(T);
  for (const auto& [from, to] : pairs) {
    if (from.size() != T || to.size() != T) return false;
    const FoldedPair* p = folded(from, to);
    if (!p) return false;
    const std::vector<uint32_t>& first = p->ranks[0]->stats;
    for (size_t r = 1; r < T; ++r) {
      const std::vector<uint32_t>& mine = p->ranks[r]->stats;
      for (size_t k = 0; k < first.size(); ++k) {
        const auto a = to_rank[r].emplace(first[k], mine[k]);
        const auto b = from_rank[r].emplace(mine[k], first[k]);
        if (a.first->second != mine[k] || b.first->second != first[k]) return false;
      }
    }
  }
  return true;
}

const Platform::FoldedPair* Platform::folded(const std::vector<size_t>& from, const std::vector<size_t>& to) const {
  const auto a = fold_of_.find(from);
  const auto b = fold_of_.find(to);
  if (a == fold_of_.end() || b == fold_of_.end() || !fold_hosts_[a->second] || !fold_hosts_[b->second]) return nullptr;
  auto [it, fresh] = fold_pairs_.emplace(std::make_pair(a->second, b->second), nullptr);
  if (!fresh) return it->second.get();
  if (!fold_matches(from, to)) return nullptr;
  auto p = std::make_unique<FoldedPair>();
  p->src = fold_hosts_[a->second];
  p->dst = fold_hosts_[b->second];
  const auto [ef, et] = rank_ends(from, to);
  for (size_t r = 0; r < from.size(); ++r) p->ranks.push_back(&route(ef[r], et[r]));
  it->second = std::move(p);
  return it->second.get();
}

// Whether every rank sees the first rank's route: hop by hop the same
// bandwidth and latency, and as many of the ranks' flows on it; and the
// same size factors (media efficiency, calibrated curves).
bool Platform::fold_matches(const std::vector<size_t>& from, const std::vector<size_t>& to) const {
  const size_t T = from.size();
  if (to.size() != T) return false;
  const bool across = crosses(from[0], to[0]);
  for (size_t r = 0; r < T; ++r)
    if (from[r] == to[r] || !hosts_[from[r]] || !hosts_[to[r]] || crosses(from[r], to[r]) != across) return false;
  const auto [ef, et] = rank_ends(from, to);
  std::unordered_map<uint32_t, uint32_t> crossing;
  for (size_t r = 0; r < T; ++r)
    for (uint32_t st : route(ef[r], et[r]).stats) ++crossing[st];
  const PlatformRoute& r0 = route(ef[0], et[0]);
  if (r0.stats.empty()) return false;
  static constexpr double kSizes[] = {4096.0, 1048576.0, 1073741824.0};
  // A folded flow takes its factors and latency from the first rank's
  // devices' own route (its hosts stand for those devices), which the first
  // rank's end through an adapter view must then match.
  if (ef[0] != from[0] || et[0] != to[0]) {
    const PlatformRoute& own = route(from[0], to[0]);
    if (own.stats.size() != r0.stats.size() || own.latency_s != r0.latency_s) return false;
    for (size_t k = 0; k < own.stats.size(); ++k)
      if (stats_[own.stats[k]].bandwidth_Bps != stats_[r0.stats[k]].bandwidth_Bps ||
          stats_[own.stats[k]].latency_s != stats_[r0.stats[k]].latency_s)
        return false;
    for (double bytes : kSizes)
      if (bandwidth_factor(from[0], to[0], bytes) != bandwidth_factor(ef[0], et[0], bytes) ||
          latency_factor(from[0], to[0], bytes) != latency_factor(ef[0], et[0], bytes))
        return false;
  }
  for (size_t r = 1; r < T; ++r) {
    const PlatformRoute& rr = route(ef[r], et[r]);
    if (rr.stats.size() != r0.stats.size()) return false;
    for (size_t k = 0; k < rr.stats.size(); ++k) {
      const LinkStat &x = stats_[rr.stats[k]], &y = stats_[r0.stats[k]];
      if (x.bandwidth_Bps != y.bandwidth_Bps || x.latency_s != y.latency_s ||
          crossing[rr.stats[k]] != crossing[r0.stats[k]])
        return false;
    }
    for (double bytes : kSizes)
      if (bandwidth_factor(ef[r], et[r], bytes) != bandwidth_factor(ef[0], et[0], bytes) ||
          latency_factor(ef[r], et[r], bytes) != latency_factor(ef[0], et[0], bytes))
        return false;
  }
  return true;
}

// A route between nodes, as SimGrid routes it (the source's node to its
// gateway, the fabric, the destination's gateway to it), with the factors
// its links give (as make_route's for a route within a node).
const Platform::CrossRoute& Platform::cross(size_t from, size_t to) const {
  const uint64_t key = uint64_t(from) * ends_count() + to;
  if (auto it = cross_.find(key); it != cross_.end()) return it->second;
  CrossRoute c;
  PlatformRoute& r = c.route;
  RouteFactors& f = c.factors;
  std::vector<sg4::Link*> links;
  if (host(from) && host(to)) host(from)->route_to(host(to), links, nullptr);
  // An adapter view's media are its memory's.
  from = device_of_end(from);
  to = device_of_end(to);
  f.const_min_Bps = r.bottleneck_Bps = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < links.size(); ++i) {
    const auto s = link_stat_.find(links[i]);
    if (s == link_stat_.end()) continue;  // SimGrid's own loopback: no link of the hardware
    const LinkStat& st = stats_[s->second];
    const double bw = links[i]->get_bandwidth(), lat = links[i]->get_latency();
    r.stats.push_back(s->second);
    r.latency_s += lat;
    r.bottleneck_Bps = std::min(r.bottleneck_Bps, bw);
    if (i == 0 && st.device == static_cast<int32_t>(from)) {
      f.read_dev = hw_->devices[from].model.get(), f.read_Bps = bw, f.read_lat_s = lat, f.const_latency_s += lat;
    } else if (i + 1 == links.size() && st.device == static_cast<int32_t>(to)) {
      f.write_dev = hw_->devices[to].model.get(), f.write_Bps = bw, f.write_lat_s = lat, f.const_latency_s += lat;
    } else if (st.link >= 0 && !st.both) {
      const LinkEntry& le = hw_->links[static_cast<size_t>(st.link)];
      if (!st.forward && le.pageable_back_Bps > 0)
        r.pageable_Bps = r.pageable_Bps > 0 ? std::min(r.pageable_Bps, le.pageable_back_Bps) : le.pageable_back_Bps;
      if (!(st.forward ? le.bw_curve : le.bw_back_curve).empty())
        f.bw_curved.push_back(RouteFactors::CurvedHop{&le, st.forward, bw});
      else
        f.const_min_Bps = std::min(f.const_min_Bps, bw);
      if (!le.latency_curve.empty())
        f.lat_curved.push_back(&le);
      else
        f.const_latency_s += lat;
    } else if (!st.both) {  // a fabric link
      f.const_min_Bps = std::min(f.const_min_Bps, bw);
      f.const_latency_s += lat;
    }
  }
  f.bottleneck_Bps = r.bottleneck_Bps;
  f.latency_s = r.latency_s;
  return cross_.emplace(key, std::move(c)).first->second;
}

Platform::~Platform() {
  if (g_active == this) g_active = nullptr;
}

// A transfer of `bytes` is issued as requests of `request` (the whole
// transfer when unknown or larger), as many outstanding as there are
// requests, up to the device's queue limit.
void Platform::requests(double request, double bytes, double* req, int* qd) {
  *req = bytes;
  *qd = 1;
  if (request > 0 && request < bytes) {
    *req = request;
    // Relative slack so that k blocks' worth of bytes counts as k requests.
    const double n = std::ceil(bytes / request * (1 - 1e-12));
    *qd = static_cast<int>(std::min<double>(n, kMaxQueueDepth));
  }
}

double Platform::bandwidth_factor(size_t from, size_t to, double bytes) const {
  if (from >= ends_count() || to >= ends_count() || from == to) return 1.0;
  const RouteFactors& f = factors(from, to);
  if (!(f.bottleneck_Bps > 0) || std::isinf(f.bottleneck_Bps)) return 1.0;
  double eff_min = f.const_min_Bps;
  if (f.read_dev || f.write_dev) {
    double req;
    int qd;
    requests(route_request_bytes(from, to), bytes, &req, &qd);
    if (f.read_dev) eff_min = std::min(eff_min, f.read_Bps * f.read_dev->read_efficiency(req, qd));
    if (f.write_dev) eff_min = std::min(eff_min, f.write_Bps * f.write_dev->write_efficiency(req, qd));
  }
  for (const auto& h : f.bw_curved) eff_min = std::min(eff_min, h.nominal_Bps * h.link->bandwidth_factor(h.forward, bytes));
  // Every term is at most its link's nominal bandwidth and at least the
  // bottleneck when nothing applies, so this is exactly 1 without curves.
  if (eff_min >= f.bottleneck_Bps) return 1.0;
  return std::max(eff_min / f.bottleneck_Bps, kMinFactor);
}

double Platform::latency_factor(size_t from, size_t to, double bytes) const {
  if (from >= ends_count() || to >= ends_count() || from == to) return 1.0;
  const RouteFactors& f = factors(from, to);
  // A latency curve on a route whose nominal latency is 0 cannot be expressed
  // as a factor; give such links a nominal latency_us.
  if (!(f.latency_s > 0)) return 1.0;
  double lat = f.const_latency_s;
  for (const LinkEntry* l : f.lat_curved) lat += l->latency_at(bytes);
  // A media model whose efficiency is below 1 charges every request its
  // latency, the first one included (Little's law); the media link's own
  // latency would then count the first request twice.
  // Only where that media is what limits the transfer: behind a slower link
  // the media's latency is the first byte's and stays.
  if (f.read_dev || f.write_dev) {
    double req;
    int qd;
    requests(route_request_bytes(from, to), bytes, &req, &qd);
    double other = f.const_min_Bps;
    for (const auto& h : f.bw_curved) other = std::min(other, h.nominal_Bps * h.link->bandwidth_factor(h.forward, bytes));
    const double er = f.read_dev ? f.read_dev->read_efficiency(req, qd) : 1.0;
    const double ew = f.write_dev ? f.write_dev->write_efficiency(req, qd) : 1.0;
    const double rd = f.read_dev ? f.read_Bps * er : other, wr = f.write_dev ? f.write_Bps * ew : other;
    if (f.read_dev && er < 1.0 && rd <= std::min(other, wr)) lat -= f.read_lat_s;
    else if (f.write_dev && ew < 1.0 && wr <= std::min(other, rd)) lat -= f.write_lat_s;
  }
  if (lat == f.latency_s) return 1.0;
  return std::max(lat, 0.0) / f.latency_s;
}

bool Platform::ends(const sg4::Host* src, const sg4::Host* dst, size_t* from, size_t* to) const {
  auto a = device_of_.find(src);
  if (a == device_of_.end()) return false;
  auto b = device_of_.find(dst);
  if (b == device_of_.end()) return false;
  *from = a->second;
  *to = b->second;
  return true;
}

double Platform::bandwidth_cb(double size, const sg4::Host* src, const sg4::Host* dst,
                              const std::vector<sg4::Link*>& /*links*/,
                              const std::unordered_set<sg4::NetZone*>& /*zones*/) {
  size_t a = 0, b = 0;
  if (!g_active || !g_active->ends(src, dst, &a, &b)) return 1.0;
  return g_active->bandwidth_factor(a, b, size);
}

double Platform::latency_cb(double size, const sg4::Host* src, const sg4::Host* dst,
                            const std::vector<sg4::Link*>& links,
                            const std::unordered_set<sg4::NetZone*>& /*zones*/) {
  size_t a = 0, b = 0;
  if (!g_active || !g_active->ends(src, dst, &a, &b)) return 1.0;
  const double factor = g_active->latency_factor(a, b, size);
  if (g_active->fold_host_set_.empty() || !g_active->fold_host_set_.count(src)) return factor;
  // A folded flow's route repeats links SimGrid adds the latency of each
  // time: its latency is the first rank's route's.
  double repeated = 0;
  for (const sg4::Link* l : links) repeated += l->get_latency();
  const double own = g_active->route(a, b).latency_s;
  if (!(repeated > 0) || !(own > 0)) return factor;
  return std::max(factor * own / repeated, kMinFactor);
}

std::vector<double> time_transfers_us(const Hardware& hw, size_t from, size_t to, const std::vector<TimedTransfer>& transfers) {
  Topology topo(hw);
  start_simgrid();
  Platform p(hw, topo);
  std::vector<double> out;
  sg4::Actor::create("transfers", p.controller(), [&] {
    for (const TimedTransfer& x : transfers) {
      p.set_request_bytes(x.request_bytes);
      const double t0 = sg4::Engine::get_clock();
      sg4::CommPtr c = sg4::Comm::sendto_async(p.host(from), p.host(to), static_cast<uint64_t>(x.bytes));
      c->wait();
      out.push_back((sg4::Engine::get_clock() - t0) * 1e6);
    }
  });
  sg4::Engine::get_instance()->run();
  return out;
}

}  // namespace kvtier
