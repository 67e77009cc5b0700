// The serving run's configuration: serving.* resolved and checked, the GPU's
// paged pool, the swap space, the request stream, the prefix cache, the
// policies serving runs, and with serving.kv "tiered" the KV store; all of
// it before SimGrid starts, so that every error comes before anything runs.
#include "sim/serving/serving.h"

#include <algorithm>
#include <functional>

#include "policies/weights.h"
#include "sim/core/config.h"
#include "sim/core/footprint.h"
#include "sim/core/timeline.h"
#include "sim/engine/invariants.h"
#include "sim/engine/layer_pipeline.h"
#include "sim/engine/paged_pipeline.h"
#include "sim/kv/kv_store.h"
#include "sim/platform/platform.h"
#include "sim/platform/transfer_planner.h"
#include "sim/platform/wakeup.h"
#include "sim/platform/weight_stream.h"
#include "sim/serving/prefix_cache.h"
#include "sim/serving/requests.h"
#include "traces/synthetic.h"

namespace kvtier {

ParamList serving_params() {
  return {
      any("requests", json(),
          "the request stream: {\"kind\": \"trace\", \"path\": Mooncake JSONL or Azure CSV} | {\"kind\": \"synthetic\", "
          "generator params (docs/replay.md)} | {\"kind\": \"identical\", \"count\", \"input_tokens\", "
          "\"output_tokens\", \"interval_s\"}",
          ParamType::Object),
      integer("limit", 0, "serve only the first N requests of the stream (0: all)", 0, 1e8),
      positive("time_scale", 1.0, "arrival times are multiplied by this (0.5: twice the request rate)"),
      integer("max_running", 256, "sequences in one iteration (vLLM max_num_seqs)", 1, 1 << 20),
      integer("max_batched_tokens", 8192, "tokens computed in one iteration (vLLM max_num_batched_tokens)", 1, 1 << 24),
      num("watermark", 0.01,
          "fraction of the GPU's KV pool kept free when admitting a prompt, so running sequences can grow (vLLM's "
          "default 0.01)",
          0, 0.5),
      boolean("chunked_prefill", false, "split prompts longer than the iteration's token budget over iterations"),
      str("batching", "mixed",
          "mixed (new prompts join the running sequences' decode iterations, as vLLM V1 and Sarathi batch them) or "
          "prefill_first (an iteration that admits new prompts computes them alone and the decode steps wait, vLLM "
          "V0's scheduler)",
          {"mixed", "prefill_first"}),
      str("order", "fcfs", "waiting queue order: fcfs (arrival) or shortest_prompt", {"fcfs", "shortest_prompt"}),
      str("preemption", "swap",
          "when the GPU's KV pool runs out: swap (whole sequences to host memory and back, vLLM swap) or recompute "
          "(drop their KV, prefill again)",
          {"swap", "recompute"}),
      num("swap_space_GiB", 4.0, "memory reserved for swapped-out KV (vLLM's swap_space, 4 GiB by default)", 0),
      str("swap_tier", "",
          "the tier that holds swapped-out sequences (default: the first host-memory tier below the GPU; an SSD "
          "tier swaps to flash, as HiFC does)"),
      any("prefix_cache", json::object(),
          "{\"enabled\": true, \"write\": \"write_through\" | \"on_finish\", \"policy\": eviction policy of every "
          "cache tier (lru), \"inclusive\": false}: the tiers below the GPU keep prompt blocks for reuse",
          ParamType::Object),
      any("slo", json::object(), "{\"ttft_s\": limit, \"tpot_s\": limit}: goodput counts requests within both",
          ParamType::Object),
      any("attention", json::object(),
          "with serving.kv \"tiered\": each request's attention, {\"kind\": \"synthetic\", generator parameters} "
          "(docs/traces.md; a generator per request, its prompt and output lengths, seeded sim.seed + its id), so that "
          "policies that select or evict by attention run (H2O, top-k, HKM's ranking); {} (default): none, dense attention",
          ParamType::Object),
      str("kv", "paged",
          "where running sequences' KV lives: paged (the GPU's paged pool; the tiers below are the prefix cache and the "
          "swap space) or tiered (every tier of hardware.tiers, block by block, placed, evicted, promoted and prefetched "
          "by policies.*, each iteration through the layer pipeline of the single-batch engine)",
          {"paged", "tiered"}),
      str("kv_unit", "layer",
          "with serving.kv \"tiered\": what one KV block of the block table holds, and so what is placed, evicted, "
          "promoted and fetched as one unit: layer (a block's tokens at one layer; each layer selected and fetched on "
          "its own, as per-layer selection needs) or all_layers (a block's tokens at every layer, as vLLM's swap space, "
          "Mooncake Store and LMCache keep them: selected and fetched once per iteration before layer 0; dense "
          "attention only)",
          {"layer", "all_layers"}),
      str("kv_layers", "all",
          "with serving.kv \"tiered\" and serving.kv_unit \"layer\": all (every layer's blocks in the block table, "
          "each layer's decisions its own) or representative (layer 0's blocks only, each tier with an Lth of its room; "
          "layer 0's transfers and kernel issued again for every layer at its own place in the pipeline, and counts of "
          "blocks scaled by L: the full run's results where every layer decides alike, which result.json's "
          "representative_layer reports; dense attention and weights on the GPU only)",
          {"all", "representative"}),
      boolean("coarsen", true,
              "fewer SimGrid activities where they cannot change the outcome (same times; false: every layer and "
              "collective on its own, the reference): an iteration's layers run as one kernel once nothing is left "
              "to load into them, and a cluster's all-reduces run as closed forms where nothing else crosses their "
              "links; serving.kv \"tiered\" runs every iteration layer by layer, except that with serving.kv_unit "
              "\"all_layers\" its L kernels run as one once layer 0's fetches are in"),
      boolean("request_csv", true, "write requests.csv (one line per request) beside result.json"),
  };
}

namespace {

ParamList slo_params() {
  return {
      num("ttft_s", 0.0, "time to first token limit, seconds (0: none)", 0),
      num("tpot_s", 0.0, "time per output token limit, seconds (0: none)", 0),
  };
}

}  // namespace

ServingSimulation::ServingSimulation(json& cfg, ValidationCache* validating, std::shared_ptr<const ParsedHardware> hardware)
    : cfg_(cfg), cache_(std::make_unique<PrefixCache>()) {
  reset_footprint();  // this run's memory, committed part by part as it is built
  init(validating, std::move(hardware), nullptr);
}

ServingSimulation::ServingSimulation(json& cfg, const RequestStream& stream, std::shared_ptr<const ParsedHardware> hardware)
    : cfg_(cfg), cache_(std::make_unique<PrefixCache>()) {
  fed_ = true;
  init(nullptr, std::move(hardware), &stream);
}

// `stream`: a cluster's, whose requests this instance is handed one by one
// (null: the run's own, read from serving.requests).
void ServingSimulation::init(ValidationCache* validating, std::shared_ptr<const ParsedHardware> hardware,
                             const RequestStream* stream) {
  s_.hw = hardware ? hardware->hw : parse_hardware(cfg_["hardware"], "hardware");
  s_.topo = std::make_unique<Topology>(s_.hw);
  s_.model = parse_llm(cfg_["model"], "model");
  json& sv = cfg_["serving"];
  resolve_params(sv, serving_params(), "serving");
  resolve_params(sv["prefix_cache"], PrefixCache::params(), "serving.prefix_cache");
  resolve_params(sv["slo"], slo_params(), "serving.slo");
  read_limits(sv);
  configure_attention(sv);
  if (s_.kv_all_layers && !attention_cfg_.empty())
    throw ConfigError("serving.attention: each layer's own heavy hitters select different blocks per layer, which "
                      "serving.kv_unit \"all_layers\" (a block of every layer, selected once) cannot model; expected {} "
                      "(dense attention) or serving.kv_unit \"layer\"");
  if (s_.kv_representative && !attention_cfg_.empty())
    throw ConfigError("serving.attention: each layer's own heavy hitters select different blocks per layer, which one "
                      "representative layer cannot stand for; expected {} (dense attention) or serving.kv_layers \"all\"");
  if (tiered_ && limits_.preemption == PreemptionMode::Swap)
    throw ConfigError("serving.preemption: with serving.kv \"tiered\" a sequence's KV already lives in the tiers below the "
                      "GPU; preempted sequences are recomputed (set \"recompute\")");
  slo_ttft_s_ = sv["slo"]["ttft_s"].get<double>();
  slo_tpot_s_ = sv["slo"]["tpot_s"].get<double>();
  configure_gpu();
  const double swap_bytes = configure_swap(sv);
  // The requests, all read now: their checks come before anything runs.
  RequestStream own;
  if (!stream) {
    own = load_requests(sv);
    reqs_ = std::move(own.reqs);
    stream = &own;
  }
  const RequestStream& rs = *stream;
  source_name_ = rs.source_name;
  // With the KV in tiers the prefix cache takes its share of each tier below the GPU.
  const json& pc = sv["prefix_cache"];
  const bool cache_on = pc["enabled"].get<bool>() && rs.distinct_blocks > 0;
  if (!tiered_ && pc["tier_share"].get<double>() != 0.5)
    throw ConfigError("serving.prefix_cache.tier_share: read with serving.kv \"tiered\" only (the paged pool's cache "
                      "takes every tier's room below the GPU beside the swap space)");
  if (tiered_ && cache_on && pc["gpu"].get<bool>())
    throw ConfigError("serving.prefix_cache.gpu: with serving.kv \"tiered\" the GPU is a tier of running KV, whose "
                      "blocks leave it when their request finishes; set false");
  cache_share_ = tiered_ && cache_on ? pc["tier_share"].get<double>() : 0.0;
  if (fed_ && tiered_)
    throw ConfigError("serving.kv: a cluster's instances keep their KV in the GPU's paged pool (\"paged\"); \"tiered\" "
                      "runs on one GPU");
  if (tiered_) build_kv_store(validating);
  check_requests(fed_ ? rs.reqs : reqs_, source_name_, limits_, s_.model, tiered_ ? "tiers hold " : "GPU holds ");
  configure_prefix_cache(sv["prefix_cache"], swap_bytes, rs.prefix_block_tokens, rs.distinct_blocks);
}

void ServingSimulation::read_limits(const json& sv) {
  limits_.block_tokens = static_cast<uint32_t>(get_int(cfg_["workload"], "block_tokens"));
  limits_.max_running = static_cast<uint32_t>(get_int(sv, "max_running"));
  limits_.max_batched_tokens = static_cast<uint32_t>(get_int(sv, "max_batched_tokens"));
  limits_.chunked_prefill = sv["chunked_prefill"].get<bool>();
  limits_.prefill_first = sv["batching"] == "prefill_first";
  if (limits_.prefill_first && limits_.chunked_prefill)
    throw ConfigError("serving.batching: \"prefill_first\" computes whole prompts alone (vLLM V0); expected "
                      "serving.chunked_prefill false with it");
  limits_.watermark = sv["watermark"].get<double>();
  limits_.order = sv["order"] == "fcfs" ? QueueOrder::Fcfs : QueueOrder::ShortestPrompt;
  limits_.preemption = sv["preemption"] == "swap" ? PreemptionMode::Swap : PreemptionMode::Recompute;
  coarsen_ = sv["coarsen"].get<bool>();
  tiered_ = sv["kv"] == "tiered";
  s_.kv_all_layers = sv["kv_unit"] == "all_layers";
  s_.kv_representative = sv["kv_layers"] == "representative";
  if (s_.kv_representative && (!tiered_ || s_.kv_all_layers))
    throw ConfigError("serving.kv_layers: \"representative\" runs one layer of per-layer blocks for all; expected "
                      "serving.kv \"tiered\" with serving.kv_unit \"layer\", or serving.kv_layers \"all\"");
  if (s_.kv_all_layers && !tiered_)
    throw ConfigError("serving.kv_unit: \"all_layers\" is read with serving.kv \"tiered\" only (the paged pool already "
                      "moves whole sequences' blocks of every layer); expected \"layer\" or serving.kv \"tiered\"");
  seed_ = cfg_["sim"]["seed"].get<uint64_t>();
  record_iterations_ = cfg_["sim"]["step_csv"].get<bool>();
}

void ServingSimulation::configure_attention(json& sv) {
  attention_cfg_ = sv["attention"];
  if (!attention_cfg_.is_object() || !attention_cfg_.empty()) {
    if (!tiered_)
      throw ConfigError("serving.attention: read by the KV policies with serving.kv \"tiered\" only (the paged pool reads every block)");
    if (!attention_cfg_.is_object() || attention_cfg_.value("kind", "") != "synthetic")
      throw ConfigError("serving.attention: expected {\"kind\": \"synthetic\", generator parameters} (docs/traces.md)");
    // Its parameters, checked (and resolved) now, on a shape of one block.
    json p = attention_cfg_;
    p.erase("kind");
    SyntheticAttention probe(p, "serving.attention", s_.model.layers, 1, 1, 1, seed_);
    for (auto it = p.begin(); it != p.end(); ++it) attention_cfg_[it.key()] = *it;
    sv["attention"] = attention_cfg_;
  }
}

void ServingSimulation::configure_gpu() {
  // The GPU: its memory less the weights is the paged KV pool; tier 0.
  s_.bind_gpu();
  const DeviceModel& gpu = *s_.gpu_model;
  if (!tiered_ && (s_.hw.tiers.empty() || s_.hw.device_index(s_.hw.tiers[0]) != static_cast<int>(s_.gpu_dev)))
    throw ConfigError("hardware.tiers: serving keeps running sequences' KV on the GPU: the first tier must be the GPU (" +
                      s_.hw.gpu + ")");
  for (size_t i = 0; i < s_.hw.tiers.size(); ++i) s_.tier_dev.push_back(static_cast<size_t>(s_.hw.device_index(s_.hw.tiers[i])));
  bind_policies();
  const double kv_tok = static_cast<double>(s_.model.kv_bytes_per_token());
  // The GPU's share of the weights (all of them unless policies.weights
  // streams some) and the buffers streamed weights land in.
  const double gpu_weights = s_.weights ? s_.weights->gpu_bytes() + s_.weights->gpu_staging_bytes() : s_.model.weight_bytes();
  // hardware.kv_capacity: the pool given, within what the GPU holds.
  const double gpu_kv = kv_room_bytes(s_.hw.kv_capacity, s_.hw.gpu,
                                      gpu.capacity_bytes() - gpu_weights, kv_tok * limits_.block_tokens,
                                      " after reserved_GB and " + plain_numbers(std::to_string(gpu_weights / 1e9)) +
                                          " GB of weights");
  limits_.gpu_blocks = gpu_kv > 0 ? static_cast<uint64_t>(gpu_kv / (kv_tok * limits_.block_tokens)) : 0;
  if (limits_.gpu_blocks == 0)
    throw ConfigError("hardware.devices." + s_.hw.gpu + ": no room for one KV block of " +
                      std::to_string(limits_.block_tokens) + " tokens after " +
                      plain_numbers(std::to_string(gpu_weights / 1e9)) + " GB of weights");
  s_.gpu_tier = true;
  s_.codec.assign(s_.tier_dev.size() * s_.model.layers, CompressionSpec{});
  for (size_t t = 1; t < s_.tier_dev.size(); ++t) {
    const size_t d = s_.tier_dev[t];
    s_.topo->route(d, s_.gpu_dev);
    s_.topo->route(s_.gpu_dev, d);
    if (t + 1 < s_.tier_dev.size()) s_.topo->route(d, s_.tier_dev[t + 1]);
    c_.wear.emplace_back(*s_.hw.devices[d].model);
  }
  c_.wear.insert(c_.wear.begin(), FlashWear(gpu));
}

double ServingSimulation::configure_swap(const json& sv) {
  const double kv_tok = static_cast<double>(s_.model.kv_bytes_per_token());
  // Swap space: in the named tier, or the first host-memory tier below the GPU.
  const double swap_bytes = sv["swap_space_GiB"].get<double>() * 1073741824.0;
  const std::string swap_tier = sv["swap_tier"].get<std::string>();
  for (size_t t = 1; t < s_.tier_dev.size(); ++t)
    if (swap_tier.empty() ? s_.hw.devices[s_.tier_dev[t]].model->role() == DeviceRole::Memory : s_.hw.tiers[t] == swap_tier) {
      swap_dev_ = static_cast<int>(s_.tier_dev[t]);
      break;
    }
  if (!swap_tier.empty() && swap_dev_ < 0)
    throw ConfigError("serving.swap_tier: '" + swap_tier + "' is not a tier below the GPU in hardware.tiers");
  if (limits_.preemption == PreemptionMode::Swap) {
    if (swap_dev_ < 0)
      throw ConfigError("serving.preemption: swap needs a host-memory tier below the GPU in hardware.tiers (or serving.swap_tier); use recompute");
    limits_.swap_blocks = static_cast<uint64_t>(swap_bytes / (kv_tok * limits_.block_tokens));
    const auto& d = s_.hw.devices[static_cast<size_t>(swap_dev_)];
    const double w = weight_bytes_in(static_cast<size_t>(swap_dev_));
    if (swap_bytes + w > d.model->capacity_bytes())
      throw ConfigError("serving.swap_space_GiB: " + plain_numbers(std::to_string(swap_bytes / 1e9)) + " GB of swap space" +
                        (w > 0 ? " beside " + plain_numbers(std::to_string(w / 1e9)) + " GB of weights (policies.weights)" : "") +
                        " do not fit hardware.devices." + d.name + "'s " +
                        plain_numbers(std::to_string(d.model->capacity_bytes() / 1e9)) + " GB");
  }
  return swap_bytes;
}

// The prefix cache: every tier below the GPU, in blocks of the trace's hash
// size, beside the swap space and the weights there.
void ServingSimulation::configure_prefix_cache(json& pc, double swap_bytes, uint32_t prefix_block_tokens,
                                               uint64_t distinct_blocks) {
  PrefixCache::Room room;
  room.swap_dev = swap_dev_;
  room.swap_bytes = limits_.preemption == PreemptionMode::Swap ? swap_bytes : 0.0;
  for (size_t t = 0; t < s_.tier_dev.size(); ++t) room.weight_bytes.push_back(weight_bytes_in(s_.tier_dev[t]));
  room.kv_block_bytes = static_cast<double>(s_.model.kv_bytes_per_token()) * limits_.block_tokens;
  if (tiered_) room.share = cache_share_;
  cache_->setup(pc, s_, prefix_block_tokens, distinct_blocks, room, limits_.block_tokens);
  // A cluster warms its instances' caches (or their pool) once it has built them.
  if (!fed_ && cache_->warm_start()) cache_->warm(reqs_);
}

// policies.weights: the serving engine takes weight placement (weights
// split over the GPU, host memory and disk, streamed to the GPU layer by
// layer, on the same streams as the KV's moves) and nothing else of the
// policies: the tiers below the GPU are the prefix cache, with its own
// eviction policy, and a running sequence's KV stays on the GPU.
void ServingSimulation::bind_policies() {
  json& pol = cfg_["policies"];
  if (tiered_) {
    bind_kv_policies();
  } else {
    for (auto it = pol.begin(); it != pol.end(); ++it)
      if (it.key() != "weights" && !is_annotation_key(it.key()))
        throw ConfigError("policies." + it.key() +
                          ": not run by the serving engine with serving.kv \"paged\" (running sequences' KV stays on the "
                          "GPU; the tiers below are the prefix cache, evicted by serving.prefix_cache.policy); it takes "
                          "policies.weights only (serving.kv \"tiered\" runs the KV policies)");
  }
  if (!pol.contains("weights")) pol["weights"] = "gpu";
  const auto wp = Registry<WeightPolicy>::instance().create(pol["weights"], "policies.weights");
  if (pol["weights"]["name"] == "gpu") return;
  if (s_.kv_representative)
    throw ConfigError("policies.weights: weights streamed layer by layer load differently per layer (the first layers "
                      "stay on the GPU); serving.kv_layers \"representative\" expects \"gpu\" or serving.kv_layers \"all\"");
  if (s_.kv_all_layers)
    throw ConfigError("policies.weights: weights streamed layer by layer with serving.kv_unit \"all_layers\" (whole-model "
                      "KV blocks fetched before layer 0) are not modelled; expected \"gpu\" or serving.kv_unit \"layer\"");
  const WeightPlan plan = wp->plan();
  const std::string P = "policies.weights.";
  if (plan.gpu_batches != 1)
    throw ConfigError(P + "gpu_batches: serving runs each iteration as one batch (continuous batching); FlexGen's GPU "
                      "batches are a single-batch schedule (set 1)");
  if (plan.cpu_attention)
    throw ConfigError(P + "cpu_attention: running sequences' KV stays on the GPU in serving; there is no host-resident KV "
                      "for the CPU to attend to");
  if (plan.activations_on_cpu)
    throw ConfigError(P + "activations: hidden states between layers stay on the GPU in serving (set \"gpu\")");
  if (plan.compress_cache)
    throw ConfigError(P + "compress_cache: compressed KV in the GPU's paged pool is not modelled by the serving engine");
  if (!plan.pin_weights || !plan.pin_cache)
    throw ConfigError(P + (plan.pin_weights ? "pin_cache" : "pin_weights") +
                      ": the serving engine keeps host memory pinned (set true)");
  install_weights(s_, WeightStream::from_config(plan, s_.hw, s_.model, s_.tier_dev, s_.gpu_dev, -1, 1, "none"),
                  s_.tier_dev.size());
  const WeightStream::Homes& h = s_.weights->homes();
  if (h.disk >= 0 && plan.disk > 0) s_.topo->route(static_cast<size_t>(h.disk), static_cast<size_t>(h.dram));
}

// serving.kv "tiered": the KV policies of the single-batch engine, the same
// defaults but dense attention (request traces carry no attention), and
// none that needs what only an attention trace or a decode step gives.
void ServingSimulation::bind_kv_policies() {
  json& pol = cfg_["policies"];
  const json defaults = {{"eviction", "lru"}, {"promotion", "on_access"}, {"placement", "top"}, {"prefetch", "none"},
                         {"evaluation", "exact"}, {"compression", "none"}, {"weights", "gpu"}};
  s_.pol.create(pol, defaults);
  auto name = [&](const char* fam) { return pol[fam]["name"].get<std::string>(); };
  if (s_.kv_all_layers || s_.kv_representative) check_whole_model_blocks();
  const bool attention = !cfg_["serving"]["attention"].empty();
  const std::string why = ": requests carry no attention; give them some (serving.attention) or use dense attention "
                          "(evaluation \"exact\")";
  if (!attention && s_.pol.eval->reads_attention())
    throw ConfigError("policies.evaluation: '" + name("evaluation") + "' selects by attention" + why);
  if (!attention && s_.pol.evict->reads_attention())
    throw ConfigError("policies.eviction: '" + name("eviction") + "' evicts by attention mass" + why);
  if (!attention && s_.pol.prefetch->reads_attention())
    throw ConfigError("policies.prefetch: '" + name("prefetch") + "' learns from attention" + why);
  if (s_.pol.prefetch->adapts_depth())
    throw ConfigError("policies.prefetch: '" + name("prefetch") + "' adapts its depth to the single-batch engine's decode "
                      "steps, which serving iterations are not; use layer_ahead");
  if (s_.pol.eval->scoring())
    throw ConfigError("policies.evaluation: '" + name("evaluation") + "' splits scoring between a CPU and an FPGA, which "
                      "the single-batch engine runs; serving does not");
}

// serving.kv_unit "all_layers": whole-model blocks are selected once per
// iteration for every layer, which is exact only where every layer would
// select, and store, the same blocks.
void ServingSimulation::check_whole_model_blocks() const {
  const json& pol = cfg_["policies"];
  auto name = [&](const char* fam) { return pol[fam]["name"].get<std::string>(); };
  // The same holds for a representative layer standing for every layer.
  const std::string mode = s_.kv_all_layers ? "serving.kv_unit \"all_layers\"" : "serving.kv_layers \"representative\"";
  const std::string other = s_.kv_all_layers ? "serving.kv_unit \"layer\"" : "serving.kv_layers \"all\"";
  if (!s_.pol.eval->dense())
    throw ConfigError("policies.evaluation: '" + name("evaluation") + "' selects per layer; " + mode +
                      " selects for every layer at once, so expected \"exact\" (dense attention) or " + other);
  auto same = [](const CompressionSpec& a, const CompressionSpec& b) {
    return a.key_ratio == b.key_ratio && a.value_ratio == b.value_ratio && a.compress_Bps == b.compress_Bps &&
           a.decompress_Bps == b.decompress_Bps && a.on_gpu == b.on_gpu && a.threads == b.threads;
  };
  for (size_t t = 0; t < s_.tier_dev.size(); ++t) {
    const CompressionSpec first = s_.pol.compress->spec(static_cast<TierId>(t), 0);
    for (uint32_t l = 1; l < s_.model.layers; ++l)
      if (!same(s_.pol.compress->spec(static_cast<TierId>(t), l), first))
        throw ConfigError("policies.compression: '" + name("compression") + "' stores layer " + std::to_string(l) +
                          " differently from layer 0 in tier " + s_.hw.tiers[t] + "; " + mode +
                          " stores every layer as layer 0, so expected the same compression at every layer");
  }
}

double ServingSimulation::weight_bytes_in(size_t dev) const {
  if (!s_.weights) return 0;
  for (size_t t = 1; t < s_.tier_dev.size(); ++t)
    if (s_.tier_dev[t] == dev) return s_.weights->tier_bytes(static_cast<int>(t));
  return 0;
}

// serving.kv "tiered": each request that holds KV is a sequence of the
// block table (a slot: taken at its first iteration, given back when it
// finishes or is recomputed), as many slots as requests can run at once; the
// scheduler admits requests against what the tiers hold, the tiers' capacity
// as its pool. The KV store sizes the table by what can be live and checks
// it before anything is allocated.
uint32_t ServingSimulation::kv_slots() const {
  return static_cast<uint32_t>(std::min<uint64_t>(reqs_.size(), limits_.max_running));
}

void ServingSimulation::build_kv_store(ValidationCache* validating) {
  uint64_t longest = 1;
  for (const ServingRequest& q : reqs_) longest = std::max<uint64_t>(longest, uint64_t(q.input_tokens) + q.output_tokens);
  const uint64_t bt = limits_.block_tokens;
  const uint64_t slots = kv_slots();
  // What the requests that run at once can hold in the block table (the KV
  // store chunks the table where this is less than a range per request
  // sized for the longest): the chunks of the `slots` largest requests. 32
  // blocks a chunk: a sequence's last chunk wastes at most 31 blocks per
  // layer, and the map of chunks is a 32nd of the longest range per layer.
  constexpr uint32_t kChunkShift = 5;
  std::vector<uint64_t> chunks;
  chunks.reserve(reqs_.size());
  for (const ServingRequest& q : reqs_) {
    const uint64_t blocks = (uint64_t(q.input_tokens) + q.output_tokens + bt - 1) / bt;
    chunks.push_back((blocks + (uint64_t(1) << kChunkShift) - 1) >> kChunkShift);
  }
  if (slots < chunks.size())
    std::nth_element(chunks.begin(), chunks.begin() + static_cast<std::ptrdiff_t>(slots), chunks.end(), std::greater<uint64_t>());
  uint64_t held = 0;
  for (size_t i = 0; i < slots && i < chunks.size(); ++i) held += chunks[i];
  s_.kv_chunk_shift = kChunkShift;
  s_.kv_trace_chunks = held * s_.kv_layers();
  s_.batch = static_cast<uint32_t>(slots);
  s_.ctx = 0;
  s_.steps = static_cast<uint32_t>(longest);
  s_.bt = static_cast<uint32_t>(bt);
  s_.admitted_by_scheduler = true;
  if (!attention_cfg_.empty()) attention_.resize(reqs_.size());
  slot_of_.assign(reqs_.size(), kNoSlot);
  free_slots_.clear();
  for (uint32_t i = 0; i < slots; ++i) free_slots_.push_back(i);  // a min-heap: the lowest free slot first
  s_.bind_host_devices();  // the devices a CPU codec works with
  // The KV store names the tiers' devices, codecs and wear itself.
  s_.tier_dev.clear();
  s_.codec.clear();
  c_.wear.clear();
  s_.gpu_tier = false;  // the KV store says whether the GPU is a tier
  kv_ = std::make_unique<KvStore>(s_, c_, validating);
  const BlockTable& t = kv_->table();
  // The prefix cache's share of each tier below the GPU is not the running KV's.
  // With a representative layer the full run's room for running KV, what is
  // left of each tier after the cache's share, is shared by L layers: the
  // one layer kept gets an Lth of it, and the scheduler admits against the
  // full run's pool.
  const uint64_t L = s_.model.layers;
  auto running_room = [&](size_t u) {
    const uint64_t full = kv_->full_capacity(static_cast<TierId>(u));
    return full - (u > 0 && cache_share_ > 0 ? static_cast<uint64_t>(cache_share_ * double(full)) : 0);
  };
  for (size_t u = 1; cache_share_ > 0 && u < t.tiers.size(); ++u) {
    const TierInfo& ti = t.tiers[u];
    kv_->reserve_room(static_cast<TierId>(u), s_.kv_representative
                                                  ? ti.capacity_blocks - running_room(u) / L
                                                  : static_cast<uint64_t>(cache_share_ * double(ti.capacity_blocks)));
    if (ti.capacity_blocks == 0)
      throw ConfigError("serving.prefix_cache.tier_share: " + plain_numbers(std::to_string(cache_share_)) +
                        " of hardware.devices." + ti.name + " for the prefix cache leaves no block for running KV");
  }
  uint64_t capacity = 0;
  for (const TierInfo& ti : t.tiers) capacity += ti.capacity_blocks;
  limits_.gpu_blocks = capacity / s_.kv_layers();  // blocks of every layer
  if (s_.kv_representative) {
    uint64_t full = 0;
    for (size_t u = 0; u < t.tiers.size(); ++u) full += running_room(u);
    limits_.gpu_blocks = full / L;
  }
  s_.pol.setup(t);
}

}  // namespace kvtier
