// The serving engine against closed forms and the single-batch engine, and
// the scheduler's bookkeeping on its own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/core/footprint.h"
#include "sim/serving/scheduler.h"
#include "sim/serving/serving.h"
#include "sim_fixture.h"

using namespace kvtier;
using namespace kvtier::test;

namespace {

double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-300); }

// The A100 testbed with OPT-6.7B, KV on the GPU only (nothing moves).
json a100(const std::vector<std::string>& tiers) {
  return json{{"preset", "configs/hardware/a100_80gb_dram_nvme.json"}, {"tiers", tiers}};
}

json single_batch(uint32_t batch, uint32_t ctx, uint32_t steps) {
  json cfg{{"hardware", a100({"gpu"})}, {"model", "configs/models/opt-6.7b.json"}};
  cfg["workload"] = {{"batch", batch}, {"context_tokens", ctx}, {"decode_steps", steps}, {"block_tokens", 16},
                     {"prefill", "compute"}, {"trace", {{"kind", "none"}}}, {"past_trained_context", true}};
  cfg["policies"] = {{"evaluation", "exact"}};
  return cfg;
}

json serving_config(json requests, json serving = json::object()) {
  // OPT-6.7B's shape at the 8K sequences of the checks, past its trained
  // 2,048 tokens: the context is not checked here (as in configs/systems/vllm_swap.json).
  json cfg{{"hardware", a100({"gpu", "dram"})},
           {"model", {{"preset", "configs/models/opt-6.7b.json"}, {"max_context_tokens", 0}}},
           {"workload", {{"block_tokens", 16}}}};
  serving["requests"] = std::move(requests);
  cfg["serving"] = std::move(serving);
  return cfg;
}

// Presets are file names: expand them as `kvtier run` does.
json expanded(const json& cfg) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kvtier_serving_test_" + std::to_string(getpid()) + ".json")).string();
  std::ofstream(path) << cfg.dump();
  return load_config(path, {});
}

// The scheduler tests' requests, ids in order, each {arrival_s, input_tokens, output_tokens}.
std::vector<ServingRequest> queued(std::initializer_list<std::array<double, 3>> list) {
  std::vector<ServingRequest> out;
  for (const auto& r : list) {
    out.emplace_back();
    out.back().id = static_cast<uint32_t>(out.size() - 1);
    out.back().arrival_s = r[0];
    out.back().input_tokens = static_cast<uint32_t>(r[1]);
    out.back().output_tokens = static_cast<uint32_t>(r[2]);
  }
  return out;
}

}  // namespace

TEST_CASE("serving: one request alone has TTFT = prefill time and TPOT = the single-batch step time") {
  json single = simulate(expanded(single_batch(1, 1024, 8)));
  REQUIRE(single.contains("ttft_s"));
  json m = serve(expanded(serving_config({{"kind", "identical"}, {"count", 1}, {"input_tokens", 1024}, {"output_tokens", 9}})));
  REQUIRE(m.contains("ttft_s"));
  CHECK(rel(m["ttft_s"]["mean"].get<double>(), single["ttft_s"].get<double>()) < 1e-9);
  CHECK(rel(m["tpot_s"]["mean"].get<double>(), single["mean_step_latency_s"].get<double>()) < 1e-9);
  CHECK(rel(m["simulated_time_s"].get<double>(), single["simulated_time_s"].get<double>()) < 1e-9);
  CHECK(m["queueing_s"]["mean"].get<double>() == 0.0);
}

TEST_CASE("serving: N identical requests at time 0 that all fit give the single-batch result") {
  json single = simulate(expanded(single_batch(4, 2048, 16)));
  json m = serve(expanded(serving_config({{"kind", "identical"}, {"count", 4}, {"input_tokens", 2048}, {"output_tokens", 17}},
                                         {{"max_batched_tokens", 4 * 2048}})));
  REQUIRE(m.contains("ttft_s"));
  CHECK(m["iterations"].get<uint64_t>() == 17);  // one prefill iteration, 16 decode iterations
  CHECK(rel(m["ttft_s"]["p99"].get<double>(), single["ttft_s"].get<double>()) < 1e-9);
  CHECK(rel(m["tpot_s"]["mean"].get<double>(), single["mean_step_latency_s"].get<double>()) < 1e-9);
  CHECK(rel(m["simulated_time_s"].get<double>(), single["simulated_time_s"].get<double>()) < 1e-9);
}

TEST_CASE("serving: iterations run as one kernel or layer by layer give the same times") {
  json req{{"kind", "identical"}, {"count", 6}, {"input_tokens", 3000}, {"output_tokens", 40}, {"interval_s", 0.05}};
  json coarse = serve(expanded(serving_config(req, {{"max_batched_tokens", 4096}})));
  json fine = serve(expanded(serving_config(req, {{"max_batched_tokens", 4096}, {"coarsen", false}})));
  REQUIRE(coarse.contains("e2e_s"));
  CHECK(fine["layered_iterations"].get<uint64_t>() == fine["iterations"].get<uint64_t>());
  CHECK(coarse["layered_iterations"].get<uint64_t>() == 0);
  CHECK(rel(coarse["simulated_time_s"].get<double>(), fine["simulated_time_s"].get<double>()) < 1e-9);
  CHECK(rel(coarse["e2e_s"]["mean"].get<double>(), fine["e2e_s"]["mean"].get<double>()) < 1e-9);
}

TEST_CASE("serving: 16 x 8K on an 80 GB A100 where 15 fit runs 15 and queues one") {
  json m = serve(expanded(serving_config({{"kind", "identical"}, {"count", 16}, {"input_tokens", 8192}, {"output_tokens", 129}},
                                         {{"max_batched_tokens", 16 * 8192}})));
  REQUIRE(m.contains("ttft_s"));
  const uint64_t pool_tokens = m["kv_pool_blocks"].get<uint64_t>() * 16;
  REQUIRE(pool_tokens / (8192 + 129) == 15);  // the premise: 15 sequences fit with their output
  CHECK(m["preemptions"].get<uint64_t>() == 0);
  // 15 start at once; the 16th waits for the first to finish.
  int started = 0;
  std::istringstream csv(m["csv"].get<std::string>());
  std::string line;
  std::getline(csv, line);
  double last_queue = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    const double q = std::stod(f[4]);
    if (q == 0) ++started;
    last_queue = q;
  }
  CHECK(started == 15);
  CHECK(last_queue > m["e2e_s"]["p50"].get<double>() * 0.5);
  // vLLM's order of magnitude (the LRU-loop baseline ran 6.5 tokens/s here).
  CHECK(m["throughput_tokens_per_s"].get<double>() > 100);
}

TEST_CASE("serving: weights streamed from DRAM and disk run as the single-batch engine runs them") {
  // The single-batch engine's weight stream is held to its closed forms
  // (tests/sim/weights_test.cpp); one request alone must match it exactly,
  // across the prefill-to-decode and iteration-to-iteration boundaries.
  for (const std::vector<int>& pct : {std::vector<int>{50, 50, 0}, std::vector<int>{20, 50, 30}}) {
    json w{{"name", "offload"}, {"gpu_percent", pct[0]}, {"cpu_percent", pct[1]}, {"disk_percent", pct[2]}};
    const std::vector<std::string> tiers = pct[2] > 0 ? std::vector<std::string>{"gpu", "dram", "ssd"}
                                                      : std::vector<std::string>{"gpu", "dram"};
    json sb = single_batch(1, 1024, 8);
    sb["hardware"] = a100(tiers);
    sb["policies"]["weights"] = w;
    json single = simulate(expanded(sb));
    REQUIRE(single.contains("weights"));
    json sv = serving_config({{"kind", "identical"}, {"count", 1}, {"input_tokens", 1024}, {"output_tokens", 9}});
    sv["hardware"] = a100(tiers);
    sv["policies"] = {{"weights", w}};
    json m = serve(expanded(sv));
    REQUIRE(m.contains("weights"));
    CHECK(rel(m["ttft_s"]["mean"].get<double>(), single["ttft_s"].get<double>()) < 1e-9);
    CHECK(rel(m["tpot_s"]["mean"].get<double>(), single["mean_step_latency_s"].get<double>()) < 1e-9);
    CHECK(rel(m["simulated_time_s"].get<double>(), single["simulated_time_s"].get<double>()) < 1e-9);
    CHECK(m["weights"]["bytes_to_gpu"].get<double>() == Approx(single["weights"]["bytes_to_gpu"].get<double>()));
    CHECK(m["weights"]["bytes_from_disk"].get<double>() == Approx(single["weights"]["bytes_from_disk"].get<double>()));
    CHECK(m["weights"]["loads"] == single["weights"]["loads"]);  // no load issued past the last iteration
  }
}

TEST_CASE("serving: pageable host memory is refused, naming the parameter") {
  for (const char* param : {"pin_weights", "pin_cache"}) {
    json sv = serving_config({{"kind", "identical"}, {"count", 1}, {"input_tokens", 1024}, {"output_tokens", 9}});
    sv["hardware"] = a100({"gpu", "dram"});
    sv["policies"] = {{"weights", {{"name", "offload"}, {"gpu_percent", 50}, {"cpu_percent", 50}, {param, false}}}};
    json m = serve(expanded(sv));
    REQUIRE(m.contains("config_error"));
    CHECK_THAT(m["config_error"].get<std::string>(), Catch::Contains(std::string("policies.weights.") + param));
  }
}

TEST_CASE("serving: weights moved off the GPU become KV pool, less the buffers they stream through") {
  json req{{"kind", "identical"}, {"count", 1}, {"input_tokens", 1024}, {"output_tokens", 2}};
  json all = serve(expanded(serving_config(req)));
  json half = serving_config(req);
  half["policies"] = {{"weights", {{"name", "offload"}, {"gpu_percent", 50}, {"cpu_percent", 50}}}};
  json m = serve(expanded(half));
  REQUIRE(m.contains("weights"));
  const double block = 16.0 * 2 * 32 * 4096 * 2;  // OPT-6.7B: 16 tokens x K and V x 32 layers x d 4096 x FP16
  // All on the GPU, OPT-6.7B's 13.4 GB hold its tied head once; streamed,
  // the head is a copy of its own (FlexGen's OutputEmbed), half of all that
  // on the GPU.
  const double head = 50272.0 * 4096 * 2;
  const double on_gpu = m["weights"]["gpu_bytes"].get<double>() + m["weights"]["gpu_staging_bytes"].get<double>();
  const double freed = 13.4e9 - on_gpu;
  const double grew = double(m["kv_pool_blocks"].get<uint64_t>()) - double(all["kv_pool_blocks"].get<uint64_t>());
  CHECK(std::fabs(grew - freed / block) <= 1.0);
  CHECK(m["weights"]["gpu_bytes"].get<double>() == Approx((13.4e9 + head) / 2));
  CHECK(m["weights"]["dram_bytes"].get<double>() == Approx((13.4e9 + head) / 2));
}

TEST_CASE("serving: sequences that outgrow the pool are swapped out and back, or recomputed") {
  // A pool of about 26K tokens (tiny GPU memory left after weights): 4
  // prompts of 5,000 fit, their 2,000 output tokens each do not.
  auto cfg = [](const std::string& mode) {
    json c = serving_config({{"kind", "identical"}, {"count", 4}, {"input_tokens", 5000}, {"output_tokens", 2000}},
                            {{"max_batched_tokens", 20000}, {"preemption", mode}});
    c["hardware"]["devices"] = {{"gpu", {{"capacity_GB", 13.4 + 14.0}}}};
    return expanded(c);
  };
  json swap = serve(cfg("swap"));
  json rec = serve(cfg("recompute"));
  REQUIRE(swap.contains("preemptions"));
  REQUIRE(rec.contains("preemptions"));
  CHECK(swap["preemptions"].get<uint64_t>() > 0);
  CHECK(swap["swapped_out"].get<uint64_t>() == swap["swapped_in"].get<uint64_t>());
  CHECK(swap["swap_bytes"].get<double>() > 0);
  CHECK(swap["computed_prompt_tokens"].get<uint64_t>() == swap["prompt_tokens"].get<uint64_t>());
  CHECK(rec["recomputed"].get<uint64_t>() > 0);
  CHECK(rec["computed_prompt_tokens"].get<uint64_t>() > rec["prompt_tokens"].get<uint64_t>());
  CHECK(swap["output_tokens"].get<uint64_t>() == 4 * 2000);
  CHECK(rec["output_tokens"].get<uint64_t>() == 4 * 2000);
}

// ---- serving.kv "tiered": running KV in the block table over every tier ----

namespace {

// Both engines on the same hardware and KV policies: one batch of `n`
// sequences of `ctx` tokens decoding `steps` steps, or `n` identical
// requests at time 0 (prompt `ctx`, `steps` tokens after the first) served
// with the KV in tiers.
std::pair<json, json> tiered_pair(const std::vector<std::string>& tiers, json devices, json policies, uint32_t n,
                                  uint32_t ctx, uint32_t steps) {
  json single = single_batch(n, ctx, steps);
  single["hardware"] = a100(tiers);
  single["hardware"]["devices"] = devices;
  single["policies"] = policies;
  json serving = serving_config({{"kind", "identical"}, {"count", n}, {"input_tokens", ctx}, {"output_tokens", steps + 1}},
                                {{"kv", "tiered"}, {"preemption", "recompute"}, {"max_batched_tokens", n * ctx}});
  serving["hardware"] = single["hardware"];
  serving["policies"] = policies;
  return {simulate(expanded(single)), serve(expanded(serving))};
}

}  // namespace

TEST_CASE("serving, KV in tiers: with all of it on the GPU, the paged pool's times") {
  json req{{"kind", "identical"}, {"count", 4}, {"input_tokens", 2000}, {"output_tokens", 33}, {"interval_s", 0.1}};
  json paged = serve(expanded(serving_config(req, {{"preemption", "recompute"}, {"coarsen", false}})));
  json tiered = serve(expanded(serving_config(req, {{"preemption", "recompute"}, {"kv", "tiered"}})));
  REQUIRE(tiered.contains("kv"));
  CHECK(rel(tiered["simulated_time_s"].get<double>(), paged["simulated_time_s"].get<double>()) < 1e-12);
  CHECK(rel(tiered["ttft_s"]["mean"].get<double>(), paged["ttft_s"]["mean"].get<double>()) < 1e-12);
  CHECK(rel(tiered["tpot_s"]["mean"].get<double>(), paged["tpot_s"]["mean"].get<double>()) < 1e-12);
  CHECK(tiered["tiers"]["gpu"]["hit_rate"].get<double>() == 1.0);
  CHECK(tiered["kv"]["fetched_bytes"].get<double>() == 0);
}

TEST_CASE("serving, KV in tiers: requests take a block range while they hold KV and give it back, the paged pool's times") {
  // 40 requests, two running at a time: the block table holds two ranges
  // (serving.max_running), each used by 20 requests in turn.
  json req{{"kind", "identical"}, {"count", 40}, {"input_tokens", 700}, {"output_tokens", 9}, {"interval_s", 0.01}};
  json opts{{"preemption", "recompute"}, {"max_running", 2}};
  json p = opts;
  p["coarsen"] = false;
  json paged = serve(expanded(serving_config(req, p)));
  json t = opts;
  t["kv"] = "tiered";
  json tiered = serve(expanded(serving_config(req, t)));
  REQUIRE(tiered.contains("kv"));
  CHECK(tiered["requests"].get<uint64_t>() == 40);
  CHECK(rel(tiered["simulated_time_s"].get<double>(), paged["simulated_time_s"].get<double>()) < 1e-12);
  CHECK(rel(tiered["ttft_s"]["p99"].get<double>(), paged["ttft_s"]["p99"].get<double>()) < 1e-12);
  CHECK(rel(tiered["tpot_s"]["mean"].get<double>(), paged["tpot_s"]["mean"].get<double>()) < 1e-12);
  CHECK(tiered["tiers"]["gpu"]["hit_rate"].get<double>() == 1.0);
}

TEST_CASE("serving, KV in tiers: requests of different lengths take chunks of the block table, the paged pool's times") {
  // 60 requests from 100 to 3,000 tokens, four running at a time: four
  // ranges of the longest request would be mostly unused, so the table is
  // chunked and holds the four longest requests' chunks. With all KV on the
  // GPU nothing moves, and the times are the paged pool's.
  json req{{"kind", "synthetic"}, {"requests", 60}, {"seed", 7}, {"block_tokens", 16},
           {"arrival", {{"kind", "poisson"}, {"rate_per_s", 20}}},
           {"input", {{"kind", "uniform"}, {"min", 100}, {"max", 3000}}},
           {"output", {{"kind", "uniform"}, {"min", 2}, {"max", 40}}}};
  json opts{{"preemption", "recompute"}, {"max_running", 4}};
  json p = opts;
  p["coarsen"] = false;
  json paged = serve(expanded(serving_config(req, p)));
  json t = opts;
  t["kv"] = "tiered";
  json cfg = expanded(serving_config(req, t));
  const json tiered = in_child([cfg]() mutable {
    resolve_params(cfg["workload"], workload_params(), "workload");
    if (!cfg.contains("sim")) cfg["sim"] = json::object();
    resolve_params(cfg["sim"], sim_params(), "sim");
    reset_footprint();
    ServingSimulation sim(cfg);
    json m = sim.run("");
    m["footprint"] = footprint_json();
    return m;
  });
  REQUIRE(tiered.contains("kv"));
  CHECK(tiered["requests"].get<uint64_t>() == 60);
  CHECK(rel(tiered["simulated_time_s"].get<double>(), paged["simulated_time_s"].get<double>()) < 1e-12);
  CHECK(rel(tiered["ttft_s"]["p99"].get<double>(), paged["ttft_s"]["p99"].get<double>()) < 1e-12);
  CHECK(rel(tiered["tpot_s"]["mean"].get<double>(), paged["tpot_s"]["mean"].get<double>()) < 1e-12);
  CHECK(tiered["tiers"]["gpu"]["hit_rate"].get<double>() == 1.0);
  // The table: fewer blocks than four ranges of the longest request (32 layers).
  uint64_t table_blocks = 0;
  for (auto it = tiered["footprint"]["parts"].begin(); it != tiered["footprint"]["parts"].end(); ++it)
    if (it.key().rfind("the KV block table (", 0) == 0) table_blocks = std::stoull(it.key().substr(20));
  CHECK(table_blocks > 0);
  CHECK(table_blocks < 4ull * 32 * ((3000 + 40 + 15) / 16));
}

TEST_CASE("serving, KV in tiers: N identical requests at time 0 give the single-batch engine's result, KV spilling to DRAM") {
  // 16 GB of GPU memory: 1.6 GB of KV room for 4 x 2K tokens (4.2 GB); LRU
  // demotes to DRAM, promotion on access brings blocks back.
  const json policies{{"eviction", "lru"}, {"promotion", "on_access"}, {"evaluation", "exact"}};
  auto [single, served] = tiered_pair({"gpu", "dram"}, {{"gpu", {{"capacity_GB", 16}}}}, policies, 4, 2000, 16);
  REQUIRE(served.contains("kv"));
  REQUIRE(single["tiers"]["dram"]["hit_rate"].get<double>() > 0.5);  // the premise: most reads come from DRAM
  CHECK(rel(served["ttft_s"]["p99"].get<double>(), single["ttft_s"].get<double>()) < 1e-12);
  CHECK(rel(served["tpot_s"]["mean"].get<double>(), single["mean_step_latency_s"].get<double>()) < 1e-12);
  CHECK(rel(served["simulated_time_s"].get<double>(), single["simulated_time_s"].get<double>()) < 1e-12);
  CHECK(served["kv"]["fetched_bytes"].get<double>() == single["fetched_bytes"].get<double>());
  CHECK(served["kv"]["blocks_promoted"].get<uint64_t>() == single["blocks_promoted"].get<uint64_t>());
  CHECK(served["tiers"]["dram"]["hit_rate"].get<double>() == single["tiers"]["dram"]["hit_rate"].get<double>());
  // The KV counters have one name each, flat here and under "kv" there.
  for (auto it = served["kv"].begin(); it != served["kv"].end(); ++it) CHECK(single.contains(it.key()));
  CHECK(served["kv"]["kv_block_bytes"].get<uint64_t>() == single["kv_block_bytes"].get<uint64_t>());
}

TEST_CASE("serving, KV in tiers: layer-ahead selection runs within an iteration, not across") {
  // All KV in DRAM, read through the GPU every layer. Depth 0: the
  // single-batch result. Depth 1: faster than depth 0, but each iteration's
  // first layer waits for its fetch, where the single-batch engine fetched it
  // during the previous step's last layer.
  json policies{{"promotion", "none"}, {"evaluation", "exact"}, {"prefetch", {{"name", "layer_ahead"}, {"depth", 0}}}};
  auto [single0, served0] = tiered_pair({"dram"}, json::object(), policies, 4, 2000, 16);
  REQUIRE(served0.contains("kv"));
  CHECK(rel(served0["tpot_s"]["mean"].get<double>(), single0["mean_step_latency_s"].get<double>()) < 1e-12);
  CHECK(rel(served0["simulated_time_s"].get<double>(), single0["simulated_time_s"].get<double>()) < 1e-12);
  // The KV read through the GPU's staging buffers, and the prompt KV held there until written: the same.
  CHECK(served0["kv"]["gpu_staging_peak_bytes"].get<double>() == single0["gpu_staging_peak_bytes"].get<double>());
  CHECK(served0["kv"]["prefill_staging_peak_bytes"].get<double>() == single0["prefill_staging_peak_bytes"].get<double>());
  CHECK(served0["kv"]["prefill_staging_peak_bytes"].get<double>() > 0);
  policies["prefetch"]["depth"] = 1;
  auto [single1, served1] = tiered_pair({"dram"}, json::object(), policies, 4, 2000, 16);
  const double s1 = single1["mean_step_latency_s"].get<double>(), v1 = served1["tpot_s"]["mean"].get<double>();
  CHECK(v1 > s1);
  CHECK(v1 < served0["tpot_s"]["mean"].get<double>());
  // At most one layer's fetch more per step: the 32nd part of depth 0's step.
  CHECK(v1 - s1 < served0["tpot_s"]["mean"].get<double>() / 32);
}

TEST_CASE("serving, KV in tiers: a preempted sequence's blocks are released and created again by its recompute") {
  // The case of the paged pool's recompute test, with the GPU as the only tier:
  // the same scheduling, the same times; the invariant checker (on in the
  // tests) holds every block's state, and the tiers empty at the end.
  auto cfg = [](json extra) {
    json c = serving_config({{"kind", "identical"}, {"count", 4}, {"input_tokens", 5000}, {"output_tokens", 2000}},
                            {{"max_batched_tokens", 20000}, {"preemption", "recompute"}});
    c["hardware"] = a100({"gpu"});
    c["hardware"]["devices"] = {{"gpu", {{"capacity_GB", 13.4 + 14.0}}}};
    c["workload"]["block_tokens"] = 64;
    for (auto it = extra.begin(); it != extra.end(); ++it) c["serving"][it.key()] = it.value();
    return expanded(c);
  };
  json paged = serve(cfg({{"coarsen", false}}));
  json tiered = serve(cfg({{"kv", "tiered"}}));
  REQUIRE(tiered.contains("kv"));
  CHECK(tiered["recomputed"].get<uint64_t>() > 0);
  CHECK(tiered["recomputed"].get<uint64_t>() == paged["recomputed"].get<uint64_t>());
  CHECK(tiered["computed_prompt_tokens"].get<uint64_t>() == paged["computed_prompt_tokens"].get<uint64_t>());
  CHECK(rel(tiered["simulated_time_s"].get<double>(), paged["simulated_time_s"].get<double>()) < 1e-12);
}

TEST_CASE("serving, KV in tiers: a request with its own attention gives the single-batch result under attention-driven policies") {
  // The request's synthetic attention (serving.attention, seeded sim.seed +
  // its id: request 0 has the single-batch trace's seed).
  const json attention{{"kind", "synthetic"}, {"heavy_fraction", 0.15}};
  auto pair = [&](json hw, json policies, uint32_t ctx, uint32_t steps, uint32_t bt) {
    json single{{"hardware", hw}, {"model", "configs/models/opt-6.7b.json"}, {"policies", policies}};
    single["workload"] = {{"batch", 1}, {"context_tokens", ctx}, {"decode_steps", steps}, {"block_tokens", bt},
                          {"prefill", "compute"}, {"trace", attention}, {"past_trained_context", true}};
    json serving{{"hardware", hw},
                 {"model", {{"preset", "configs/models/opt-6.7b.json"}, {"max_context_tokens", 0}}},
                 {"workload", {{"block_tokens", bt}}},
                 {"policies", policies}};
    serving["serving"] = {{"kv", "tiered"}, {"preemption", "recompute"}, {"attention", attention},
                          {"requests", {{"kind", "identical"}, {"count", 1}, {"input_tokens", ctx}, {"output_tokens", steps + 1}}}};
    return std::make_pair(simulate(expanded(single)), serve(expanded(serving)));
  };
  auto same = [](const json& single, const json& served) {
    REQUIRE(served.contains("kv"));
    CHECK(rel(served["ttft_s"]["mean"].get<double>(), single["ttft_s"].get<double>()) < 1e-12);
    CHECK(rel(served["tpot_s"]["mean"].get<double>(), single["mean_step_latency_s"].get<double>()) < 1e-12);
    CHECK(served["kv"]["fetched_bytes"].get<double>() == single["fetched_bytes"].get<double>());
    CHECK(served["kv"]["blocks_dropped"].get<uint64_t>() == single["blocks_dropped"].get<uint64_t>());
    CHECK(served["kv"]["blocks_promoted"].get<uint64_t>() == single["blocks_promoted"].get<uint64_t>());
    for (auto it = single["tiers"].begin(); it != single["tiers"].end(); ++it)
      CHECK(served["tiers"][it.key()]["hit_rate"].get<double>() == it.value()["hit_rate"].get<double>());
  };
  SECTION("H2O over the trace's attention (oracle selection), KV on the GPU and in DRAM") {
    json hw = a100({"gpu", "dram"});
    hw["devices"] = {{"gpu", {{"capacity_GB", 15}}}};
    auto [single, served] = pair(hw, {{"eviction", {{"name", "h2o"}, {"budget", 0.3}}}, {"evaluation", "trace"}}, 2000, 32, 16);
    REQUIRE(single["blocks_dropped"].get<uint64_t>() > 0);
    same(single, served);
  }
  SECTION("HillInfer's HKM over GPU, DRAM and SmartSSD with top-k selection") {
    json pol = expanded(json{{"preset", "configs/systems/hillinfer.json"}})["policies"];
    pol["evaluation"] = {{"name", "topk"}, {"budget", 0.2}};  // APP's scoring split runs in the single-batch engine only
    pol["prefetch"] = {{"name", "layer_ahead"}, {"depth", 0}};  // within an iteration only (the test above)
    json hw{{"preset", "configs/hardware/rtx4090_ddr4_smartssd.json"}, {"tiers", {"gpu", "dram", "smartssd"}},
            {"devices", {{"dram", {{"capacity_GB", 2}}}}}};
    auto [single, served] = pair(hw, pol, 8000, 16, 128);
    REQUIRE(single["tiers"]["smartssd"]["hit_rate"].get<double>() > 0);
    same(single, served);
  }
}

TEST_CASE("serving, KV in tiers: a budget policy drops blocks, and attention reads only what is kept") {
  json req{{"kind", "identical"}, {"count", 2}, {"input_tokens", 2000}, {"output_tokens", 65}};
  auto run = [&](json eviction) {
    json c = serving_config(req, {{"kv", "tiered"}, {"preemption", "recompute"}});
    c["policies"] = {{"eviction", eviction}};
    return serve(expanded(c));
  };
  json dense = run("lru");
  json kept = run(json{{"name", "streaming_llm"}, {"sinks", 1}, {"recent", 8}});
  REQUIRE(kept.contains("kv"));
  CHECK(dense["kv"]["blocks_dropped"].get<uint64_t>() == 0);
  CHECK(kept["kv"]["blocks_dropped"].get<uint64_t>() > 0);
  // Each (sequence, layer) keeps 9 of its 129 blocks of 16 tokens (2,064 tokens of KV), and reads only those.
  CHECK(kept["kv"]["blocks_dropped"].get<uint64_t>() == 2 * 32 * (129 - 9));
  CHECK(kept["tpot_s"]["mean"].get<double>() < dense["tpot_s"]["mean"].get<double>());
}

// Two requests with the same prompt blocks; the second arrives long after
// the first is done and finds its whole prompt in DRAM, behind a PCIe link
// of B bytes/s. Checks the second's TTFT against the layer-wise closed form.
static void check_prefix_load(double B, bool coarsen) {
  const int L = 4;
  const double lat = 5e-6;  // the PCIe link
  const double mem = 200e9;  // GPU memory bandwidth: a layer's kernel reads T tokens' KV
  const std::string trace =
      (std::filesystem::temp_directory_path() / ("kvtier_serving_prefix_" + std::to_string(getpid()) + ".jsonl")).string();
  {
    std::ofstream f(trace);
    f << R"({"timestamp": 0, "input_length": 4096, "output_length": 2, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8]})" << "\n";
    f << R"({"timestamp": 100000, "input_length": 4096, "output_length": 2, "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8]})" << "\n";
  }
  json gpu = fast_gpu(64);
  gpu["memory_GBps"] = mem / 1e9;
  json cfg{{"hardware",
            {{"devices",
              {{"gpu", gpu}, {"dram", {{"kind", "dram"}, {"capacity_GB", 100}, {"bandwidth_GBps", 1e6}, {"latency_us", 0}}}}},
             {"links", {{"pcie", {{"ends", {"dram", "gpu"}}, {"bandwidth_GBps", B / 1e9}, {"latency_us", lat * 1e6}}}}},
             {"tiers", {"gpu", "dram"}}}},
           {"model", tiny_model(L)},
           {"workload", {{"block_tokens", 16}}},
           {"serving",
            {{"requests", {{"kind", "trace"}, {"path", trace}}},
             {"max_batched_tokens", 8192},
             {"preemption", "recompute"},
             {"coarsen", coarsen}}}};
  json m = serve(cfg);
  REQUIRE(m.contains("ttft_s"));
  CHECK(m["layered_iterations"].get<uint64_t>() == (coarsen ? 1 : m["iterations"].get<uint64_t>()));
  const double T = 4096, kvl = 512;  // bytes per token per layer of the tiny model
  // Cached: all but the last token (computed to produce the next one).
  const double load = lat + (T - 1) * kvl / B;
  const double weights = 1e-9 * 1e9 * 2 / L;
  const double C = (weights + T * kvl) / mem;  // memory-bound: the layer reads the whole prompt's KV
  double done = 0;
  for (int l = 0; l < L; ++l) done = std::max(done, (l + 1) * load) + C;
  std::istringstream csv(m["csv"].get<std::string>());
  auto fields = [](const std::string& line) {
    std::vector<std::string> f;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) f.push_back(x);
    return f;
  };
  std::string line;
  std::getline(csv, line);
  const std::vector<std::string> header = fields(line);
  std::getline(csv, line);
  std::getline(csv, line);  // the second request
  const std::vector<std::string> f = fields(line);
  const size_t dram = size_t(std::find(header.begin(), header.end(), "hit_tokens_dram") - header.begin());
  REQUIRE(dram < f.size());
  CHECK(std::stod(f[dram]) == T - 1);      // hit tokens in DRAM
  CHECK(std::stod(f[8]) == 1);             // computed prompt tokens
  CHECK(rel(std::stod(f[5]), done) < 1e-6);  // TTFT
  CHECK(m["prefix_cache"]["write_bytes"].get<double>() == 8 * 512 * kvl * L);
}

TEST_CASE("serving: a prompt cached in DRAM loads layer by layer, overlapped with compute (closed form)") {
  for (bool coarsen : {true, false}) {
    CAPTURE(coarsen);
    check_prefix_load(10e9, coarsen);  // each layer waits for its load
    // A link so fast that every load is in before layer 1: the layers after
    // it run as one kernel, in the same time.
    check_prefix_load(1e13, coarsen);
  }
}

TEST_CASE("serving: impossible requests and limits are config errors naming the place") {
  json big = serve(expanded(serving_config({{"kind", "identical"}, {"count", 1}, {"input_tokens", 200000}, {"output_tokens", 1}},
                                           {{"chunked_prefill", true}})));
  REQUIRE(big.contains("config_error"));
  CHECK_THAT(big["config_error"].get<std::string>(), Catch::Contains("can never run"));
  json budget = serve(expanded(serving_config({{"kind", "identical"}, {"count", 1}, {"input_tokens", 9000}, {"output_tokens", 1}})));
  REQUIRE(budget.contains("config_error"));
  CHECK_THAT(budget["config_error"].get<std::string>(), Catch::Contains("serving.max_batched_tokens"));
  json slo = serve(expanded(serving_config({{"kind", "identical"}, {"count", 1}}, {{"slo", {{"ttft", 1}}}})));
  REQUIRE(slo.contains("config_error"));
  CHECK_THAT(slo["config_error"].get<std::string>(), Catch::Contains("serving.slo"));
}

TEST_CASE("scheduler: chunked prefill splits a prompt by the token budget; decode joins the batch") {
  std::vector<ServingRequest> reqs = queued({{0, 10000, 3}, {1, 100, 5}});
  SchedulerLimits lim;
  lim.max_batched_tokens = 4096;
  lim.chunked_prefill = true;
  lim.gpu_blocks = 10000;
  Scheduler s(lim, reqs, [](ServingRequest&) { return 0u; });
  s.arrive(0);
  s.arrive(1);
  std::vector<uint32_t> chunks;
  for (int i = 0; i < 3; ++i) {
    const IterationPlan& p = s.plan();
    REQUIRE(!p.items.empty());
    CHECK(p.items[0].req == 0);
    chunks.push_back(p.items[0].tokens);
    s.complete(double(i));
  }
  CHECK(chunks == std::vector<uint32_t>{4096, 4096, 1808});
  CHECK(reqs[0].generated == 1);           // the last chunk produced the first token
  CHECK(reqs[1].first_token_s == 2.0);     // admitted beside the last chunk (budget left: 2,288)
}

TEST_CASE("scheduler: shortest_prompt admits the shorter waiting prompt first") {
  const std::vector<ServingRequest> reqs = queued({{0, 3000, 1}, {0, 500, 1}});
  for (QueueOrder o : {QueueOrder::Fcfs, QueueOrder::ShortestPrompt}) {
    std::vector<ServingRequest> r = reqs;
    SchedulerLimits lim;
    lim.max_batched_tokens = 3000;
    lim.gpu_blocks = 1000;
    lim.order = o;
    Scheduler s(lim, r, [](ServingRequest&) { return 0u; });
    s.arrive(0);
    s.arrive(1);
    const IterationPlan& p = s.plan();
    REQUIRE(p.items.size() == 1);
    CHECK(p.items[0].req == (o == QueueOrder::Fcfs ? 0u : 1u));
  }
}
