// Layer-wise KV streaming between a disaggregated cluster's prefill and
// decode instances (cluster.kv_transfer "layerwise"; Mooncake, DistServe,
// Splitwise). The decode instance is chosen when the prompt's prefill is
// first scheduled; it reserves the prompt's KV blocks when its scheduler
// has room; each layer's KV leaves the prefill GPU as soon as that layer is
// computed and the room is there (each tensor-parallel rank its share, to
// its peer rank, over the route between them); layers computed before the
// room was there wait on the prefill GPU and go together when it appears.
// The prefill instance holds the prompt's blocks until the last layer has
// landed; the request's first token is out (TTFT) when it has been computed
// and the KV is at the decode GPU, and it decodes from then on.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/engine/kv_push.h"

namespace kvtier {

class ServingSimulation;

class LayerwiseTransfer {
 public:
  explicit LayerwiseTransfer(size_t requests) : flows_(requests) {}
  // Request k of the stream, `p_local` on `prefill`, is decoded as `d_local`
  // on `decode`, whose first GPU is `to`: its KV streams from now on.
  void start(uint32_t k, ServingSimulation& prefill, uint32_t p_local, ServingSimulation& decode, uint32_t d_local,
             size_t to);
  // The decode instance holds blocks for request k's KV.
  void reserved(uint32_t k);
  // Request k's prefill is done (its first token is out).
  void prefilled(uint32_t k);

 private:
  struct Flow {
    KvPush push;
    ServingSimulation* prefill = nullptr;
    ServingSimulation* decode = nullptr;
    uint32_t p_local = 0, d_local = 0;
    bool prefilled = false, landing = false;
  };
  // Once every layer is computed and submitted: when the last lands, the
  // decode instance has the KV and the prefill instance frees it.
  void land_when_sent(Flow& f);
  std::vector<Flow> flows_;  // per request of the stream (sized once: the pipeline keeps pointers into it)
};

}  // namespace kvtier
