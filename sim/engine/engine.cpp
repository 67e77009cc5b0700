#include "sim/engine/engine.h"

#include <algorithm>
#include <cmath>

#include "models/fpga_ku15p.h"
#include "sim/core/config.h"
#include "sim/core/footprint.h"
#include "sim/engine/invariants.h"
#include "sim/engine/layer_pipeline.h"
#include "sim/engine/scoring.h"
#include "sim/platform/platform.h"
#include "sim/platform/sim_clock.h"
#include "sim/platform/streams.h"
#include "sim/core/timeline.h"
#include "sim/platform/transfer_planner.h"
#include "traces/attention_source.h"
#include "sim/platform/weight_stream.h"

namespace kvtier {

Simulation::~Simulation() = default;

Simulation::Simulation(json& cfg, ValidationCache* validating, std::shared_ptr<const ParsedHardware> hardware)
    : cfg_(cfg) {
  reset_footprint();  // this run's memory, committed part by part as it is built
  s_.hw = hardware ? hardware->hw : parse_hardware(cfg_["hardware"], "hardware");
  s_.topo = std::make_unique<Topology>(s_.hw);
  s_.model = parse_llm(cfg_["model"], "model");
  const json& w = cfg_["workload"];
  s_.batch = static_cast<uint32_t>(get_int(w, "batch"));
  s_.ctx = static_cast<uint32_t>(get_int(w, "context_tokens"));
  s_.steps = static_cast<uint32_t>(get_int(w, "decode_steps"));
  s_.bt = static_cast<uint32_t>(get_int(w, "block_tokens"));
  s_.warmup = static_cast<uint32_t>(get_int(w, "warmup_steps"));
  s_.tokens_unit = w["transfer_unit"] == "tokens";
  if (s_.warmup >= s_.steps)
    throw ConfigError("workload.warmup_steps: " + std::to_string(s_.warmup) + " leaves no measured step of " +
                      std::to_string(s_.steps) + " (workload.decode_steps)");
  s_.prefill_compute = w["prefill"] == "compute";
  s_.prefill_load = w["prefill"] == "load";
  s_.query_tokens = static_cast<uint32_t>(get_int(w, "query_tokens"));
  s_.overlap_next_load = w["overlap_next_load"].get<bool>();
  if (s_.overlap_next_load && !s_.prefill_load)
    throw ConfigError("workload.overlap_next_load: needs workload.prefill \"load\" (the next request's KV is loaded, not computed)");

  json& pol = cfg_["policies"];
  const json defaults = {{"eviction", "lru"},   {"promotion", "on_access"}, {"placement", "top"},
                         {"prefetch", "none"},  {"evaluation", "trace"},    {"compression", "none"},
                         {"weights", "gpu"}};
  s_.pol.create(pol, defaults);
  const auto weights = Registry<WeightPolicy>::instance().create(pol["weights"], "policies.weights");

  // The trace.
  const uint64_t seed = cfg_["sim"]["seed"].get<uint64_t>();
  json& tr = cfg_["workload"]["trace"];
  if (tr.value("kind", "") == "none" && pol["evaluation"]["name"] == "trace")
    throw ConfigError("workload.trace: kind \"none\" needs policies.evaluation other than \"trace\"");
  // Every kind (synthetic, patterns, any trace file, none) behind one factory.
  s_.trace = make_attention_source(tr, "workload.trace", s_.model.layers, s_.ctx, s_.steps, s_.bt, s_.batch, seed);
  if (s_.trace) s_.trace_name = source_name(*s_.trace);

  // Blocks and tiers.
  s_.bind_gpu();
  s_.bind_host_devices();
  if (pol["weights"]["name"] != "gpu") {
    std::vector<size_t> tiers;
    for (const auto& name : s_.hw.tiers) tiers.push_back(static_cast<size_t>(s_.hw.device_index(name)));
    install_weights(s_,
                    WeightStream::from_config(weights->plan(), s_.hw, s_.model, tiers, s_.gpu_dev, s_.cpu_dev, s_.batch,
                                              pol["compression"]["name"].get<std::string>()),
                    tiers.size());
  }
  kv_ = std::make_unique<KvStore>(s_, c_, validating);  // the block table and the tiers' capacity
  const BlockTable& t_ = kv_->table();

  if (s_.pol.eval->scoring()) AppScoring::bind(s_, t_, pol["evaluation"]["name"].get<std::string>());
  s_.pol.setup(t_);  // validating: on the table's shape, with no blocks
}
// KV read through the GPU (not kept in its tier) lands in staging buffers:
// the layer computing and the layers fetched ahead of it; prompt KV that
// prefill writes below stays in GPU memory until its write lands. Both take
// GPU memory beside the weights and the GPU tier's KV (at its peak), and must
// fit (prefill runs a layer for fewer sequences at a time to keep within it).
void Simulation::check_staging_fits() const {
  const double staging = std::max(c_.staging_peak_bytes, c_.prefill_staging_peak_bytes), total = c_.gpu_kv_and_staging_peak_bytes;
  if (staging <= 0 || total <= s_.gpu_free_bytes) return;
  auto gb = [](double b) { return std::to_string(b / 1e9); };
  throw ConfigError("hardware.devices." + s_.hw.gpu + ": the KV read or written through the GPU needs " +
                    gb(staging) + " GB of staging buffers at peak" +
                    (s_.gpu_tier ? ", " + gb(total) + " GB with the KV its tier held then," : std::string()) +
                    " but the GPU has " + gb(s_.gpu_free_bytes) + " GB after reserved_GB and the weights; expected the "
                    "staging buffers to fit (a smaller batch, a shallower prefetch, or a smaller GPU tier)");
}

json Simulation::run(const std::string& timeline_path) {
  start_simgrid();
  const bool check = invariants_requested();
  const BlockTable& t = kv_->table();
  platform_ = std::make_unique<Platform>(s_.hw, *s_.topo);
  // Every transfer moves whole blocks (or tokens of one): requests of one block.
  platform_->set_request_bytes(static_cast<double>(t.block_bytes));
  board_ = std::make_unique<JobBoard>();
  timeline_ = std::make_unique<Timeline>();
  if (!timeline_path.empty()) timeline_->open(timeline_path);
  const uint32_t gpu_track = timeline_->track(Timeline::Streams, s_.hw.gpu + " compute");
  for (auto& st : platform_->stats()) st.track = timeline_->track(Timeline::Links, st.name);
  kv_->open_occupancy(*timeline_);
  planner_ = std::make_unique<TransferPlanner>(s_, c_, *platform_, *board_, *timeline_);
  std::unique_ptr<InvariantChecker> checker;  // before any transfer is submitted: it counts them
  if (check) checker = std::make_unique<InvariantChecker>(s_, *kv_, *board_, *platform_);
  std::vector<std::pair<size_t, size_t>> scoring_pairs;
  if (s_.pol.eval->scoring()) AppScoring::configure(s_, *platform_, scoring_pairs);
  planner_->make_streams(scoring_pairs);
  planner_->start();
  kv_->start(*planner_);
  c_.hits.assign(s_.tiers() + 1, 0);
  pipeline_ = std::make_unique<LayerPipeline>(s_, c_, *kv_, *planner_, *platform_, *board_, *timeline_, gpu_track);

  if (check) pipeline_->check_with(checker.get());
  run_simulation(platform_->controller(), s_.hw.gpu + " compute", [this] { pipeline_->drive(); });
  const double end = sim_now();
  if (checker) checker->at_end();
  check_staging_fits();
  kv_->close_occupancy();
  timeline_->close();
  return engine_metrics(s_, c_, *kv_, *platform_, end);
}

}  // namespace kvtier
