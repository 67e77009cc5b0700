// A CXL.mem expander (e.g. Micron CZ120): DRAM behind a CXL controller. Its
// bandwidth is the controller's (and is usually below the CXL link's: CZ120
// reaches ~36 GB/s on a Gen5 x8 link of 31.5 GB/s per direction, because reads
// and writes overlap); its latency is local DRAM's plus the controller and
// link round trip, which is how vendors and papers quote it ("+170-250 ns",
// "2-5x local DRAM"). The CXL link itself is a link in the hardware JSON
// ("pcie": "gen5x8": CXL 1.1/2.0 runs on the PCIe 5.0 PHY).
#include <cmath>

#include "models/media.h"

namespace kvtier {

class Cxl : public BusMemory {
 public:
  static ParamList params() {
    return {
        positive("capacity_GB", nullptr, "capacity available to KV, decimal GB"),
        positive("read_GBps", nullptr, "read bandwidth of the expander, GB/s"),
        num("write_GBps", 0.0, "write bandwidth, GB/s (0 = same as read)", 0),
        num("dram_latency_us", 0.1, "latency of local DRAM on the same host, microseconds", 0),
        num("added_latency_us", 0.2, "latency CXL adds over local DRAM, microseconds", 0),
        boolean("shared_bus", true, "reads and writes share one bandwidth (DRAM behind one controller)"),
        curves_param(MediaCurves::names()),
    };
  }
  explicit Cxl(const json& p)
      : BusMemory(p, get_num(p, "capacity_GB") * kGB, get_num(p, "read_GBps") * kGB,
                  (get_num(p, "write_GBps") > 0 ? get_num(p, "write_GBps") : get_num(p, "read_GBps")) * kGB,
                  (get_num(p, "dram_latency_us") + get_num(p, "added_latency_us")) * kUs, p.at("shared_bus").get<bool>()) {}
};
KVTIER_REGISTER(DeviceModel, Cxl, "cxl",
                "CXL memory expander: capacity, read/write bandwidth, DRAM latency plus the CXL added latency");

}  // namespace kvtier
