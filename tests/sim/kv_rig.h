// The KV store's tests build a store on a small hardware description with
// the default policies (LRU, promotion on access, top placement, no
// prefetch, dense selection, no compression) unless told otherwise, and
// start it on a sink that records its moves.
#pragma once

#include <memory>

#include "sim/core/counters.h"
#include "sim/kv/kv_store.h"
#include "sim_fixture.h"

namespace kvtier::test {

// `s` has its hardware, topology, model and shape set; `pol`: the policies
// that differ from the defaults.
inline std::unique_ptr<KvStore> start_store(EngineSetup& s, EngineCounters& c, MoveSink& sink, json pol) {
  s.pol.create(pol, json{{"eviction", "lru"},
                         {"promotion", "on_access"},
                         {"placement", "top"},
                         {"prefetch", "none"},
                         {"evaluation", "exact"},
                         {"compression", "none"}});
  s.bind_gpu();
  s.bind_host_devices();
  auto kv = std::make_unique<KvStore>(s, c);
  s.pol.setup(kv->table());
  kv->start(sink);
  return kv;
}

}  // namespace kvtier::test
