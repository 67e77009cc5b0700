// A model's weights as data (FlexGen's weight placement): each layer's
// weights sit on the GPU, in host DRAM and on disk in the shares of a
// WeightPlan; the shares not on the GPU are copied to it layer by layer,
// from DRAM directly and from disk through DRAM, on the same Streams as KV
// traffic, so weight loads and KV fetches contend for the links they share.
// The layer pipeline decides when a layer's load is issued (one layer ahead
// with overlap, just before its compute without) and waits for it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "policies/weights.h"
#include "sim/streams.h"

namespace kvtier {

class WeightStream {
 public:
  // Devices the shares live on (-1: none); `layer_bytes` is one layer's
  // weights as stored (compressed if the plan compresses).
  struct Homes {
    int gpu = -1, dram = -1, disk = -1;
  };
  WeightStream(const WeightPlan& plan, double layer_bytes, uint32_t layers, Homes homes);

  const WeightPlan& plan() const { return plan_; }
  bool streams() const { return !plan_.all_on_gpu(); }
  // Resident bytes of the whole model on each home.
  double gpu_bytes() const { return plan_.gpu * layer_bytes_ * layers_; }
  double dram_bytes() const { return plan_.cpu * layer_bytes_ * layers_; }
  double disk_bytes() const { return plan_.disk * layer_bytes_ * layers_; }
  // GPU buffers for streamed weights: one layer's streamed share, two with
  // overlap (the layer computing and the one loading).
  double gpu_staging_bytes() const { return (plan_.overlap ? 2.0 : 1.0) * streamed_layer_bytes(); }
  // DRAM buffer a disk share passes through: one layer's disk share (two with overlap).
  double dram_staging_bytes() const { return (plan_.overlap ? 2.0 : 1.0) * plan_.disk * layer_bytes_; }
  double streamed_layer_bytes() const { return (plan_.cpu + plan_.disk) * layer_bytes_; }

  // Issues the copy of layer `layer`'s streamed share to the GPU; `stream`
  // gives the Stream between two devices. Returns the job the layer's
  // compute waits for (kNoJob when nothing streams). Every copy into the GPU
  // of one layer goes through one Stream in order, so the last one done
  // means all are.
  JobId load(uint32_t layer, int32_t step, JobBoard& board, const std::function<Stream&(size_t, size_t)>& stream);

  // Bytes copied so far, into the GPU and from disk into DRAM.
  double bytes_to_gpu() const { return to_gpu_; }
  double bytes_from_disk() const { return from_disk_; }
  uint64_t loads() const { return loads_; }

 private:
  WeightPlan plan_;
  double layer_bytes_;
  uint32_t layers_;
  Homes homes_;
  double to_gpu_ = 0, from_disk_ = 0;
  uint64_t loads_ = 0;
};

}  // namespace kvtier
