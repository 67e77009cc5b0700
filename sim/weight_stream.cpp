#include "sim/weight_stream.h"

namespace kvtier {

WeightStream::WeightStream(const WeightPlan& plan, double layer_bytes, uint32_t layers, Homes homes)
    : plan_(plan), layer_bytes_(layer_bytes), layers_(layers), homes_(homes) {}

JobId WeightStream::load(uint32_t layer, int32_t step, JobBoard& board,
                         const std::function<Stream&(size_t, size_t)>& stream) {
  if (!streams()) return kNoJob;
  const size_t gpu = static_cast<size_t>(homes_.gpu), dram = static_cast<size_t>(homes_.dram);
  const double from_dram = plan_.cpu * layer_bytes_, from_disk = plan_.disk * layer_bytes_;
  JobId last = kNoJob;
  auto job = [&](size_t from, size_t to, double bytes, std::vector<JobId> deps) {
    TransferJob j{board.create(), from, to, bytes, std::move(deps), -1, 0, "weights"};
    j.step = step;
    j.layer = static_cast<int32_t>(layer);
    const JobId id = j.id;
    stream(from, to).submit(std::move(j));
    return id;
  };
  if (from_dram > 0) {
    last = job(dram, gpu, from_dram, {});
    to_gpu_ += from_dram;
  }
  if (from_disk > 0) {
    // Disk to DRAM, then on to the GPU, as FlexGen's disk tensors do.
    const JobId read = job(static_cast<size_t>(homes_.disk), dram, from_disk, {});
    last = job(dram, gpu, from_disk, {read});
    from_disk_ += from_disk;
    to_gpu_ += from_disk;
  }
  ++loads_;
  return last;
}

}  // namespace kvtier
