// A prompt's KV pushed layer by layer from the GPU that prefills it to the
// GPU that will decode it (Mooncake, DistServe, Splitwise): each layer's KV
// goes as soon as the prefill has computed that layer, once the receiver
// holds room for it. The paged pipeline pushes the layers it computes while
// `room` holds; layers computed before the receiver had room wait on the
// prefill GPU and go in one transfer when room appears (the driver's
// part). Shared state between the two sides, not a callback: the pipeline
// only reads `room` and writes what it sent.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sim/core/job.h"

namespace kvtier {

struct KvPush {
  size_t to = 0;           // the receiving GPU (the first rank's; each rank pushes its share to its peer)
  double layer_bytes = 0;  // this prompt's KV of one layer, one rank's share
  uint32_t layers = 0;     // the model's layers
  bool room = false;       // the receiver holds the blocks: layers go as they are computed
  uint32_t computed = 0;   // layers whose KV the prefill has computed
  uint32_t sent = 0;       // layers submitted for transfer (a prefix of the computed ones)
  JobId last = kNoJob;     // the last transfer submitted (one stream, in order: it lands last)
  bool complete() const { return sent == layers; }
};

}  // namespace kvtier
