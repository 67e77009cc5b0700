#include "sim/app/run.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <type_traits>

#include "sim/cluster/cluster.h"
#include "sim/core/config.h"
#include "sim/core/event_budget.h"
#include "sim/core/footprint.h"
#include "sim/core/progress.h"
#include "sim/core/result.h"
#include "sim/engine/engine.h"
#include "sim/serving/serving.h"
#include "traces/synthetic.h"

namespace fs = std::filesystem;

namespace kvtier {

EngineKind engine_kind(const json& cfg) {
  if (!cfg.is_object()) return EngineKind::single_batch;
  if (cfg.contains("cluster")) {
    if (!cfg.contains("serving"))
      throw ConfigError("cluster: a cluster serves a request stream; the config needs a \"serving\" section");
    return EngineKind::cluster;
  }
  return cfg.contains("serving") ? EngineKind::serving : EngineKind::single_batch;
}

namespace {
// The single-batch engine's GPU kernels (sim/core/event_budget.h): each
// decode step runs one per layer and GPU batch (policies.weights.gpu_batches),
// prefill at most one per layer and sequence (its chunks), and a prefill that
// loads stored KV one query kernel per layer.
void commit_single_batch_events(const json& cfg) {
  const double layers = cfg["model"]["layers"].get<double>();
  const json& w = cfg["workload"];
  double gpu_batches = 1;
  const json::json_pointer gb("/policies/weights/gpu_batches");
  if (cfg.contains(gb) && cfg[gb].is_number()) gpu_batches = std::max(1.0, cfg[gb].get<double>());
  const double steps = w["decode_steps"].get<double>(), batch = w["batch"].get<double>();
  commit_events({cfg["model"]["layers"].dump() + " layers x (" + w["decode_steps"].dump() + " decode steps x " +
                     std::to_string(static_cast<uint64_t>(gpu_batches)) + " GPU batches + " + w["batch"].dump() +
                     " prefill chunks + 1)",
                 "workload.decode_steps, model.layers", layers * (steps * gpu_batches + batch + 1),
                 layers * steps * gpu_batches});
}
}  // namespace

void resolve_config(json& cfg) {
  switch (engine_kind(cfg)) {
    case EngineKind::cluster: { ClusterSimulation sim(cfg); break; }
    case EngineKind::serving: { ServingSimulation sim(cfg); break; }
    case EngineKind::single_batch: { Simulation sim(cfg); commit_single_batch_events(cfg); break; }
  }
}

void validate_config(json& cfg, ValidationCache& cache, std::shared_ptr<const ParsedHardware> hardware) {
  switch (engine_kind(cfg)) {
    // A cluster's instances each parse the hardware with their own GPU and tiers.
    case EngineKind::cluster: { ClusterSimulation sim(cfg); break; }
    case EngineKind::serving: { ServingSimulation sim(cfg, &cache, std::move(hardware)); break; }
    case EngineKind::single_batch: {
      Simulation sim(cfg, &cache, std::move(hardware));
      commit_single_batch_events(cfg);
      break;
    }
  }
}

std::string out_dir_for(const json& cfg) {
  std::string d = cfg["sim"]["out_dir"].get<std::string>();
  return d.empty() ? (fs::path("out") / cfg["name"].get<std::string>()).string() : d;
}

namespace {

// What the two engines' runs write and print besides result.json.

bool writes_steps_csv(const Simulation&, const json& cfg) { return cfg["sim"]["step_csv"].get<bool>(); }
bool writes_steps_csv(const ServingSimulation&, const json&) { return false; }
bool writes_steps_csv(const ClusterSimulation&, const json&) { return false; }
bool writes_iterations_csv(const ClusterSimulation&, const json&) { return false; }
bool writes_iterations_csv(const Simulation&, const json&) { return false; }
bool writes_iterations_csv(const ServingSimulation&, const json& cfg) { return cfg["sim"]["step_csv"].get<bool>(); }

// steps.csv beside result.json, when asked for.
void write_extra(const Simulation& sim, const json& cfg, const std::string& dir, StagedOutputs& outputs) {
  if (cfg["sim"]["step_csv"].get<bool>())
    outputs.write((fs::path(dir) / "steps.csv").string(), steps_csv(sim.decode_start(), sim.step_ends()), "--out");
}
// requests.csv and iterations.csv beside result.json, when asked for.
void write_extra(const ServingSimulation& sim, const json& cfg, const std::string& dir, StagedOutputs& outputs) {
  if (cfg["serving"]["request_csv"].get<bool>())
    outputs.write((fs::path(dir) / "requests.csv").string(), sim.requests_csv(), "--out");
  if (cfg["sim"]["step_csv"].get<bool>())
    outputs.write((fs::path(dir) / "iterations.csv").string(), sim.iterations_csv(), "--out");
}

// requests.csv, with the instance of each request.
void write_extra(const ClusterSimulation& sim, const json& cfg, const std::string& dir, StagedOutputs& outputs) {
  if (cfg["serving"]["request_csv"].get<bool>())
    outputs.write((fs::path(dir) / "requests.csv").string(), sim.requests_csv(), "--out");
}

void print_summary(const Simulation&, const json& cfg, const json& metrics) {
  std::cout << "kvtier: " << cfg["name"].get<std::string>() << ": " << metrics["decode_tokens_per_s"].get<double>()
            << " tokens/s, TPOT " << metrics["mean_step_latency_s"].get<double>() * 1e3 << " ms, TTFT "
            << metrics["ttft_s"].get<double>() << " s";
  // Attention recall needs a trace (workload.trace kind none has none).
  if (metrics.contains("attention_recall")) std::cout << ", attention recall " << metrics["attention_recall"].get<double>();
  std::cout << ", simulated " << metrics["simulated_time_s"].get<double>() << " s\n";
}
void print_summary(const ServingSimulation&, const json& cfg, const json& metrics) {
  std::cout << "kvtier: " << cfg["name"].get<std::string>() << ": " << metrics["requests"].get<uint64_t>()
            << " requests, " << metrics["throughput_tokens_per_s"].get<double>() << " tokens/s, TTFT p50 "
            << metrics["ttft_s"]["p50"].get<double>() << " s, TPOT p50 " << metrics["tpot_s"]["p50"].get<double>() * 1e3
            << " ms, " << metrics["preemptions"].get<uint64_t>() << " preemptions, simulated "
            << metrics["simulated_time_s"].get<double>() << " s\n";
}

void print_summary(const ClusterSimulation&, const json& cfg, const json& metrics) {
  std::cout << "kvtier: " << cfg["name"].get<std::string>() << ": " << metrics["instances"].size() << " instances, "
            << metrics["requests"].get<uint64_t>() << " requests, " << metrics["throughput_tokens_per_s"].get<double>()
            << " tokens/s, TTFT p50 " << metrics["ttft_s"]["p50"].get<double>() << " s, TPOT p50 "
            << metrics["tpot_s"]["p50"].get<double>() * 1e3 << " ms, simulated "
            << metrics["simulated_time_s"].get<double>() << " s\n";
}

// Runs a loaded config on `Engine`. Every output is staged and renamed into
// place only when all of them are written, result.json last; a failure (or
// SIGINT/SIGTERM) leaves nothing.
template <class Engine>
int run_on(json& cfg, bool quiet) {
  Engine sim(cfg);  // validates everything before anything runs or is written
  if constexpr (std::is_same_v<Engine, Simulation>) commit_single_batch_events(cfg);
  const std::string dir = out_dir_for(cfg);
  const std::string tl = cfg["sim"]["timeline"].get<std::string>();
  // --out, --timeline problems before the run
  check_run_outputs(dir, tl, writes_steps_csv(sim, cfg), writes_iterations_csv(sim, cfg));
  StagedOutputs outputs;
  const std::string tl_stage = tl.empty() ? std::string() : outputs.stage(tl, "--timeline");
  json metrics = sim.run(tl_stage);
  write_extra(sim, cfg, dir, outputs);
  const std::string result = (fs::path(dir) / "result.json").string();
  json r = make_result(cfg, metrics);
  r["resources"] = footprint_json();
  add_events_json(r["resources"]);
  outputs.write(result, r.dump(2) + "\n", "--out");
  outputs.commit();
  if (!quiet) {
    print_summary(sim, cfg, metrics);
    std::cout << "kvtier: wrote " << result << "\n";
  }
  return 0;
}

}  // namespace

int cmd_run(const RunOptions& o) {
  // Progress of a long run where someone watches: stderr a terminal, no -q.
  Progress::enable(!o.quiet && isatty(STDERR_FILENO));
  if (!o.max_memory.empty()) set_memory_limit(parse_memory_size(o.max_memory, "--max-memory"));
  if (!o.max_events.empty()) set_event_limit(parse_event_count(o.max_events, "--max-events"));
  json cfg = load_config(o.config, o.sets);
  if (!o.seed.empty()) cfg["sim"]["seed"] = parse_seed(o.seed.front(), "--seed");
  if (!o.out.empty()) cfg["sim"]["out_dir"] = o.out;
  if (!o.timeline.empty()) cfg["sim"]["timeline"] = o.timeline;
  switch (engine_kind(cfg)) {
    case EngineKind::cluster: return run_on<ClusterSimulation>(cfg, o.quiet);
    case EngineKind::serving: return run_on<ServingSimulation>(cfg, o.quiet);
    case EngineKind::single_batch: break;
  }
  return run_on<Simulation>(cfg, o.quiet);
}

int cmd_config(const std::string& config, const std::vector<std::string>& sets) {
  json cfg = load_config(config, sets);
  resolve_config(cfg);  // resolved and validated by the engine that would run it
  std::cout << cfg.dump(2) << "\n";
  return 0;
}

int cmd_trace_gen(const std::string& config, const std::vector<std::string>& sets, const std::string& out) {
  json cfg = load_config(config, sets);
  LlmSpec m = parse_llm(cfg["model"], "model");
  const json& w = cfg["workload"];
  json tr = w["trace"];
  if (tr.value("kind", "") != "synthetic")
    throw ConfigError("workload.trace.kind: `trace gen` writes the synthetic generator's trace; this config's is " +
                      tr.value("kind", json()).dump());
  SyntheticAttention gen(tr, "workload.trace", m.layers, w["context_tokens"].get<uint32_t>(),
                         w["decode_steps"].get<uint32_t>(), w["block_tokens"].get<uint32_t>(),
                         cfg["sim"]["seed"].get<uint64_t>());
  AttentionHeader h = gen.header();
  h.model = cfg["model"];
  std::error_code ec;
  if (fs::is_directory(out, ec)) throw ConfigError("--out " + out + ": is a folder, expected a file name");
  StagedOutputs staged;  // nothing partial is left on an error or a signal
  JsonlAttentionWriter writer(staged.stage(out, "--out"), h);
  AttentionRecord rec;
  uint64_t n = 0;
  Progress::enable(isatty(STDERR_FILENO));
  Progress progress("trace", double(h.steps) * h.layers * std::max<uint32_t>(1, h.sequences), "records");
  while (gen.next(rec)) {
    writer.write(rec);
    progress.update(double(++n));
  }
  progress.finish();
  writer.close();
  staged.commit();
  std::cout << "kvtier: wrote " << n << " records to " << out << "\n";
  return 0;
}

}  // namespace kvtier
