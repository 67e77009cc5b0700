#include "sim/platform.h"

#include <xbt/log.h>

#include <algorithm>
#include <limits>

namespace kvtier {

sg4::Engine& start_simgrid() {
  static int argc = 1;
  static char arg0[] = "kvtier";
  static char* argv[] = {arg0, nullptr};
  static sg4::Engine engine(&argc, argv);
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

namespace {
struct SgLink {
  sg4::Link* link;
  uint32_t stat;
};
}  // namespace

Platform::Platform(const Hardware& hw, const Topology& topo) : n_(hw.devices.size()) {
  auto* zone = sg4::create_full_zone("kvtier");
  controller_ = zone->create_host("kvtier.controller", 1e9);
  hosts_.assign(n_, nullptr);
  for (size_t i = 0; i < n_; ++i) {
    const auto& d = hw.devices[i];
    if (d.model->role() == DeviceRole::Switch) continue;
    double speed = d.model->flops() > 0 ? d.model->flops() : 1e9;
    hosts_[i] = zone->create_host(d.name, speed);
  }
  auto new_link = [&](const std::string& name, double bw, double lat, sg4::Link::SharingPolicy pol) {
    stats_.push_back(LinkStat{name});
    auto* l = zone->create_link(name, bw)->set_latency(lat)->set_sharing_policy(pol);
    return SgLink{l, static_cast<uint32_t>(stats_.size() - 1)};
  };
  // Topology links: one SimGrid link per direction for split duplex.
  std::vector<SgLink> fwd(hw.links.size()), back(hw.links.size());
  for (size_t i = 0; i < hw.links.size(); ++i) {
    const auto& l = hw.links[i];
    if (l.duplex == Duplex::Split) {
      fwd[i] = new_link(l.name + ":" + l.a + "->" + l.b, l.bw_Bps, l.latency_s, sg4::Link::SharingPolicy::SHARED);
      back[i] = new_link(l.name + ":" + l.b + "->" + l.a, l.bw_back_Bps, l.latency_s, sg4::Link::SharingPolicy::SHARED);
    } else {
      auto pol = l.duplex == Duplex::Shared ? sg4::Link::SharingPolicy::SHARED : sg4::Link::SharingPolicy::FATPIPE;
      fwd[i] = back[i] = new_link(l.name, l.bw_Bps, l.latency_s, pol);
    }
  }
  // Media in front of memory and storage devices.
  std::vector<SgLink> media_read(n_, SgLink{nullptr, 0}), media_write(n_, SgLink{nullptr, 0});
  for (size_t i = 0; i < n_; ++i) {
    const auto& m = *hw.devices[i].model;
    if (m.read_Bps() <= 0) continue;
    const std::string& n = hw.devices[i].name;
    if (m.media_shared()) {
      media_read[i] = media_write[i] = new_link(n + ".media", m.read_Bps(), m.media_latency_s(), sg4::Link::SharingPolicy::SHARED);
    } else {
      media_read[i] = new_link(n + ".read", m.read_Bps(), m.media_latency_s(), sg4::Link::SharingPolicy::SHARED);
      media_write[i] = new_link(n + ".write", m.write_Bps(), m.media_latency_s(), sg4::Link::SharingPolicy::SHARED);
    }
  }
  routes_.assign(n_ * n_, PlatformRoute{});
  for (size_t a = 0; a < n_; ++a) {
    for (size_t b = 0; b < n_; ++b) {
      if (a == b || !hosts_[a] || !hosts_[b]) continue;
      std::vector<SgLink> path;
      if (media_read[a].link) path.push_back(media_read[a]);
      for (const Hop& h : topo.route(a, b)) path.push_back(h.forward ? fwd[h.link] : back[h.link]);
      if (media_write[b].link) path.push_back(media_write[b]);
      PlatformRoute& r = routes_[a * n_ + b];
      r.bottleneck_Bps = std::numeric_limits<double>::infinity();
      std::vector<sg4::LinkInRoute> sg;
      for (const auto& l : path) {
        sg.emplace_back(l.link);
        r.stats.push_back(l.stat);
        r.latency_s += l.link->get_latency();
        r.bottleneck_Bps = std::min(r.bottleneck_Bps, l.link->get_bandwidth());
      }
      zone->add_route(hosts_[a]->get_netpoint(), hosts_[b]->get_netpoint(), nullptr, nullptr, sg, false);
    }
  }
  zone->seal();
}

}  // namespace kvtier
