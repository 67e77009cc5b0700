// Prompt KV that prefill writes below the GPU stays in GPU memory until its
// write lands: a prefill kernel runs for as many sequences as that memory
// holds beside the writes still draining, and waits for them otherwise.
#include <catch2/catch.hpp>

#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

constexpr double kSeqLayer = 1024.0 * 512;  // one sequence's layer of prompt KV: 1,024 tokens x 512 bytes
constexpr double kWriteBps = 1e9;           // the GPU-to-DRAM link

// A GPU with 2.5 sequences' worth of free memory (its tier, empty at the
// start, and the output buffers share it), DRAM behind a 1 GB/s link;
// placement writes every new block straight to DRAM; reads promote into
// the GPU tier, so decode needs no staging.
json config(int batch, int layers) {
  return json{{"hardware",
               {{"devices",
                 {{"gpu", fast_gpu(2.5 * kSeqLayer / 1e9)},
                  {"dram", {{"kind", "dram"}, {"capacity_GB", 1}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}}}},
                {"links", {{"pcie", {{"ends", {"gpu", "dram"}}, {"bandwidth_GBps", kWriteBps / 1e9}, {"latency_us", 0}}}}},
                {"tiers", {"gpu", "dram"}}}},
              {"model", tiny_model(layers)},
              {"workload", {{"batch", batch}, {"context_tokens", 1024}, {"decode_steps", 1}, {"block_tokens", 128},
                            {"prefill", "compute"}, {"trace", {{"kind", "none"}}}}},
              {"policies", {{"evaluation", "exact"}, {"placement", {{"name", "fractions"}, {"percent", {0, 100}}}}}}};
}

}  // namespace

TEST_CASE("prefill output: the next layer waits until the last one's write leaves it room (closed form)") {
  // 2 sequences x 4 layers: each layer's 2S fits the 2.5S free, two do not:
  // every layer after the first waits for the write of the one before.
  json m = simulate(config(2, 4));
  REQUIRE(m.contains("ttft_s"));
  const double write = 2 * kSeqLayer / kWriteBps;
  CHECK(rel_err(m["ttft_s"].get<double>(), 3 * write) < 1e-9);
  CHECK(rel_err(m["prefill_write_wait_s"].get<double>(), 3 * write) < 1e-9);
  CHECK(m["prefill_staging_peak_bytes"].get<double>() == Approx(2 * kSeqLayer));
}

TEST_CASE("prefill output: a layer whose output does not fit runs for as many sequences as do") {
  // 4 sequences x 2 layers: a layer's 4S does not fit the 2.5S free, so
  // each layer runs as two kernels of 2 sequences, each after the write of
  // the one before: the same 3 writes on the critical path.
  json m = simulate(config(4, 2));
  REQUIRE(m.contains("ttft_s"));
  const double write = 2 * kSeqLayer / kWriteBps;
  CHECK(rel_err(m["ttft_s"].get<double>(), 3 * write) < 1e-9);
  CHECK(m["prefill_staging_peak_bytes"].get<double>() == Approx(2 * kSeqLayer));
  CHECK(m["prefill_staging_peak_bytes"].get<double>() <= 2.5 * kSeqLayer);
}
