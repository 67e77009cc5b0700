// Weights as data: placement over GPU/DRAM/disk, streaming behind compute,
// FlexGen's block schedule, CPU attention and group-wise 4-bit compression,
// each against its closed form.
#include <algorithm>
#include <catch2/catch.hpp>

#include "models/group_quant.h"
#include "models/llm.h"
#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

constexpr int kL = 4;         // layers
constexpr double kP = 0.2;    // params_B: 0.1 GB of FP16 weights per layer
constexpr double kD = 128;    // model dim (1 head of 128)
constexpr double kKvTok = 512;  // K and V bytes per token per layer
const double kS = kP * 1e9 * 2 / kL;  // one layer's FP16 weights

json model() {
  return json{{"name", "w"}, {"layers", kL}, {"heads", 1}, {"kv_heads", 1}, {"head_dim", 128}, {"dtype_bytes", 2},
              {"params_B", kP}};
}

// GPU of `tflops` and `mem_GBps`, no launch overhead; DRAM behind a link of
// `link_GBps`; a CPU of `cpu_gflops` seeing `cpu_mem_GBps`.
json hardware(double tflops, double mem_GBps, double link_GBps, double cpu_gflops = 1e6, double cpu_mem_GBps = 1e6) {
  return json{{"devices",
               {{"gpu", {{"kind", "gpu"}, {"capacity_GB", 10}, {"reserved_GB", 0}, {"memory_GBps", mem_GBps},
                         {"fp16_TFLOPS", tflops}, {"launch_overhead_us", 0}}},
                {"dram", {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}},
                {"cpu", {{"kind", "cpu"}, {"cores", 1}, {"fp32_GFLOPS_per_core", cpu_gflops}, {"memory_GBps", cpu_mem_GBps}}},
                {"root", {{"kind", "switch"}}}}},
              {"links",
               {{"pcie", {{"ends", {"root", "gpu"}}, {"bandwidth_GBps", link_GBps}, {"latency_us", 0}}},
                {"dram_bus", {{"ends", {"root", "dram"}}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}, {"duplex", "fatpipe"}}},
                {"cpu_port", {{"ends", {"root", "cpu"}}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}, {"duplex", "fatpipe"}}}}},
              {"tiers", {"gpu", "dram"}}};
}

json config(json hw, json weights, int batch = 1, int ctx = 128, int steps = 4, json placement = "top") {
  return json{{"hardware", hw},
              {"model", model()},
              {"workload", {{"batch", batch}, {"context_tokens", ctx}, {"decode_steps", steps}, {"warmup_steps", 1},
                            {"block_tokens", 128}, {"transfer_unit", "tokens"}, {"prefill", "none"},
                            {"trace", {{"kind", "none"}}}}},
              {"policies", {{"evaluation", "exact"}, {"promotion", "none"}, {"placement", placement}, {"weights", weights}}}};
}

json offload(double gpu, double cpu, double disk = 0) {
  return json{{"name", "offload"}, {"gpu_percent", gpu}, {"cpu_percent", cpu}, {"disk_percent", disk}};
}

// Decode FLOPs of one layer at `step` (0-based) for `batch` sequences of `ctx` tokens.
double layer_flops(int batch, int ctx, int step) {
  return 2.0 * kP * 1e9 / kL * batch + 4.0 * batch * (ctx + step + 1) * kD;
}

// Mean of the measured steps (after one warm-up step) of per-step times f(step).
template <class F>
double mean_steps(int steps, F f) {
  double s = 0;
  for (int i = 1; i < steps; ++i) s += f(i);
  return s / (steps - 1);
}

}  // namespace

TEST_CASE("a weight stream of S bytes per layer over B is hidden behind compute C exactly when S/B <= C") {
  const double B = 10e9;  // S/B = 10 ms per layer
  SECTION("C = 2 S/B: the step is L x C") {
    const double F = 2.0 * kP * 1e9 / kL / (2 * kS / B);  // FLOP/s that make the weight GEMM take 2 S/B
    json m = simulate(config(hardware(F / 1e12, 1e9, B / 1e9), offload(0, 100)));
    REQUIRE(m.contains("mean_step_latency_s"));
    const double expect = mean_steps(4, [&](int s) { return kL * layer_flops(1, 128, s) / F; });
    CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-9);
    CHECK(m["weights"]["bytes_to_gpu"].get<double>() == Approx(4 * kL * kS));
  }
  SECTION("C = S/(2B): the step is L x S/B, the link busy throughout") {
    const double F = 2.0 * kP * 1e9 / kL / (kS / B / 2);
    json m = simulate(config(hardware(F / 1e12, 1e9, B / 1e9), offload(0, 100)));
    // Steps end with their last layer's compute, whose attention grows by one token a step.
    CHECK(rel_err(m["mean_step_latency_s"].get<double>(), kL * kS / B + 4.0 * kD / F) < 1e-9);
  }
  SECTION("without overlap the step is L x (S/B + C)") {
    const double F = 2.0 * kP * 1e9 / kL / (2 * kS / B);
    json w = offload(0, 100);
    w["overlap"] = false;
    json m = simulate(config(hardware(F / 1e12, 1e9, B / 1e9), w));
    const double expect = mean_steps(4, [&](int s) { return kL * (kS / B + layer_flops(1, 128, s) / F); });
    CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-9);
  }
  SECTION("weights from disk pass through DRAM: two copies per layer") {
    json hw = hardware(1e6, 1e9, B / 1e9);
    hw["devices"]["ssd"] = {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}};
    hw["links"]["ssd_link"] = {{"ends", {"root", "ssd"}}, {"bandwidth_GBps", 5}, {"latency_us", 0}};
    hw["tiers"] = {"gpu", "dram", "ssd"};
    json m = simulate(config(hw, offload(0, 0, 100)));
    // The disk read (5 GB/s) bounds the stream: each layer's S crosses ssd_link once and pcie once.
    CHECK(rel_err(m["mean_step_latency_s"].get<double>(), kL * kS / 5e9) < 1e-6);
    CHECK(m["weights"]["bytes_from_disk"].get<double>() == Approx(4 * kL * kS));
  }
}

TEST_CASE("zig-zag block schedule: one weight load per layer serves every GPU batch") {
  const double M = 100e9;  // GPU memory: every GPU batch's kernel reads the layer's weights
  for (int G : {1, 2, 4}) {
    json w = offload(0, 100);
    w["gpu_batches"] = G;
    json m = simulate(config(hardware(1e6, M / 1e9, 1000), w, 4));
    REQUIRE(m.contains("weights"));
    CHECK(m["weights"]["loads"].get<double>() == 4 * kL);
    CHECK(m["links"]["pcie:root->gpu"]["bytes"].get<double>() == Approx(4 * kL * kS));
    // Memory-bound kernels: G reads of the weights plus the KV once per layer.
    const double expect = mean_steps(4, [&](int s) { return kL * (G * kS + 4.0 * (128 + s + 1) * kKvTok) / M; });
    CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-9);
  }
}

TEST_CASE("zig-zag with overlap: the next layer's load must arrive within the first GPU batch (FlexGen syncs per GPU batch)") {
  const double M = 100e9, B = 10e9;  // per GPU batch ~1 ms of kernel, S/B = 10 ms of load
  const int G = 4, batch = 4;
  json w = offload(0, 100);
  w["gpu_batches"] = G;
  json m = simulate(config(hardware(1e6, M / 1e9, B / 1e9), w, batch));
  REQUIRE(m.contains("mean_step_latency_s"));
  // The run's very last layer has no next load to wait for: G kernels only.
  const double expect = mean_steps(4, [&](int s) {
    const double c = (kS + double(batch) / G * (128 + s + 1) * kKvTok) / M;
    const double layer = std::max(c, kS / B) + (G - 1) * c;
    return s == 3 ? (kL - 1) * layer + G * c : kL * layer;
  });
  CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-9);
}

TEST_CASE("pageable host memory: the CPU's copy into a pinned buffer holds back the next launch") {
  SECTION("pin_weights false: each layer's launch waits for the next layer's copy, 2 S / host bandwidth") {
    const double B = 10e9;                                 // S/B = 10 ms per layer
    const double F = 2.0 * kP * 1e9 / kL / (2 * kS / B);  // the weight GEMM takes 2 S/B
    const double Mc = 4 * B, P = 2 * kS / Mc;             // the copy reads and writes S: 5 ms
    json w = offload(0, 100);
    w["pin_weights"] = false;
    json m = simulate(config(hardware(F / 1e12, 1e9, B / 1e9, 1e6, Mc / 1e9), w));
    REQUIRE(m.contains("mean_step_latency_s"));
    // The run's very last layer has no next layer to copy.
    const double expect = mean_steps(4, [&](int s) { return kL * (P + layer_flops(1, 128, s) / F) - (s == 3 ? P : 0.0); });
    CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-9);
    CHECK(m["weights"]["pin_copy_s"].get<double>() == Approx(4 * kL * P));
    w["pin_weights"] = true;
    json pinned = simulate(config(hardware(F / 1e12, 1e9, B / 1e9, 1e6, Mc / 1e9), w));
    CHECK(pinned["weights"]["pin_copy_s"].get<double>() == 0);
    CHECK(rel_err(pinned["mean_step_latency_s"].get<double>(),
                  mean_steps(4, [&](int s) { return kL * layer_flops(1, 128, s) / F; })) < 1e-9);
  }
  SECTION("pin_cache false: a GPU batch's share of the KV is copied before the transfer, the others before each later kernel") {
    const double B = 1e9, Mc = 1e9, M = 1e9;
    const int ctx = 1024;
    for (int G : {1, 2}) {
      json w = offload(100, 0);
      w["pin_cache"] = false;
      w["gpu_batches"] = G;
      json m = simulate(config(hardware(1e6, M / 1e9, B / 1e9, 1e6, Mc / 1e9), w, G, ctx, 4,
                               json{{"name", "fractions"}, {"percent", {0, 100}}}));
      REQUIRE(m.contains("mean_step_latency_s"));
      // Per layer: the CPU's copies (read and write), the fetch over the link, G memory-bound kernels.
      const double expect = mean_steps(4, [&](int s) {
        const double kv = G * (ctx + s + 1) * kKvTok;  // the layer's KV, every sequence
        return kL * (2 * kv / Mc + kv / B + G * (kS + kv / G) / M);
      });
      CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-9);
    }
  }
  SECTION("pin_cache false: KV promoted through host memory on its way up is copied into a pinned buffer too") {
    // The same blocks reach the GPU from DRAM either way: promoted from DRAM,
    // where they live (two tiers), or promoted from a disk below into DRAM
    // and on into the GPU (three tiers): the CPU copies the same bytes.
    const double B = 1e9, Mc = 1e9, M = 1e9;
    json w = offload(100, 0);
    w["pin_cache"] = false;
    json hw = hardware(1e6, M / 1e9, B / 1e9, 1e6, Mc / 1e9);
    json two = config(hw, w, 2, 1024, 4, json{{"name", "fractions"}, {"percent", {0, 100}}});
    two["policies"]["promotion"] = {{"name", "on_access"}};
    hw["devices"]["ssd"] = {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}};
    hw["links"]["ssd_link"] = {{"ends", {"root", "ssd"}}, {"bandwidth_GBps", 5}, {"latency_us", 0}};
    hw["tiers"] = {"gpu", "dram", "ssd"};
    json three = config(hw, w, 2, 1024, 4, json{{"name", "fractions"}, {"percent", {0, 0, 100}}});
    three["policies"]["promotion"] = {{"name", "threshold"}, {"min_accesses", 1}, {"to", 1}};
    json a = simulate(two), b = simulate(three);
    REQUIRE(a.contains("weights"));
    REQUIRE(b.contains("weights"));
    CHECK(a["blocks_promoted"].get<double>() > 0);
    CHECK(b["blocks_promoted"].get<double>() == a["blocks_promoted"].get<double>());
    CHECK(a["weights"]["pin_copy_s"].get<double>() > 0);
    CHECK(b["weights"]["pin_copy_s"].get<double>() == Approx(a["weights"]["pin_copy_s"].get<double>()).epsilon(1e-12));
  }
  SECTION("pin_cache false: every byte read into the GPU from host memory is copied by the CPU first") {
    // Blocks are read from DRAM where they live while others are demoted
    // from it to a disk below (as DRAM fills, under LRU; between steps,
    // under HKM's watermark). What the GPU reads from DRAM, all that crosses
    // PCIe to it less what came up from the disk, the CPU copies first
    // (reads and writes it: 2 bytes of memory traffic a byte).
    const double B = 1e9, Mc = 1e9, M = 1e9;
    json w = offload(100, 0);
    w["pin_cache"] = false;
    json hw = hardware(1e6, M / 1e9, B / 1e9, 1e6, Mc / 1e9);
    hw["devices"]["ssd"] = {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}};
    hw["links"]["ssd_link"] = {{"ends", {"root", "ssd"}}, {"bandwidth_GBps", 0.5}, {"latency_us", 0}};
    auto check = [&](json h, json eviction) {
      json c = config(h, w, 2, 1024, 4);
      c["policies"]["eviction"] = eviction;
      json m = simulate(c);
      INFO(eviction.dump());
      REQUIRE(m.contains("weights"));
      CHECK(m["blocks_demoted"].get<double>() > 0);
      const double up = m["links"].contains("ssd_link:ssd->root") ? m["links"]["ssd_link:ssd->root"]["bytes"].get<double>() : 0;
      const double from_dram = m["links"]["pcie:root->gpu"]["bytes"].get<double>() - up;
      CHECK(from_dram > 0);
      CHECK(m["weights"]["pin_copy_s"].get<double>() == Approx(2 * from_dram / Mc).epsilon(1e-9));
    };
    hw["devices"]["dram"]["capacity_GB"] = 0.002;
    // LRU: DRAM on top, the rest demoted to the disk as it fills.
    json top_dram = hw;
    top_dram["tiers"] = {"dram", "ssd"};
    check(top_dram, {{"name", "lru"}});
    // HKM: a GPU holding the weights and 16 blocks above them, DRAM kept half full.
    json with_gpu = hw;
    with_gpu["tiers"] = {"gpu", "dram", "ssd"};
    with_gpu["devices"]["gpu"]["capacity_GB"] = (kS * kL + 16 * 128 * kKvTok) / 1e9;
    check(with_gpu, {{"name", "hkm"}, {"watermark", 0.5}});
  }
  SECTION("layer ahead: each iteration copies the next layer's KV, then computes while it crosses (FlexGen syncs)") {
    // Iteration k starts once layer k's KV has arrived; the CPU copies layer
    // k+1's (P), then layer k computes (c) while layer k+1's crosses (kv / B).
    const double B = 1e9, Mc = 4e9, M = 100e9;
    const int ctx = 1024, steps = 4;
    json w = offload(100, 0);
    w["pin_cache"] = false;
    json c = config(hardware(1e6, M / 1e9, B / 1e9, 1e6, Mc / 1e9), w, 1, ctx, steps,
                    json{{"name", "fractions"}, {"percent", {0, 100}}});
    c["policies"]["prefetch"] = {{"name", "layer_ahead"}, {"depth", 1}};
    json m = simulate(c);
    REQUIRE(m.contains("mean_step_latency_s"));
    const int N = steps * kL;
    auto kv = [&](int k) { return (ctx + k / kL + 1) * kKvTok; };
    auto P = [&](int k) { return k < N ? 2 * kv(k) / Mc : 0.0; };
    auto cmp = [&](int k) { return (kS + kv(k)) / M; };
    std::vector<double> end(steps);
    double start = P(0) + kv(0) / B;  // iteration 0 begins once layer 0 has crossed
    for (int k = 0; k < N; ++k) {
      const double next_in = k + 1 < N ? kv(k + 1) / B : 0.0;
      if (k % kL == kL - 1) end[k / kL] = start + P(k + 1) + cmp(k);
      start += P(k + 1) + std::max(cmp(k), next_in);
    }
    const double expect = (end[steps - 1] - end[0]) / (steps - 1);
    CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-9);
  }
}

TEST_CASE("pageable host memory: KV predicted from host memory is copied into a pinned buffer before its transfer") {
  // A GPU tier above pageable DRAM, every block placed in DRAM, and a
  // prefetch policy that predicts the next step's blocks (the span of the
  // ones attention used): blocks reach the GPU on demand and predicted. Every
  // byte read from DRAM into the GPU, all that crosses PCIe to it (the
  // weights stay on the GPU, nothing else comes up), the CPU copies first:
  // 2 bytes of memory traffic a byte.
  const double B = 1e9, M = 1e9;
  json w = offload(100, 0);
  w["pin_cache"] = false;
  auto run = [&](double gpu_blocks, double Mc) {
    json hw = hardware(1e6, M / 1e9, B / 1e9, 1e6, Mc / 1e9);
    hw["devices"]["gpu"]["capacity_GB"] = (kS * kL + gpu_blocks * 128 * kKvTok) / 1e9;
    json c = config(hw, w, 2, 1024, 4, json{{"name", "fractions"}, {"percent", {0, 100}}});
    c["policies"]["prefetch"] = {{"name", "hifc_hot_span"}, {"depth", 1}};
    return simulate(c);
  };
  auto check = [&](double gpu_blocks, double Mc) {
    INFO("GPU room: " << gpu_blocks << " blocks; CPU memory: " << Mc << " B/s");
    json m = run(gpu_blocks, Mc);
    REQUIRE(m.contains("weights"));
    CHECK(m["prefetch"]["prefetched_blocks"].get<double>() > 0);
    const double from_dram = m["links"]["pcie:root->gpu"]["bytes"].get<double>();
    CHECK(from_dram > 0);
    CHECK(m["weights"]["pin_copy_s"].get<double>() == Approx(2 * from_dram / Mc).epsilon(1e-9));
    return m["simulated_time_s"].get<double>();
  };
  // Room for every block: predictions bring up all a step will read.
  check(1000, 1e9);
  // Room for 16 of the 72 blocks: predictions evict one another, and what
  // they left in DRAM is read on demand.
  check(16, 1e9);
  // A slower copy never makes the run shorter.
  double before = 0;
  for (double Mc : {64e9, 8e9, 1e9, 0.25e9}) {
    const double t = check(16, Mc);
    CHECK(t >= before);
    before = t;
  }
}

TEST_CASE("hidden states in host memory go out and back before every GPU batch's kernel, at both sub-layers") {
  const double Bu = 2e3, Bd = 1e3, M = 100e9;  // link into the GPU, out of it; GPU memory
  const int G = 2, batch = 4;
  json w = offload(100, 0);
  w["gpu_batches"] = G;
  w["activations"] = "cpu";
  json hw = hardware(1e6, M / 1e9, Bu / 1e9);
  hw["links"]["pcie"]["bandwidth_back_GBps"] = Bd / 1e9;
  json m = simulate(config(hw, w, batch));
  REQUIRE(m.contains("mean_step_latency_s"));
  const double hb = 2 * (2 * kD) * (batch / G);  // two sub-layers x d FP16 values per sequence
  const double expect = mean_steps(4, [&](int s) {
    const double c = (kS + double(batch) / G * (128 + s + 1) * kKvTok) / M;
    return kL * G * (hb / Bd + hb / Bu + c);
  });
  CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-9);
  CHECK(m["weights"]["hidden_wait_s"].get<double>() == Approx(4 * kL * G * (hb / Bd + hb / Bu)));
}

TEST_CASE("pageable host memory: KV written from the GPU passes through the host's relay at the link's pageable_back_GBps") {
  // CPU attention over KV in DRAM: only the new token's K and V cross back,
  // one write per layer, and the next step's attention of that layer waits
  // for it. A relay of kKvTok bytes/s makes each write take 1 s, back to
  // back: a step is kL seconds.
  json w = offload(100, 0);
  w["cpu_attention"] = true;
  w["pin_cache"] = false;
  const json frac = {{"name", "fractions"}, {"percent", {0, 100}}};
  json hw = hardware(1e6, 1e6, 1e6);
  hw["links"]["pcie"]["pageable_back_GBps"] = kKvTok / 1e9;
  json m = simulate(config(hw, w, 1, 1024, 4, frac));
  REQUIRE(m.contains("mean_step_latency_s"));
  CHECK(rel_err(m["mean_step_latency_s"].get<double>(), kL * 1.0) < 1e-6);
  w["pin_cache"] = true;
  json pinned = simulate(config(hw, w, 1, 1024, 4, frac));
  CHECK(pinned["mean_step_latency_s"].get<double>() < 1e-3);
}

TEST_CASE("CPU attention over DRAM-resident KV: max(KV bytes / CPU memory bandwidth, FLOPs / CPU rate); only activations cross PCIe") {
  json w = offload(100, 0);
  w["cpu_attention"] = true;
  const json frac = {{"name", "fractions"}, {"percent", {0, 100}}};
  const int ctx = 1024, steps = 4;
  SECTION("memory-bound") {
    const double Mc = 1e9;
    json m = simulate(config(hardware(1e6, 1e9, 1e6, 1e6, Mc / 1e9), w, 1, ctx, steps, frac));
    REQUIRE(m.contains("mean_step_latency_s"));
    const double expect = mean_steps(steps, [&](int s) { return kL * (ctx + s + 1) * kKvTok / Mc; });
    CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-6);
    CHECK(m["fetched_bytes"].get<double>() == 0);
    // The attention output of every layer and step comes back: d FP16 values per sequence.
    CHECK(m["links"]["pcie:root->gpu"]["bytes"].get<double>() == Approx(steps * kL * kD * 2));
  }
  SECTION("FLOP-bound") {
    const double Fc = 0.1e9;
    json m = simulate(config(hardware(1e6, 1e9, 1e6, Fc / 1e9, 1e6), w, 1, ctx, steps, frac));
    const double expect = mean_steps(steps, [&](int s) { return kL * 4.0 * (ctx + s + 1) * kD / Fc; });
    CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-6);
    CHECK(m["weights"]["cpu_attention_s"].get<double>() > 0);
  }
  SECTION("link-bound: the query's trip to the CPU and the output's back are on the critical path") {
    // 1 kB/s of PCIe, a CPU and GPU that take no time: per layer the query
    // (d FP16 values) goes out and the output comes back before the next
    // layer; the new token's K and V (kKvTok bytes, written to DRAM after the
    // layer) share the outbound direction with the next layer's query.
    const double B = 1e3, act = kD * 2;
    json m = simulate(config(hardware(1e6, 1e6, B / 1e9, 1e6, 1e6), w, 1, ctx, steps, frac));
    const double step = m["mean_step_latency_s"].get<double>();
    CHECK(step >= kL * 2 * act / B * (1 - 1e-9));
    CHECK(step <= kL * (2 * act + kKvTok) / B * (1 + 1e-9));
  }
}

TEST_CASE("group-wise 4-bit weights move compressed and are restored on the GPU at every use") {
  const GroupQuant q;
  CHECK(q.ratio() == Approx(16.0 / 4.5));
  const double M = 100e9;
  json w = offload(0, 100);
  w["compress_weights"] = "int4";
  json m = simulate(config(hardware(1e6, M / 1e9, 1000), w));
  REQUIRE(m.contains("weights"));
  CHECK(m["links"]["pcie:root->gpu"]["bytes"].get<double>() == Approx(4 * kL * kS / q.ratio()));
  // Memory-bound GEMM over the restored FP16 weights plus the restore itself.
  const double expect = mean_steps(4, [&](int s) {
    return kL * ((kS + (128 + s + 1) * kKvTok) / M + q.decompress_s(kS, M));
  });
  CHECK(rel_err(m["mean_step_latency_s"].get<double>(), expect) < 1e-9);
}

TEST_CASE("group-wise 4-bit KV: stored and moved compressed, restored on the GPU when attention reads it") {
  const GroupQuant q;
  const double M = 100e9;
  json w = offload(100, 0);
  w["compress_cache"] = "int4";
  json m = simulate(config(hardware(1e6, M / 1e9, 1000), w, 1, 1024, 4, json{{"name", "fractions"}, {"percent", {0, 100}}}));
  REQUIRE(m.contains("fetched_bytes"));
  double raw = 0;
  for (int s = 0; s < 4; ++s) raw += kL * (1024 + s + 1) * kKvTok;
  CHECK(m["fetched_bytes"].get<double>() == Approx(raw / q.ratio()).epsilon(1e-9));
}

TEST_CASE("weight placement: bad input names its JSON path") {
  auto err = [](json cfg) {
    json m = simulate(cfg);
    return m.value("config_error", std::string());
  };
  const json hw = hardware(1e6, 1e9, 10);
  CHECK_THAT(err(config(hw, offload(50, 40))), Catch::Contains("policies.weights") && Catch::Contains("100"));
  json small = hw;
  small["devices"]["dram"]["capacity_GB"] = 0.1;
  CHECK_THAT(err(config(small, offload(0, 100))), Catch::Contains("hardware.devices.dram"));
  json gpu_small = hw;
  gpu_small["devices"]["gpu"]["capacity_GB"] = 0.3;
  CHECK_THAT(err(config(gpu_small, offload(100, 0))), Catch::Contains("hardware.devices.gpu"));
  json w = offload(0, 100);
  w["compress_weights"] = "int4";
  json c = config(hw, w);
  c["model"]["weight_dtype"] = "int8";
  CHECK_THAT(err(c), Catch::Contains("policies.weights.compress_weights"));
  json g = offload(0, 100);
  g["gpu_batches"] = 3;
  CHECK_THAT(err(config(hw, g, 4)), Catch::Contains("policies.weights.gpu_batches"));
  CHECK_THAT(err(config(hw, offload(100, 0), 1, 128, 4, json{{"name", "fractions"}, {"percent", {50, 40}}})),
             Catch::Contains("policies.placement.percent"));
  json no_cpu = hw;
  no_cpu["devices"].erase("cpu");
  no_cpu["links"].erase("cpu_port");
  for (const char* pin : {"pin_weights", "pin_cache"}) {
    json p = offload(0, 100);
    p[pin] = false;
    CHECK_THAT(err(config(no_cpu, p)), Catch::Contains(std::string("policies.weights.") + pin) && Catch::Contains("cpu"));
  }
}

TEST_CASE("weight dtype is separate from the KV dtype") {
  json m = model();
  m["params_B"] = 13.0;
  m["weight_dtype"] = "int8";
  LlmSpec s = parse_llm(m, "model");
  CHECK(s.weight_bytes() == Approx(13e9));
  CHECK(s.kv_bytes_per_token_layer() == 512);
  json h = model();
  h["params_B"] = 13.0;
  CHECK(parse_llm(h, "model").weight_bytes() == Approx(26e9));
  json bad = model();
  bad["weight_dtype"] = "fp4";
  CHECK_THROWS_AS(parse_llm(bad, "model"), ConfigError);
}
