#include <catch2/catch.hpp>

#include "hw_fixture.h"
#include "models/compression.h"
#include "models/gpu_compute.h"
#include "models/llm.h"

using namespace kvtier;
using Catch::Matchers::Contains;

namespace {
LlmSpec llama13b() {
  json m = {{"layers", 40}, {"heads", 40}, {"head_dim", 128}, {"params_B", 13.0}};
  return parse_llm(m, "model");
}
}  // namespace

TEST_CASE("GPU attention time: launch overhead plus KV bytes over memory bandwidth", "[gpu]") {
  auto g = test::make_device("gpu", {{"capacity_GB", 24}, {"memory_GBps", 1008}, {"fp16_TFLOPS", 165.2},
                                     {"launch_overhead_us", 5}});
  // LLaMA-13B, 32K context, one layer: 32768 x 20480 B = 671 MB -> 5 us + 0.666 ms.
  double kv = 32768.0 * 20480;
  CHECK(g->attention_s(kv) == Approx(5e-6 + kv / 1008e9));
  auto eff = test::make_device("gpu", {{"capacity_GB", 141}, {"memory_GBps", 4800}, {"memory_efficiency", 0.896},
                                       {"fp16_TFLOPS", 989}, {"flops_efficiency", 0.8}});
  CHECK(eff->memory_Bps() == Approx(4300.8e9));
  CHECK(eff->flops() == Approx(791.2e12));
  auto cal = test::make_device("gpu", {{"capacity_GB", 24}, {"memory_GBps", 1008}, {"fp16_TFLOPS", 165.2},
                                       {"curves", {{"attention_us", {{1e6, 20}, {1e9, 1200}}}}}});
  CHECK(cal->attention_s(1e6) == Approx(20e-6));
}

TEST_CASE("Decode layers are memory-bound at small batch, prefill compute-bound", "[gpu]") {
  auto g = test::make_device("gpu", {{"capacity_GB", 24}, {"memory_GBps", 1000}, {"fp16_TFLOPS", 100},
                                     {"launch_overhead_us", 0}});
  LlmSpec m = llama13b();
  // Weights per layer: 13e9 x 2 B / 40 = 650 MB -> 0.65 ms at 1 TB/s; FLOPs at batch 1:
  // 2 x 13e9 / 40 = 0.65 GFLOP -> 6.5 us. Memory binds.
  CHECK(layer_weights_s(*g, m, 1) == Approx(0.65e-3));
  CHECK(decode_layer_s(*g, m, 1, 1e9) == Approx(0.65e-3 + 1e-3));
  // Batch 1000: 650 GFLOP -> 6.5 ms: compute binds.
  CHECK(layer_weights_s(*g, m, 1000) == Approx(6.5e-3));
  // Prefill of 1024 tokens: weights 6.656 ms + attention 2 x 1024^2 x 5120 FLOP / 100 TFLOP/s.
  CHECK(prefill_layer_s(*g, m, 1, 1024) == Approx(1024 * 0.65e9 / 100e12 + 2.0 * 1024 * 1024 * 5120 / 100e12));
}

TEST_CASE("CPU importance scoring scales with cores and key precision", "[cpu]") {
  auto c = test::make_device("cpu", {{"cores", 36}, {"scoring_GBps_per_core", 1.5}});
  CHECK(c->scoring_Bps(8) == Approx(54e9));
  CHECK(c->scoring_Bps(4) == Approx(27e9));
  auto capped = test::make_device("cpu", {{"cores", 36}, {"scoring_GBps_per_core", 1.5}, {"scoring_max_GBps", 40}});
  CHECK(capped->scoring_Bps(8) == Approx(40e9));
  auto none = test::make_device("cpu", {{"cores", 4}, {"scoring_GBps_per_core", 0}});
  CHECK(none->scoring_Bps(8) == 0);
  // The foundation's params still give the same FLOP/s.
  CHECK(test::make_device("cpu", json::object())->flops() == Approx(16 * 50e9));
}

TEST_CASE("Codecs: ratio and throughput per codec", "[compression]") {
  CHECK(quantized_ratio(8) == Approx(16.0 / 8.5));
  CHECK(quantized_ratio(4) == Approx(16.0 / 4.5));
  const Codec& z = find_codec("zstd", "c");
  CHECK(compress_s(z, 510e6) == Approx(1.0));
  CHECK(compress_s(z, 510e6, 10) == Approx(0.1));
  CHECK(decompress_s(find_codec("lz4", "c"), 4970e6) == Approx(1.0));
  CHECK(compressed_bytes(find_codec("int4", "c"), 4.5e9) == Approx(1.265625e9));
  CHECK(compressed_bytes(find_codec("none", "c"), 1e9) == 1e9);
  CHECK_THROWS_WITH(find_codec("brotli", "policies.compression.name"),
                    Contains("policies.compression.name") && Contains("zstd"));
  json o = {{"name", "zstd"}, {"ratio", 2.5}, {"source", "AIOS claim"}};
  Codec c = parse_codec(o, "p");
  CHECK(c.ratio == 2.5);
  CHECK(c.compress_Bps == Approx(510e6));
  json bad = {{"name", "zstd"}, {"ratio", 0.5}};
  CHECK_THROWS_WITH(parse_codec(bad, "p"), Contains("p.ratio"));
  json neg = {{"name", "lz4"}, {"compress_GBps", -1}};
  CHECK_THROWS_WITH(parse_codec(neg, "p"), Contains("p.compress_GBps"));
}
