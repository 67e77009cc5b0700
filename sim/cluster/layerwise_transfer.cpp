#include "sim/cluster/layerwise_transfer.h"

#include <algorithm>

#include "sim/platform/platform.h"
#include "sim/platform/sim_clock.h"
#include "sim/serving/serving.h"

namespace kvtier {

void LayerwiseTransfer::start(uint32_t k, ServingSimulation& prefill, uint32_t p_local, ServingSimulation& decode,
                              uint32_t d_local, size_t to) {
  Flow& f = flows_[k];
  f.prefill = &prefill;
  f.decode = &decode;
  f.p_local = p_local;
  f.d_local = d_local;
  f.push.to = to;
  prefill.stream_kv(p_local, &f.push);
}

void LayerwiseTransfer::reserved(uint32_t k) {
  Flow& f = flows_[k];
  f.prefill->push_computed(f.push);
  land_when_sent(f);
}

void LayerwiseTransfer::prefilled(uint32_t k) {
  Flow& f = flows_[k];
  f.prefilled = true;
  land_when_sent(f);
}

void LayerwiseTransfer::land_when_sent(Flow& f) {
  if (!f.prefilled || !f.push.complete() || f.landing) return;
  f.landing = true;
  f.prefill->when_pushed(f.push, [&f] {
    // The first token was computed at the prefill's end; the user has it
    // once the KV is at the decode GPU too (as a pull's TTFT).
    const double first = f.prefill->requests()[f.p_local].first_token_s;
    f.decode->kv_in(f.d_local, std::max(first, sim_now()));
    f.prefill->release_kv(f.p_local);
  });
}

}  // namespace kvtier
