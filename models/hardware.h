// The hardware description: devices (each a registered kind), links between
// them, and the order of the KV tiers. Parsed and validated from the config's
// `hardware` section; see docs/hardware.md (kinds, PCIe rates, calibration).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/cluster.h"
#include "models/curve.h"
#include "models/device.h"
#include "models/kv_capacity.h"
#include "models/param.h"
#include "models/power/device_price.h"
#include "models/power/power_model.h"

namespace kvtier {

// Models are immutable once built: a Hardware may be copied and its copies
// share them (one parse serves every configuration with that hardware).
struct DeviceEntry {
  std::string name;
  std::string kind;
  std::shared_ptr<const DeviceModel> model;
  std::shared_ptr<const PowerModel> power;  // its `power` object (models/power/)
  DevicePrice price;                  // its `price` object
};

enum class Duplex { Split, Shared, FatPipe };

struct LinkEntry {
  std::string name;
  std::string a, b;         // ends; "forward" is a -> b
  double bw_Bps = 0;        // forward bandwidth
  double bw_back_Bps = 0;   // backward bandwidth (split links; equal to bw_Bps unless set)
  // b -> a copies into pageable host memory: the rate at which the host's
  // software relays them on from a pinned buffer, B/s (0: no relay).
  double pageable_back_Bps = 0;
  double latency_s = 0;
  Duplex duplex = Duplex::Split;
  // Split links: when both directions carry traffic, together they get this
  // share of the two directions' sum (1: independent directions).
  double duplex_efficiency = 1.0;
  std::string pcie;         // "gen4x16" when the rate came from PCIe gen/width, else ""
  // Calibrated size dependence (empty: constant). Bandwidth curves are in B/s,
  // the latency curve in seconds, all against transfer size in bytes. When a
  // bandwidth curve is given, bw_Bps/bw_back_Bps hold its peak.
  Curve bw_curve, bw_back_curve, latency_curve;
  double energy_J_per_byte = 0;  // each direction, per byte crossing the link

  // Bandwidth of one transfer of `bytes` in a direction, B/s.
  double bandwidth_at(bool forward, double bytes) const;
  // bandwidth_at / nominal bandwidth, in (0, 1]: the SimGrid bandwidth factor.
  double bandwidth_factor(bool forward, double bytes) const;
  double latency_at(double bytes) const;
};

struct Hardware {
  std::string name;
  std::vector<DeviceEntry> devices;
  std::vector<LinkEntry> links;
  std::vector<std::string> tiers;  // KV tiers, fastest first
  std::string gpu;                 // the device that runs attention
  double electricity_usd_per_kWh = 0;  // charged on the energy of purchased devices
  // hardware.kv_capacity: tiers whose KV room is given (models/kv_capacity.h);
  // the others' is what their memory holds after weights and reserve.
  std::map<std::string, KvCapacity> kv_capacity;

  // hardware.cluster (models/cluster.h): devices and links are node after
  // node, node_devices and node_links of each.
  ClusterLayout cluster;

  int device_index(const std::string& name) const;  // -1 if absent
  const DeviceEntry& device(const std::string& name) const;
  size_t nodes() const { return cluster.nodes; }
  // The node device `device` (an index into devices) belongs to, and its
  // index within that node (the same in every node).
  size_t node_of(size_t device) const { return cluster.nodes > 1 ? device / cluster.node_devices : 0; }
  size_t local_index(size_t device) const { return cluster.nodes > 1 ? device % cluster.node_devices : device; }
  // The device named `local` (as the node's description names it) in node
  // `node`; -1 if there is no such node or device.
  int device_index(size_t node, const std::string& local) const;
};

ParamList hardware_params();
ParamList link_params();

// Validates `hw` in place (defaults filled) and builds the description.
// `where` is the JSON path used in messages ("hardware").
Hardware parse_hardware(json& hw, const std::string& where);

}  // namespace kvtier
