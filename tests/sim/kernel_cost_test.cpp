// The one roofline every engine times its GPU kernels by (sim/engine/
// kernel_cost.h): its shapes agree with each other where they describe the
// same work, and with the roofline written out.
#include <catch2/catch.hpp>

#include "sim/engine/kernel_cost.h"
#include "sim_fixture.h"

using namespace kvtier;

namespace {

// One layer of 5e7 parameters in FP16 (0.1 GB of weights, 1e8 FLOPs per
// token), one head of 128, on a GPU of 100 TFLOP/s and 100 GB/s.
EngineSetup setup(const json& gpu_extra = json::object()) {
  json gpu{{"kind", "gpu"}, {"capacity_GB", 10}, {"reserved_GB", 0}, {"memory_GBps", 100},
           {"fp16_TFLOPS", 100}, {"launch_overhead_us", 0}};
  for (auto& [k, v] : gpu_extra.items()) gpu[k] = v;
  json hw{{"devices", {{"gpu", gpu}}}, {"links", json::object()}, {"gpu", "gpu"}, {"tiers", {"gpu"}}};
  json model{{"name", "one"}, {"layers", 1}, {"heads", 1}, {"kv_heads", 1}, {"head_dim", 128}, {"dtype_bytes", 2}, {"params_B", 0.05}};
  EngineSetup s;
  s.hw = parse_hardware(hw, "hardware");
  s.model = parse_llm(model, "model");
  s.bind_gpu();
  return s;
}

}  // namespace

TEST_CASE("kernel cost: a decode layer is the roofline of its GEMMs and attention") {
  const EngineSetup s = setup();
  const double tokens = 8 * 1280.0, gemm = 8 * 1e8, attn = 4 * tokens * 128, kv = tokens * 512;
  CHECK(decode_kernel_s(s, 8, tokens) == Approx(std::max((gemm + attn) / 100e12, (1e8 + kv) / 100e9)).epsilon(1e-12));
  const EngineSetup split = setup({{"decode_gemm_TFLOPS", 0.4}, {"decode_attention_TFLOPS", 0.01}});
  CHECK(decode_kernel_s(split, 8, tokens) ==
        Approx(std::max(gemm / 0.4e12, 1e8 / 100e9) + std::max(attn / 0.01e12, kv / 100e9)).epsilon(1e-12));
  CHECK(weight_restore_s(s) == 0);
}

TEST_CASE("kernel cost: a serving iteration's shapes are the single-batch shapes of the same work") {
  const EngineSetup s = setup({{"prefill_gemm_TFLOPS", 0.4}, {"decode_gemm_TFLOPS", 0.2}});
  // Decode tokens read their sequences' whole pages: 100 tokens past in blocks of 16 is 7 blocks.
  const std::vector<KernelSeq> decode{{100, 1, false}, {100, 1, false}};
  CHECK(iteration_kernel_s(s, 16, decode) == Approx(decode_kernel_s(s, 2, 2 * 7 * 16.0)).epsilon(1e-12));
  // With the KV in tiers, what attention read (a budget kept 3 blocks of one).
  const std::vector<uint64_t> read{3 * 16, 7 * 16};
  CHECK(iteration_kernel_s(s, 16, decode, &read) == Approx(decode_kernel_s(s, 2, 10 * 16.0)).epsilon(1e-12));
  // A whole prompt as one chunk is the single-batch prefill of one sequence, at the prefill rate.
  const std::vector<KernelSeq> prompt{{0, 4096, true}};
  CHECK(iteration_kernel_s(s, 16, prompt) == Approx(prefill_kernel_s(s, 4096, 1)).epsilon(1e-12));
  CHECK(prefill_kernel_s(s, 4096, 1) > prefill_kernel_s(setup({{"decode_gemm_TFLOPS", 0.2}}), 4096, 1));
}
