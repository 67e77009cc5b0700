// serving.kv_unit "all_layers": the block table with one KV layer of
// whole-model blocks (every layer's KV of a block's tokens), moved as one;
// and the serving engine with it against the per-layer table.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "sim/core/counters.h"
#include "sim/kv/kv_store.h"
#include "sim/serving/serving.h"
#include "kv_rig.h"
#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

class Sink final : public MoveSink {
 public:
  struct Move {
    size_t from, to;
    uint32_t layer;
    double bytes;
  };
  Sink() : MoveSink(done_) {}
  JobId add(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, JobId) override {
    moves.push_back({from_ep, to_ep, layer, raw_bytes});
    done_.push_back(1);  // every move is done at once
    return static_cast<JobId>(moves.size());
  }
  JobId add_prefetch(size_t from, uint32_t layer, double raw_bytes, JobId) override {
    moves.push_back({from, 0, layer, raw_bytes});
    done_.push_back(1);
    return static_cast<JobId>(moves.size());
  }
  JobId add_run(size_t from_ep, size_t to_ep, uint32_t layer, double raw_bytes, uint32_t, const JobId*,
                size_t) override {
    return add(from_ep, to_ep, layer, raw_bytes, kNoJob);
  }
  std::vector<Move> moves;

 private:
  std::vector<uint8_t> done_{1};
};

// One sequence of 9 blocks of a 4-layer tiny model (128-token blocks of 64
// KiB per layer) in GPU and DRAM, the GPU holding `gpu_blocks` whole-model
// blocks (or 4x as many one-layer blocks).
struct Rig {
  static constexpr uint32_t kLayers = 4;
  EngineSetup s;
  EngineCounters c;
  std::unique_ptr<KvStore> kv;
  Sink sink;
  Rig(bool whole, uint64_t gpu_blocks) {
    const double unit = kLayers * kBlock;
    json hw = {{"devices",
                {{"gpu", fast_gpu((double(gpu_blocks) + 0.1) * unit / 1e9)},
                 {"dram", {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 100}, {"latency_us", 0}}},
                 {"rc", {{"kind", "switch"}}}}},
               {"links",
                {{"pcie", {{"ends", {"rc", "gpu"}}, {"bandwidth_GBps", 10}}},
                 {"dbus", {{"ends", {"rc", "dram"}}, {"bandwidth_GBps", 100}}}}},
               {"tiers", {"gpu", "dram"}}};
    s.hw = parse_hardware(hw, "hardware");
    s.topo = std::make_unique<Topology>(s.hw);
    json model = tiny_model(kLayers);
    s.model = parse_llm(model, "model");
    s.kv_all_layers = whole;
    s.batch = 1;
    s.ctx = 1024;
    s.steps = 1;
    s.bt = 128;
    kv = start_store(s, c, sink, json::object());
  }
};

}  // namespace

TEST_CASE("kv unit: whole-model blocks are one table layer of every layer's bytes") {
  Rig layer(false, 3), whole(true, 3);
  const BlockTable& a = layer.kv->table();
  const BlockTable& b = whole.kv->table();
  CHECK(a.layers == Rig::kLayers);
  CHECK(b.layers == 1);
  CHECK(a.block_bytes == uint64_t(kBlock));
  CHECK(b.block_bytes == uint64_t(Rig::kLayers * kBlock));
  CHECK(b.size() * Rig::kLayers == a.size());
  // The same memory holds L times as many one-layer blocks.
  CHECK(b.tiers[0].capacity_blocks == 3);
  CHECK(a.tiers[0].capacity_blocks == 3 * Rig::kLayers);
  CHECK(whole.s.codec.size() == 2);  // one codec per tier, the same at every layer
  CHECK(layer.s.codec.size() == 2 * Rig::kLayers);
  CHECK(whole.kv->data_bytes(0) == Rig::kLayers * kBlock);
}

TEST_CASE("kv unit: a whole-model block placed below a full GPU is written down whole") {
  Rig r(true, 3);
  // Nine blocks of one sequence: the first three fill the GPU, the rest are
  // placed there in turn, each pushing the least recently created one down.
  for (BlockId i = 0; i < 9; ++i) {
    r.kv->set_clock(i + 1, 0);
    r.kv->allocate(r.kv->block(0, 0, i), 9);
  }
  const BlockTable& t = r.kv->table();
  CHECK(t.tiers[0].occupied_blocks() == 3);
  CHECK(t.tiers[1].used_blocks == 6);
  REQUIRE(!r.sink.moves.empty());
  double down = 0;
  for (const Sink::Move& m : r.sink.moves) {
    CHECK(m.bytes == Rig::kLayers * kBlock);  // every move a whole block of every layer
    CHECK(m.layer == 0);
    down += m.bytes;
  }
  CHECK(down == double(r.c.written_back_blocks) * Rig::kLayers * kBlock);
}

namespace {

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-300); }

// `count` identical requests of `input` tokens, tiered KV on a fast GPU of
// `gpu_GB` over 100 GB of DRAM, the tiny model of `layers` layers.
json tiny_serving(int layers, const std::string& unit, double gpu_GB, uint32_t count, uint32_t input) {
  // A GPU whose kernels take time (launches, KV reads), so that the times compared are not ~0.
  const json gpu = {{"kind", "gpu"}, {"capacity_GB", gpu_GB}, {"reserved_GB", 0}, {"memory_GBps", 2000},
                    {"fp16_TFLOPS", 300}, {"launch_overhead_us", 5}};
  json hw = {{"devices",
              {{"gpu", gpu},
               {"dram", {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 50}, {"latency_us", 1}}},
               {"rc", {{"kind", "switch"}}}}},
             {"links",
              {{"pcie", {{"ends", {"rc", "gpu"}}, {"bandwidth_GBps", 10}, {"latency_us", 1}}},
               {"dbus", {{"ends", {"rc", "dram"}}, {"bandwidth_GBps", 100}}}}},
             {"tiers", {"gpu", "dram"}}};
  json cfg{{"hardware", hw}, {"model", tiny_model(layers)}, {"workload", {{"block_tokens", 128}}}};
  cfg["serving"] = {{"requests", {{"kind", "identical"}, {"count", count}, {"input_tokens", input}, {"output_tokens", 20},
                                  {"interval_s", 0.0}}},
                    {"kv", "tiered"},
                    {"kv_unit", unit},
                    {"preemption", "recompute"}};
  return cfg;
}

}  // namespace

TEST_CASE("kv unit: with one layer, whole-model blocks give the per-layer run exactly") {
  // 8 requests of 4K tokens: 256 blocks of 64 KiB; the GPU holds about 100.
  const double gpu = 100.5 * kBlock / 1e9;
  json a = serve(tiny_serving(1, "layer", gpu, 8, 4096));
  json b = serve(tiny_serving(1, "all_layers", gpu, 8, 4096));
  REQUIRE(a.contains("kv"));
  REQUIRE(b.contains("kv"));
  CHECK(a["kv"]["fetched_bytes"].get<double>() > 0);
  CHECK(a["kv_unit"] == "layer");
  CHECK(b["kv_unit"] == "all_layers");
  a.erase("kv_unit");
  b.erase("kv_unit");
  CHECK(a.dump() == b.dump());
}

TEST_CASE("kv unit: everything on the GPU gives the per-layer times with L times fewer accesses") {
  json a = serve(tiny_serving(6, "layer", 10, 8, 4096));
  json b = serve(tiny_serving(6, "all_layers", 10, 8, 4096));
  REQUIRE(a.contains("kv"));
  REQUIRE(b.contains("kv"));
  CHECK(a["kv"]["fetched_bytes"].get<double>() == 0);
  CHECK(b["kv"]["fetched_bytes"].get<double>() == 0);
  CHECK(rel(b["simulated_time_s"].get<double>(), a["simulated_time_s"].get<double>()) < 1e-9);
  CHECK(rel(b["ttft_s"]["mean"].get<double>(), a["ttft_s"]["mean"].get<double>()) < 1e-9);
  CHECK(rel(b["tpot_s"]["mean"].get<double>(), a["tpot_s"]["mean"].get<double>()) < 1e-9);
  CHECK(a["kv"]["block_accesses"].get<uint64_t>() == 6 * b["kv"]["block_accesses"].get<uint64_t>());
  CHECK(b["kv"]["block_accesses"].get<uint64_t>() > 0);
}

TEST_CASE("kv unit: an iteration's kernels as one activity end where they end one by one") {
  // The KV spills to DRAM: layer 0 waits for fetches, the other layers follow.
  const double gpu = 600.5 * kBlock / 1e9;
  json coarse = serve(tiny_serving(6, "all_layers", gpu, 8, 4096));
  json cfg = tiny_serving(6, "all_layers", gpu, 8, 4096);
  cfg["serving"]["coarsen"] = false;
  json fine = serve(cfg);
  REQUIRE(coarse.contains("kv"));
  REQUIRE(fine.contains("kv"));
  CHECK(coarse["kv"]["fetched_bytes"].get<double>() > 0);
  CHECK(coarse["kv"] == fine["kv"]);
  CHECK(rel(coarse["simulated_time_s"].get<double>(), fine["simulated_time_s"].get<double>()) < 1e-9);
  CHECK(rel(coarse["ttft_s"]["mean"].get<double>(), fine["ttft_s"]["mean"].get<double>()) < 1e-9);
  CHECK(rel(coarse["tpot_s"]["mean"].get<double>(), fine["tpot_s"]["mean"].get<double>()) < 1e-9);
  CHECK(rel(coarse["gpu_busy_fraction"].get<double>(), fine["gpu_busy_fraction"].get<double>()) < 1e-9);
}
