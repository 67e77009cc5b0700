// The kvtier command line.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "models/device.h"
#include "policies/policy.h"
#include "policies/weights.h"
#include "sim/app/cli_replay.h"
#include "sim/app/cli_trace.h"
#include "sim/app/cli_report.h"
#include "sim/app/cli_validate.h"
#include "sim/core/config.h"
#include "sim/engine/engine.h"
#include "sim/engine/invariants.h"
#include "sim/serving/serving.h"
#include "sim/core/result.h"
#include "sim/app/sweep.h"
#include "traces/synthetic.h"

namespace fs = std::filesystem;
using namespace kvtier;

namespace {

constexpr int kBadInput = 2;

template <class Base>
void list_family(const char* title) {
  std::cout << title << ":\n";
  for (const auto& [name, e] : Registry<Base>::instance().entries()) {
    std::cout << "  " << name << ": " << e.doc << "\n" << describe(e.params, "      ");
  }
}

void list_presets(const char* folder, const char* title) {
  std::cout << title << " (" << folder << "):\n";
  fs::path dir = fs::path(KVTIER_SOURCE_DIR) / folder;
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string what;
    try {
      json j = load_json_file(f.string());
      what = j.value("description", j.value("name", ""));
    } catch (const ConfigError& e) {
      what = std::string("(invalid: ") + e.what() + ")";
    }
    std::cout << "  " << (fs::path(folder) / f.filename()).string() << ": " << what << "\n";
  }
}

std::string out_dir_for(const json& cfg) {
  std::string d = cfg["sim"]["out_dir"].get<std::string>();
  return d.empty() ? (fs::path("out") / cfg["name"].get<std::string>()).string() : d;
}

// A serving config (a "serving" section): requests through the serving
// engine; requests.csv beside result.json.
int cmd_serve(json& cfg, bool quiet) {
  ServingSimulation sim(cfg);  // validates everything before anything runs or is written
  const std::string dir = out_dir_for(cfg);
  const std::string tl = cfg["sim"]["timeline"].get<std::string>();
  check_run_outputs(dir, tl);
  StagedOutputs outputs;
  const std::string tl_stage = tl.empty() ? std::string() : outputs.stage(tl, "--timeline");
  json metrics = sim.run(tl_stage);
  if (cfg["serving"]["request_csv"].get<bool>())
    outputs.write((fs::path(dir) / "requests.csv").string(), sim.requests_csv(), "--out");
  outputs.write((fs::path(dir) / "result.json").string(), make_result(cfg, metrics).dump(2) + "\n", "--out");
  outputs.commit();
  if (!quiet)
    std::cout << "kvtier: " << cfg["name"].get<std::string>() << ": " << metrics["requests"].get<uint64_t>()
              << " requests, " << metrics["throughput_tokens_per_s"].get<double>() << " tokens/s, TTFT p50 "
              << metrics["ttft_s"]["p50"].get<double>() << " s, TPOT p50 " << metrics["tpot_s"]["p50"].get<double>() * 1e3
              << " ms, " << metrics["preemptions"].get<uint64_t>() << " preemptions, simulated "
              << metrics["simulated_time_s"].get<double>() << " s\n"
              << "kvtier: wrote " << (fs::path(dir) / "result.json").string() << "\n";
  return 0;
}

int cmd_run(const std::string& config, const std::vector<std::string>& sets, const std::string& out,
            const std::string& timeline, const std::vector<std::string>& seed, bool quiet) {
  json cfg = load_config(config, sets);
  if (!seed.empty()) cfg["sim"]["seed"] = parse_seed(seed.front(), "--seed");
  if (!out.empty()) cfg["sim"]["out_dir"] = out;
  if (!timeline.empty()) cfg["sim"]["timeline"] = timeline;
  if (cfg.contains("serving")) return cmd_serve(cfg, quiet);
  Simulation sim(cfg);  // validates everything before anything runs or is written
  const std::string dir = out_dir_for(cfg);
  const std::string tl = cfg["sim"]["timeline"].get<std::string>();
  check_run_outputs(dir, tl, cfg["sim"]["step_csv"].get<bool>());  // --out, --timeline problems before the run
  // Every output is staged and renamed into place only when all of them are
  // written, result.json last; a failure (or SIGINT/SIGTERM) leaves nothing.
  StagedOutputs outputs;
  const std::string tl_stage = tl.empty() ? std::string() : outputs.stage(tl, "--timeline");
  json metrics = sim.run(tl_stage);
  if (cfg["sim"]["step_csv"].get<bool>())
    outputs.write((fs::path(dir) / "steps.csv").string(), steps_csv(sim.decode_start(), sim.step_ends()), "--out");
  outputs.write((fs::path(dir) / "result.json").string(), make_result(cfg, metrics).dump(2) + "\n", "--out");
  outputs.commit();
  if (!quiet) {
    std::cout << "kvtier: " << cfg["name"].get<std::string>() << ": " << metrics["decode_tokens_per_s"].get<double>()
              << " tokens/s, TPOT " << metrics["mean_step_latency_s"].get<double>() * 1e3 << " ms, TTFT "
              << metrics["ttft_s"].get<double>() << " s";
    // Attention recall needs a trace (workload.trace kind none has none).
    if (metrics.contains("attention_recall")) std::cout << ", attention recall " << metrics["attention_recall"].get<double>();
    std::cout << ", simulated " << metrics["simulated_time_s"].get<double>() << " s\n"
              << "kvtier: wrote " << (fs::path(dir) / "result.json").string() << "\n";
  }
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
  JsonlAttentionWriter writer(out, h);
  AttentionRecord rec;
  uint64_t n = 0;
  while (gen.next(rec)) {
    writer.write(rec);
    ++n;
  }
  writer.close();
  std::cout << "kvtier: wrote " << n << " records to " << out << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtier: trace-driven simulation of tiered KV-cache memory for LLM inference"};
  app.name("kvtier");
  app.require_subcommand(1);
  app.set_version_flag("--version", KVTIER_VERSION);

  std::string config, out, timeline;
  std::vector<std::string> sets;
  std::vector<std::string> seed;
  bool quiet = false;
  auto* run = app.add_subcommand("run", "simulate a configuration and write result.json");
  run->add_option("config", config, "configuration JSON (e.g. configs/default.json)")->required();
  run->add_option("--set", sets, "override a config value: PATH=VALUE, e.g. workload.batch=4 (repeatable)");
  run->add_option("--out", out, "output directory (default out/<config name>)");
  run->add_option("--timeline", timeline, "write a Chrome trace-event timeline to this file");
  run->add_option("--seed", seed, "seed (overrides sim.seed)")->expected(1);
  run->add_flag("--quiet,-q", quiet, "print nothing on success");
  bool check_invariants = false;
  run->add_flag("--check-invariants", check_invariants,
                "check the engine's invariants while it runs (capacities, block states, data on the GPU before "
                "attention, link bytes); a violation stops the run");

  auto* trace = app.add_subcommand("trace", "attention and request traces");
  trace->require_subcommand(1);
  std::string gen_config = "configs/default.json", gen_out = "trace.jsonl";
  std::vector<std::string> gen_sets;
  auto* gen = trace->add_subcommand("gen", "write the synthetic trace of a config (format v1, docs/formats.md)");
  gen->add_option("--config", gen_config, "configuration whose model, workload and seed shape the trace")
      ->capture_default_str();
  gen->add_option("--set", gen_sets, "override a config value: PATH=VALUE (repeatable)");
  gen->add_option("--out", gen_out, "output file")->capture_default_str();
  auto trace_cmds = add_trace_commands(*trace);
  auto request_cmds = add_request_trace_commands(app, *trace);

  std::string what = "all";
  auto* list = app.add_subcommand("list", "list policies, device kinds and presets with their parameters");
  list->add_option("what", what, "policies | devices | hardware | models | systems | all")
      ->check(CLI::IsMember({"policies", "devices", "hardware", "models", "systems", "all"}));

  SweepOptions sweep_opt;
  std::string shard;
  auto* sweep = app.add_subcommand(
      "sweep", "run every point of a sweep file, one process per point, into a JSON-lines file (docs/sweep.md)");
  sweep->add_option("sweep", sweep_opt.file, "sweep JSON (e.g. configs/sweeps/prefetch_depth.json)")->required();
  sweep->add_option("--jobs,-j", sweep_opt.jobs, "points run at once (default: the number of CPUs)")
      ->check(CLI::Range(1u, 4096u));
  sweep->add_option("--shard", shard, "run only the points with index % N == I (0-based), e.g. 0/4");
  sweep->add_option("--out", sweep_opt.out,
                    "JSON-lines output, appended to (default out/<sweep name>/sweep.jsonl; with --shard "
                    "sweep.I-of-N.jsonl)");
  sweep->add_option("--set", sweep_opt.sets, "override a config value in every point: PATH=VALUE (repeatable)");
  sweep->add_flag("--quiet,-q", sweep_opt.quiet, "no progress on stderr and no summary on stdout");

  auto report_cmd = add_report_command(app);

  auto validate_cmd = add_validate_command(app);

  auto* show = app.add_subcommand("config", "print the fully resolved configuration");
  show->add_option("config", config, "configuration JSON")->required();
  show->add_option("--set", sets, "override a config value: PATH=VALUE (repeatable)");

  if (std::string dup = registry_duplicates<EvictionPolicy, PromotionPolicy, PlacementPolicy, PrefetchPolicy,
                                               EvaluationPolicy, CompressionPolicy, WeightPolicy, DeviceModel>();
      !dup.empty()) {
    std::cerr << "kvtier: error: " << dup << " (each name must be unique in its family)\n";
    return 1;
  }
  if (argc < 2) {  // `kvtier` alone: what it can do
    std::cout << app.help();
    return 0;
  }
  if (argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) {
      known = known || c->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + c->get_name();
    }
    if (!known) {
      std::cerr << "kvtier: error: unknown command '" << argv[1] << "'; commands: " << names << " (see kvtier --help)\n";
      return kBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "kvtier: error: " << e.what() << " (see kvtier --help)\n";
    return kBadInput;
  }

  try {
    if (int rc = validate_cmd(); rc >= 0) return rc;
    if (*run) {
      if (check_invariants) request_invariants();
      return cmd_run(config, sets, out, timeline, seed, quiet);
    }
    if (*gen) return cmd_trace_gen(gen_config, gen_sets, gen_out);
    if (int rc = 0; run_trace_commands(*trace_cmds, rc)) return rc;
    if (int rc = request_cmds(); rc >= 0) return rc;
    if (int rc = report_cmd(); rc >= 0) return rc;
    if (*sweep) {
      if (!shard.empty()) parse_shard(shard, sweep_opt.shard, sweep_opt.shards);
      return run_sweep(sweep_opt);
    }
    if (*show) {
      json cfg = load_config(config, sets);
      // Resolved (and validated) by the engine that would run it.
      if (cfg.contains("serving")) ServingSimulation sim(cfg);
      else Simulation sim(cfg);
      std::cout << cfg.dump(2) << "\n";
      return 0;
    }
    if (*list) {
      bool all = what == "all";
      if (all || what == "policies") {
        list_family<EvictionPolicy>("eviction policies");
        list_family<PromotionPolicy>("promotion policies");
        list_family<PlacementPolicy>("placement policies");
        list_family<PrefetchPolicy>("prefetch policies");
        list_family<EvaluationPolicy>("evaluation policies");
        list_family<CompressionPolicy>("compression policies");
        list_family<WeightPolicy>("weight policies");
      }
      if (all || what == "devices") list_family<DeviceModel>("device kinds");
      if (all || what == "hardware") list_presets("configs/hardware", "hardware presets");
      if (all || what == "models") list_presets("configs/models", "model presets");
      if (all || what == "systems") list_presets("configs/systems", "system presets");
      return 0;
    }
  } catch (const ConfigError& e) {
    std::cerr << "kvtier: error: " << plain_numbers(e.what()) << "\n";
    return kBadInput;
  } catch (const std::exception& e) {
    std::cerr << "kvtier: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
