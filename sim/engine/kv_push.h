// A prompt's KV pushed layer by layer from the GPU that prefills it to the
// GPU that will decode it (Mooncake, DistServe, Splitwise): each layer's KV
// of each prefill chunk goes as soon as the prefill has computed that layer
// of that chunk, once the receiver holds room for it. The paged pipeline
// pushes what it computes while `room` holds; what was computed before the
// receiver had room waits on the prefill GPU and goes in one transfer when
// room appears (the driver's part). Shared state between the two sides, not
// a callback: the pipeline only reads `room` and writes what it sent.
// Counted in token-layers (one token's KV of one layer), whole numbers, so
// that a prompt's chunks add up to its KV exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/core/job.h"

namespace kvtier {

struct KvPush {
  size_t to = 0;                  // the receiving GPU (the first rank's; each rank pushes its share to its peer)
  double token_layer_bytes = 0;   // one token's KV of one layer, one rank's share
  uint64_t tokens = 0;            // the prompt's whole blocks' tokens: what goes of every layer
  uint64_t skip = 0;              // tokens already counted that a recomputed prefill computes again (not resent)
  bool room = false;              // the receiver holds the blocks: layers go as they are computed
  bool started = false;           // a prefill chunk of the prompt has been computed here
  // Per pipeline stage (one without stages): each stage's GPUs hold their
  // layers' KV and send it to their peers on the decode side, on their own.
  struct Stage {
    uint64_t layers = 0;          // the layers it computes
    uint64_t computed = 0;        // token-layers whose KV it has computed (or found cached)
    uint64_t sent = 0;            // token-layers submitted for transfer (a prefix of the computed ones)
    JobId last = kNoJob;          // the last transfer submitted (one stream per rank, in order: it lands last)
  };
  std::vector<Stage> stages;
  bool complete() const {
    for (const Stage& s : stages)
      if (s.sent != tokens * s.layers) return false;
    return true;
  }
};

// One iteration's part of a pushed prompt: the tokens of each layer's KV it
// adds (its chunk; with the first chunk the prefix already in place, with
// the last the rest of the last block).
struct PushChunk {
  KvPush* push = nullptr;
  uint32_t tokens = 0;
};

}  // namespace kvtier
