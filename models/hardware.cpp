#include "models/hardware.h"

#include <algorithm>
#include <string_view>

#include "models/calibration.h"
#include "models/pcie.h"

namespace kvtier {

// PCIe's energy per bit on the wire: NVIDIA gives NVLink-C2C's 1.3 pJ/bit as
// 5x more efficient than PCIe Gen 5 (Grace Hopper whitepaper), 6.5 pJ/bit.
constexpr double kPciePJPerBit = 6.5;

int Hardware::device_index(const std::string& n) const {
  if (cluster.nodes > 1) {
    // "n<k>.<local>": the node's index and a search among one node's names,
    // not among every node's.
    const size_t dot = n.find('.');
    if (n.size() < 3 || n[0] != 'n' || dot == std::string::npos || dot < 2) return -1;
    size_t k = 0;
    for (size_t i = 1; i < dot; ++i) {
      if (n[i] < '0' || n[i] > '9' || (i == 1 && n[i] == '0' && dot > 2)) return -1;
      k = k * 10 + static_cast<size_t>(n[i] - '0');
      if (k >= cluster.nodes) return -1;
    }
    const std::string_view local = std::string_view(n).substr(dot + 1);
    for (size_t i = 0; i < cluster.local_names.size(); ++i)
      if (cluster.local_names[i] == local) return static_cast<int>(k * cluster.node_devices + i);
    return -1;
  }
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == n) return static_cast<int>(i);
  return -1;
}

int Hardware::device_index(size_t node, const std::string& local) const {
  if (node >= cluster.nodes) return -1;
  if (cluster.nodes == 1) return device_index(local);
  for (size_t i = 0; i < cluster.local_names.size(); ++i)
    if (cluster.local_names[i] == local) return static_cast<int>(node * cluster.node_devices + i);
  return -1;
}

const DeviceEntry& Hardware::device(const std::string& n) const {
  int i = device_index(n);
  if (i < 0) throw ConfigError("hardware: no device named '" + n + "'");
  return devices[static_cast<size_t>(i)];
}

double LinkEntry::bandwidth_at(bool forward, double bytes) const {
  const Curve& c = forward ? bw_curve : bw_back_curve;
  if (!c.empty()) return c(bytes);
  return forward ? bw_Bps : bw_back_Bps;
}

double LinkEntry::bandwidth_factor(bool forward, double bytes) const {
  double nominal = forward ? bw_Bps : bw_back_Bps;
  return nominal > 0 ? std::min(1.0, bandwidth_at(forward, bytes) / nominal) : 1.0;
}

double LinkEntry::latency_at(double bytes) const { return latency_curve.empty() ? latency_s : latency_curve(bytes); }

ParamList hardware_params() {
  return {
      str("name", "unnamed", "name of this hardware description"),
      any("devices", nullptr, "object: device name -> {\"kind\": ..., parameters of that kind}", ParamType::Object),
      any("links", nullptr, "object: link name -> {\"ends\": [a, b], bandwidth_GBps or pcie, latency_us, duplex, curves}",
          ParamType::Object),
      any("tiers", nullptr, "array of device names that hold KV, fastest first", ParamType::Array),
      str("gpu", "", "the device that runs attention (default: the only device of kind gpu)"),
      str("calibration", "", "calibration file whose curves replace constants (see docs/hardware.md); \"\" = none"),
      num("electricity_usd_per_kWh", 0.13, "price of electricity, US dollars per kWh, charged on purchased devices' energy", 0),
  };
}

ParamList link_params() {
  return {
      any("ends", nullptr, "[a, b]: the two devices or switches it connects; forward is a -> b", ParamType::Array),
      // 0 means "not given" (the rate comes from pcie), so a resolved config,
      // defaults filled in, validates again.
      num("bandwidth_GBps", 0.0,
          "bandwidth per direction (split) or in total (shared), GB/s; give this or pcie, not both (0: not given)", 0),
      str("pcie", "", "PCIe generation and width, e.g. \"gen4x16\": the rate is computed (models/pcie.h)"),
      integer("pcie_gen", 0, "PCIe generation, with pcie_lanes, instead of pcie (0 = unused)", 0, 5),
      integer("pcie_lanes", 0, "PCIe width (1, 2, 4, 8, 16), with pcie_gen", 0, 16),
      positive("pcie_max_payload_B", 256, "PCIe max payload per TLP, bytes"),
      num("pcie_tlp_overhead_B", 24, "PCIe bytes per TLP besides payload (framing, header, LCRC, DLLPs)", 0),
      num("bandwidth_back_GBps", 0.0, "split links only: b -> a bandwidth if different, GB/s (0: same)", 0),
      num("pageable_back_GBps", 0.0,
          "b -> a copies into pageable host memory (KV under policies.weights.pin_cache false): the rate at which the "
          "host relays them on from a pinned buffer, beside the link's own transfer, GB/s (0: no relay)", 0),
      num("duplex_efficiency", 1.0,
          "split links only: share of the two directions' summed bandwidth they get when both carry traffic "
          "(1 = independent; PCIe 5.0 x16 on an H200 measured 0.86)", 0.5, 1.0),
      num("latency_us", 1.0, "one-way latency, microseconds", 0),
      str("duplex", "split", "split: directions independent (PCIe); shared: both directions share the bandwidth; "
                             "fatpipe: every flow gets the full bandwidth",
          {"split", "shared", "fatpipe"}),
      curves_param({"forward_GBps", "backward_GBps", "latency_us"}),
      num("energy_pJ_per_bit", -1.0,
          "energy per bit crossing the link, pJ; -1: 6.5 for a PCIe link, 0 for any other (a structural join; "
          "give a fabric's own figure)", -1),
  };
}

// Exactly one of bandwidth_GBps, pcie or pcie_gen/pcie_lanes: two rates for
// one link would leave the reader guessing which one the simulator used.
static double link_rate_Bps(const json& l, const std::string& path, std::string* pcie_desc) {
  const double bw = get_num(l, "bandwidth_GBps");
  const std::string spec = l["pcie"].get<std::string>();
  const long long gen = get_int(l, "pcie_gen"), lanes = get_int(l, "pcie_lanes");
  const bool by_fields = gen > 0 || lanes > 0;
  const int given = (bw > 0) + !spec.empty() + by_fields;
  if (given == 0)
    throw ConfigError(path + ".bandwidth_GBps: the link has no rate; expected a bandwidth > 0 or a pcie rate (e.g. \"gen4x16\")");
  if (given > 1)
    throw ConfigError(path + ": give exactly one of bandwidth_GBps, pcie, or pcie_gen + pcie_lanes");
  if (bw > 0) return bw * kGB;
  PcieConfig c;
  if (!spec.empty()) {
    c = parse_pcie_spec(spec, path + ".pcie");
  } else {
    if (gen == 0 || lanes == 0) throw ConfigError(path + ": pcie_gen and pcie_lanes go together; one is missing");
    c.gen = static_cast<int>(gen);
    c.lanes = static_cast<int>(lanes);
    validate_pcie(c, path + ".pcie_lanes");
  }
  c.max_payload_B = get_num(l, "pcie_max_payload_B");
  c.tlp_overhead_B = get_num(l, "pcie_tlp_overhead_B");
  *pcie_desc = "gen" + std::to_string(c.gen) + "x" + std::to_string(c.lanes);
  return pcie_effective_Bps(c);
}

// Node 0's description copied into every node of the cluster, each device
// and link named "n<k>.<name>"; the tiers and the attention GPU are node 0's.
// The device models are shared (they are immutable).
static void replicate_nodes(Hardware& h) {
  const size_t n = h.cluster.nodes;
  std::vector<DeviceEntry> devices;
  std::vector<LinkEntry> links;
  devices.reserve(n * h.devices.size());
  links.reserve(n * h.links.size());
  for (size_t k = 0; k < n; ++k) {
    for (const DeviceEntry& d : h.devices) {
      devices.push_back(d);
      devices.back().name = node_qualified(n, k, d.name);
    }
    for (const LinkEntry& l : h.links) {
      links.push_back(l);
      LinkEntry& c = links.back();
      c.name = node_qualified(n, k, l.name);
      c.a = node_qualified(n, k, l.a);
      c.b = node_qualified(n, k, l.b);
    }
  }
  h.devices = std::move(devices);
  h.links = std::move(links);
  // Names already of a node ("n3.gpu0": a cluster's instance on another
  // node) stay; plain names are node 0's.
  const auto qualify = [&](const std::string& name) {
    return h.device_index(name) >= 0 ? name : node_qualified(n, 0, name);
  };
  for (std::string& t : h.tiers) t = qualify(t);
  h.gpu = qualify(h.gpu);
  std::map<std::string, KvCapacity> kv;
  for (auto& [tier, cap] : h.kv_capacity) kv[qualify(tier)] = cap;
  h.kv_capacity = std::move(kv);
}

// A tier or GPU named on another node of a cluster ("n<k>.<name>", as a
// cluster's instances name theirs): the node's own name, checked against
// the node's devices; the node's index is checked with the cluster. Any
// other name as it is.
static std::string node_local(const json& hw, const std::string& name) {
  if (!hw.contains("cluster") || !hw["cluster"].is_object()) return name;
  const auto nodes = hw["cluster"].find("nodes");
  if (nodes == hw["cluster"].end() || !nodes->is_number_integer() || nodes->get<long long>() < 2) return name;
  const size_t dot = name.find('.');
  if (name.size() < 3 || name[0] != 'n' || dot == std::string::npos || dot < 2) return name;
  long long k = 0;
  for (size_t i = 1; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || dot > 8) return name;
    k = k * 10 + (name[i] - '0');
  }
  if (k >= nodes->get<long long>() || std::to_string(k) != name.substr(1, dot - 1)) return name;
  const std::string local = name.substr(dot + 1);
  return hw.contains("devices") && hw["devices"].is_object() && hw["devices"].contains(local) ? local : name;
}

Hardware parse_hardware(json& hw, const std::string& where) {
  // kv_capacity is accepted but not filled in when absent: a config without
  // it resolves as before.
  resolve_params(hw, hardware_params(), where, {"kv_capacity", "cluster"});
  Hardware out;
  out.name = hw["name"].get<std::string>();
  if (!hw["devices"].is_object()) throw ConfigError(where + ".devices: expected an object: device name -> device");
  if (!hw["links"].is_object()) throw ConfigError(where + ".links: expected an object: link name -> link");
  const std::string cal = hw["calibration"].get<std::string>();
  if (!cal.empty()) merge_calibration(hw, load_calibration_file(cal, where + ".calibration"), cal);
  const auto& reg = Registry<DeviceModel>::instance();
  for (auto& [name, dev] : hw["devices"].items()) {
    std::string path = where + ".devices." + name;
    if (!dev.is_object() || !dev.contains("kind") || !dev["kind"].is_string())
      throw ConfigError(path + ": expected an object with a \"kind\" (one of the device kinds; see `kvtier list devices`)");
    DeviceEntry e;
    e.name = name;
    e.kind = dev["kind"].get<std::string>();
    const auto& entry = reg.find(e.kind, path + ".kind");
    resolve_params(dev, entry.params, path, {"kind", "power", "price"});
    // Constructors check what a ParamList cannot (a combination of keys, a
    // kernel that does not fit) and name the key relative to the device.
    try {
      e.model = entry.make(dev);
    } catch (const ConfigError& err) {
      throw ConfigError(path + "." + err.what());
    }
    try {
      e.power = make_power_model(e.kind, dev["power"], dev, *e.model, path + ".power");
    } catch (const ConfigError& err) {
      const std::string m = err.what();
      throw ConfigError(m.rfind(path, 0) == 0 ? m : path + ".power." + m);
    }
    e.price = parse_device_price(dev["price"], path + ".price");
    out.devices.push_back(std::move(e));
  }
  if (out.devices.empty()) throw ConfigError(where + ".devices: at least one device is required");

  for (auto& [name, l] : hw["links"].items()) {
    std::string path = where + ".links." + name;
    resolve_params(l, link_params(), path);
    const json& ends = l["ends"];
    if (ends.size() != 2 || !ends[0].is_string() || !ends[1].is_string())
      throw ConfigError(path + ".ends: expected two device names, got " + ends.dump());
    LinkEntry e;
    e.name = name;
    e.a = ends[0].get<std::string>();
    e.b = ends[1].get<std::string>();
    for (const auto& end : {e.a, e.b})
      if (out.device_index(end) < 0)
        throw ConfigError(path + ".ends: no device named '" + end + "' in " + where + ".devices");
    if (e.a == e.b) throw ConfigError(path + ".ends: a link needs two different ends");
    e.bw_Bps = link_rate_Bps(l, path, &e.pcie);
    double back = get_num(l, "bandwidth_back_GBps");
    e.bw_back_Bps = back > 0 ? back * kGB : e.bw_Bps;
    e.pageable_back_Bps = get_num(l, "pageable_back_GBps") * kGB;
    e.latency_s = get_num(l, "latency_us") * kUs;
    CurveSet curves = parse_curve_set(l, {"forward_GBps", "backward_GBps", "latency_us"}, path);
    if (curves.count("forward_GBps")) {
      e.bw_curve = curves["forward_GBps"].scaled(kGB);
      e.bw_Bps = e.bw_curve.max_y();
    }
    if (curves.count("backward_GBps")) {
      e.bw_back_curve = curves["backward_GBps"].scaled(kGB);
      e.bw_back_Bps = e.bw_back_curve.max_y();
    } else if (!e.bw_curve.empty() && !(back > 0)) {
      e.bw_back_curve = e.bw_curve;  // a symmetric link calibrated in one direction
      e.bw_back_Bps = e.bw_Bps;
    }
    if (curves.count("latency_us")) e.latency_curve = curves["latency_us"].scaled(kUs);
    const std::string d = l["duplex"].get<std::string>();
    e.duplex = d == "split" ? Duplex::Split : d == "shared" ? Duplex::Shared : Duplex::FatPipe;
    e.duplex_efficiency = get_num(l, "duplex_efficiency");
    const double pj = get_num(l, "energy_pJ_per_bit");
    if (pj >= 0 || pj == -1.0)
      e.energy_J_per_byte = (pj >= 0 ? pj : (e.pcie.empty() ? 0.0 : kPciePJPerBit)) * 8e-12;
    else
      throw ConfigError(path + ".energy_pJ_per_bit: expected a figure >= 0, or -1 for the default");
    if (e.duplex_efficiency < 1.0 && e.duplex != Duplex::Split)
      throw ConfigError(path + ".duplex_efficiency: only split-duplex links have two directions to share");
    out.links.push_back(e);
  }

  for (size_t i = 0; i < hw["tiers"].size(); ++i) {
    const json& t = hw["tiers"][i];
    std::string path = where + ".tiers[" + std::to_string(i) + "]";
    if (!t.is_string()) throw ConfigError(path + ": expected a device name");
    std::string n = t.get<std::string>();
    int di = out.device_index(node_local(hw, n));
    if (di < 0) throw ConfigError(path + ": no device named '" + n + "'");
    if (!out.devices[static_cast<size_t>(di)].model->holds_kv())
      throw ConfigError(path + ": device '" + n + "' (kind " + out.devices[static_cast<size_t>(di)].kind +
                        ") cannot hold KV");
    if (std::count(out.tiers.begin(), out.tiers.end(), n))
      throw ConfigError(path + ": device '" + n + "' is listed twice");
    out.tiers.push_back(n);
  }
  if (out.tiers.empty()) throw ConfigError(where + ".tiers: at least one KV tier is required");
  if (hw.contains("kv_capacity")) out.kv_capacity = parse_kv_capacity(hw["kv_capacity"], out.tiers, where + ".kv_capacity");

  out.electricity_usd_per_kWh = get_num(hw, "electricity_usd_per_kWh");
  out.gpu = hw["gpu"].get<std::string>();
  if (out.gpu.empty()) {
    for (const auto& d : out.devices)
      if (d.kind == "gpu") {
        if (!out.gpu.empty())
          throw ConfigError(where + ".gpu: several GPUs ('" + out.gpu + "', '" + d.name + "'); name the one that runs attention");
        out.gpu = d.name;
      }
    if (out.gpu.empty()) throw ConfigError(where + ".devices: no device of kind gpu to run attention");
  } else if (out.device_index(node_local(hw, out.gpu)) < 0) {
    throw ConfigError(where + ".gpu: no device named '" + out.gpu + "'");
  }
  // A GPU tier must be the top tier: KV is produced there.
  for (size_t i = 1; i < out.tiers.size(); ++i)
    if (out.tiers[i] == out.gpu) throw ConfigError(where + ".tiers: the GPU '" + out.gpu + "' must be the first tier");
  out.cluster.node_devices = out.devices.size();
  out.cluster.node_links = out.links.size();
  if (hw.contains("cluster")) {
    std::vector<std::string> names, kinds;
    for (const auto& d : out.devices) names.push_back(d.name), kinds.push_back(d.kind);
    out.cluster = parse_cluster(hw["cluster"], names, kinds, where + ".cluster");
    out.cluster.node_links = out.links.size();
    if (out.cluster.nodes > 1) replicate_nodes(out);
  }
  return out;
}

}  // namespace kvtier
