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

// GPU, DRAM and a 100 GB NVMe SSD behind one switch (PCIe 10 GB/s, the
// DRAM bus 100 GB/s, the SSD 7 GB/s), the GPU and DRAM of the given sizes.
inline json gpu_dram_ssd(double gpu_GB, double dram_GB) {
  return json{{"devices",
               {{"gpu", fast_gpu(gpu_GB)},
                {"dram", {{"kind", "dram"}, {"capacity_GB", dram_GB}, {"bandwidth_GBps", 100}, {"latency_us", 0}}},
                {"ssd", {{"kind", "nvme"}, {"capacity_GB", 100}, {"read_GBps", 7}, {"write_GBps", 6}}},
                {"rc", {{"kind", "switch"}}}}},
              {"links",
               {{"pcie", {{"ends", {"rc", "gpu"}}, {"bandwidth_GBps", 10}}},
                {"dbus", {{"ends", {"rc", "dram"}}, {"bandwidth_GBps", 100}}},
                {"s", {{"ends", {"rc", "ssd"}}, {"bandwidth_GBps", 7}}}}},
              {"tiers", {"gpu", "dram", "ssd"}}};
}

// `s` on hardware `hw`: one sequence of a `ctx`-token prompt and one decode
// step of the tiny model with `layers` layers, in 128-token blocks.
inline void one_sequence(EngineSetup& s, json hw, int layers, uint32_t ctx) {
  s.hw = parse_hardware(hw, "hardware");
  s.topo = std::make_unique<Topology>(s.hw);
  json model = tiny_model(layers);
  s.model = parse_llm(model, "model");
  s.batch = 1;
  s.ctx = ctx;
  s.steps = 1;
  s.bt = 128;
}

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
