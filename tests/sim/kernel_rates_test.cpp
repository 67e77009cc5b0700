// GEMMs and attention at rates of their own: where the GPU gives sustained
// rates per kernel shape and phase (FlexGen's fitted T4), a layer is
// launch + max(GEMM FLOPs / rate, weight bytes / bandwidth) +
// max(attention FLOPs / rate, KV bytes / bandwidth); without them, one
// roofline over the whole layer.
#include <catch2/catch.hpp>

#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// One layer of 5e7 parameters in FP16 (0.1 GB of weights, 1e8 FLOPs per
// token), 8 sequences of 12,800 tokens, all KV on the GPU, one decode step.
json one_step(const json& gpu_extra) {
  json gpu{{"kind", "gpu"}, {"capacity_GB", 10}, {"reserved_GB", 0}, {"memory_GBps", 100},
           {"fp16_TFLOPS", 100}, {"launch_overhead_us", 0}};
  for (auto& [k, v] : gpu_extra.items()) gpu[k] = v;
  json hw{{"devices", {{"gpu", gpu}}}, {"links", json::object()}, {"gpu", "gpu"}, {"tiers", {"gpu"}}};
  json model{{"name", "one"}, {"layers", 1}, {"heads", 1}, {"kv_heads", 1}, {"head_dim", 128}, {"dtype_bytes", 2}, {"params_B", 0.05}};
  return json{{"hardware", hw},
              {"model", model},
              {"workload", {{"batch", 8}, {"context_tokens", 12800}, {"decode_steps", 1}, {"prefill", "none"}, {"trace", {{"kind", "none"}}}}},
              {"policies", {{"evaluation", "exact"}, {"promotion", "none"}}}};
}

}  // namespace

TEST_CASE("per-shape GPU rates: a decode layer is a GEMM roofline plus an attention roofline") {
  const double tokens = 8 * 101 * 128.0;  // 101 whole blocks per sequence at step 0
  const double gemm = 8 * 1e8, weights = 1e8;
  const double attn = 4 * tokens * 128, kv = tokens * 512;
  json fused = simulate(one_step(json::object()));
  REQUIRE(fused.contains("mean_step_latency_s"));
  CHECK(fused["mean_step_latency_s"].get<double>() == Approx(std::max((gemm + attn) / 100e12, (weights + kv) / 100e9)).epsilon(1e-12));
  json split = simulate(one_step({{"decode_gemm_TFLOPS", 0.4}, {"decode_attention_TFLOPS", 0.01}}));
  REQUIRE(split.contains("mean_step_latency_s"));
  const double expect = std::max(gemm / 0.4e12, weights / 100e9) + std::max(attn / 0.01e12, kv / 100e9);
  CHECK(split["mean_step_latency_s"].get<double>() == Approx(expect).epsilon(1e-12));
  // The prefill rates do not touch decode; unset decode rates fall back to fp16_TFLOPS.
  json prefill_only = simulate(one_step({{"prefill_gemm_TFLOPS", 0.4}}));
  REQUIRE(prefill_only.contains("mean_step_latency_s"));
  CHECK(prefill_only["mean_step_latency_s"].get<double>() ==
        Approx(std::max(gemm / 100e12, weights / 100e9) + std::max(attn / 100e12, kv / 100e9)).epsilon(1e-12));
}
