// The GPU's compute stream: a kernel is a SimGrid exec on the GPU's host,
// run from the actor that launches it (the kernels of one stream never
// overlap), its time added to the GPU's busy time and, with a timeline, a
// slice on the GPU's track. The single-batch pipeline and serving's paged
// pipeline launch their kernels here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/counters.h"
#include "sim/core/timeline.h"

namespace simgrid::s4u {
class Host;
}

namespace kvtier {

class Platform;

class GpuStream {
 public:
  // When a kernel ran, in simulated seconds.
  struct Span {
    double t0 = 0, t1 = 0;
  };
  GpuStream(Platform& platform, size_t gpu_dev, EngineCounters& c, Timeline& timeline, uint32_t track);
  // A kernel of `seconds` on the GPU; returns once it is done. Its work is
  // placed in the platform's activity windows over the kernel's span, or,
  // with place_work false, by the caller (place_work) over a longer one.
  Span run(double seconds, bool place_work = true);
  // `seconds` of this GPU's (and its ranks') work spread over t0..t1.
  void place_work(double seconds, double t0, double t1);
  // A tensor-parallel instance's other ranks: each runs its shard of every
  // kernel in the same time (their work is counted on their GPUs, and with
  // a timeline each has its own track, `names` its GPUs' names).
  void mirror_to(std::vector<size_t> gpus, const std::vector<std::string>& names);
  // Whether slices are recorded: their names and arguments are built only then.
  bool traced() const { return timeline_.enabled(); }
  // A kernel's slice on the GPU's track and on each rank's.
  void slice(const std::string& name, const Span& k, const nlohmann::json& args);

 private:
  simgrid::s4u::Host* host_;
  Platform& platform_;
  size_t gpu_dev_;
  EngineCounters& c_;
  Timeline& timeline_;
  uint32_t track_;
  std::vector<size_t> mirrors_;
  std::vector<uint32_t> mirror_tracks_;
};

}  // namespace kvtier
