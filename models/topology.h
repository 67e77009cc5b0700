// The hardware as a graph (Boost.Graph): devices and switches are vertices,
// links are edges. Routes between devices are shortest paths by latency.
#pragma once

#include <cstdint>
#include <vector>

#include "models/hardware.h"

namespace kvtier {

struct Hop {
  uint32_t link;  // index into Hardware::links
  bool forward;   // true: traversed a -> b
};
using Route = std::vector<Hop>;

class Topology {
 public:
  explicit Topology(const Hardware& hw);
  // Links from device `from` to device `to` (indices into Hardware::devices).
  // Throws ConfigError if they are not connected.
  Route route(size_t from, size_t to) const;

 private:
  const Hardware& hw_;
};

}  // namespace kvtier
