// A network adapter (an RDMA NIC such as a ConnectX-7): where a node's PCIe
// tree meets the cluster fabric. It holds no KV and runs nothing; its
// bandwidth is on its links (its PCIe link to a switch, the fabric's
// `nic_GBps`). The platform makes it a host so that a node's zone can name
// it as the gateway SimGrid routes cross-node traffic through.
#include "models/device.h"

namespace kvtier {

class Nic : public DeviceModel {
 public:
  static ParamList params() { return {}; }
  explicit Nic(const json&) {}
  DeviceRole role() const override { return DeviceRole::Network; }
};
KVTIER_REGISTER(DeviceModel, Nic, "nic",
                "network adapter (RDMA NIC): a node's attachment to the cluster fabric; its rates are on its links");

}  // namespace kvtier
