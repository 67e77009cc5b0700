#include "models/hardware.h"

#include <algorithm>

namespace kvtier {

int Hardware::device_index(const std::string& n) const {
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == n) return static_cast<int>(i);
  return -1;
}

const DeviceEntry& Hardware::device(const std::string& n) const {
  int i = device_index(n);
  if (i < 0) throw ConfigError("hardware: no device named '" + n + "'");
  return devices[static_cast<size_t>(i)];
}

ParamList hardware_params() {
  return {
      str("name", "unnamed", "name of this hardware description"),
      any("devices", nullptr, "object: device name -> {\"kind\": ..., parameters of that kind}", ParamType::Object),
      any("links", nullptr, "object: link name -> {\"ends\": [a, b], bandwidth_GBps, latency_us, duplex}",
          ParamType::Object),
      any("tiers", nullptr, "array of device names that hold KV, fastest first", ParamType::Array),
      str("gpu", "", "the device that runs attention (default: the only device of kind gpu)"),
  };
}

ParamList link_params() {
  return {
      any("ends", nullptr, "[a, b]: the two devices or switches it connects; forward is a -> b", ParamType::Array),
      positive("bandwidth_GBps", nullptr, "bandwidth per direction (split) or in total (shared), GB/s"),
      num("bandwidth_back_GBps", 0.0, "split links only: b -> a bandwidth if different, GB/s (0: same)", 0),
      num("latency_us", 1.0, "one-way latency, microseconds", 0),
      str("duplex", "split", "split: directions independent (PCIe); shared: both directions share the bandwidth; "
                             "fatpipe: every flow gets the full bandwidth",
          {"split", "shared", "fatpipe"}),
  };
}

Hardware parse_hardware(json& hw, const std::string& where) {
  resolve_params(hw, hardware_params(), where);
  Hardware out;
  out.name = hw["name"].get<std::string>();
  const auto& reg = Registry<DeviceModel>::instance();
  for (auto& [name, dev] : hw["devices"].items()) {
    std::string path = where + ".devices." + name;
    if (!dev.is_object() || !dev.contains("kind") || !dev["kind"].is_string())
      throw ConfigError(path + ": expected an object with a \"kind\" (one of the device kinds; see `kvtier list devices`)");
    DeviceEntry e;
    e.name = name;
    e.kind = dev["kind"].get<std::string>();
    const auto& entry = reg.find(e.kind, path + ".kind");
    resolve_params(dev, entry.params, path, {"kind"});
    e.model = entry.make(dev);
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
    e.bw_Bps = get_num(l, "bandwidth_GBps") * kGB;
    double back = get_num(l, "bandwidth_back_GBps");
    e.bw_back_Bps = back > 0 ? back * kGB : e.bw_Bps;
    e.latency_s = get_num(l, "latency_us") * kUs;
    const std::string d = l["duplex"].get<std::string>();
    e.duplex = d == "split" ? Duplex::Split : d == "shared" ? Duplex::Shared : Duplex::FatPipe;
    out.links.push_back(e);
  }

  for (size_t i = 0; i < hw["tiers"].size(); ++i) {
    const json& t = hw["tiers"][i];
    std::string path = where + ".tiers[" + std::to_string(i) + "]";
    if (!t.is_string()) throw ConfigError(path + ": expected a device name");
    std::string n = t.get<std::string>();
    int di = out.device_index(n);
    if (di < 0) throw ConfigError(path + ": no device named '" + n + "'");
    if (!out.devices[static_cast<size_t>(di)].model->holds_kv())
      throw ConfigError(path + ": device '" + n + "' (kind " + out.devices[static_cast<size_t>(di)].kind +
                        ") cannot hold KV");
    if (std::count(out.tiers.begin(), out.tiers.end(), n))
      throw ConfigError(path + ": device '" + n + "' is listed twice");
    out.tiers.push_back(n);
  }
  if (out.tiers.empty()) throw ConfigError(where + ".tiers: at least one KV tier is required");

  out.gpu = hw["gpu"].get<std::string>();
  if (out.gpu.empty()) {
    for (const auto& d : out.devices)
      if (d.kind == "gpu") {
        if (!out.gpu.empty())
          throw ConfigError(where + ".gpu: several GPUs ('" + out.gpu + "', '" + d.name + "'); name the one that runs attention");
        out.gpu = d.name;
      }
    if (out.gpu.empty()) throw ConfigError(where + ".devices: no device of kind gpu to run attention");
  } else if (out.device_index(out.gpu) < 0) {
    throw ConfigError(where + ".gpu: no device named '" + out.gpu + "'");
  }
  // A GPU tier must be the top tier: KV is produced there.
  for (size_t i = 1; i < out.tiers.size(); ++i)
    if (out.tiers[i] == out.gpu) throw ConfigError(where + ".tiers: the GPU '" + out.gpu + "' must be the first tier");
  return out;
}

}  // namespace kvtier
