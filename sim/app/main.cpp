// The kvtier command line.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include "models/device.h"
#include "models/power/device_price.h"
#include "models/power/power_model.h"
#include "policies/router.h"
#include "policies/policy.h"
#include "policies/weights.h"
#include "sim/app/cli_replay.h"
#include "sim/app/cli_trace.h"
#include "sim/app/cli_report.h"
#include "sim/app/cli_search.h"
#include "sim/app/cli_validate.h"
#include "sim/app/run.h"
#include "sim/app/sweep.h"
#include "sim/core/checks.h"
#include "sim/core/config.h"

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

void list(const std::string& what) {
  bool all = what == "all";
  if (all || what == "policies") {
    list_family<EvictionPolicy>("eviction policies");
    list_family<PromotionPolicy>("promotion policies");
    list_family<PlacementPolicy>("placement policies");
    list_family<PrefetchPolicy>("prefetch policies");
    list_family<EvaluationPolicy>("evaluation policies");
    list_family<CompressionPolicy>("compression policies");
    list_family<WeightPolicy>("weight policies");
    list_family<RouterPolicy>("routers (cluster.router)");
  }
  if (all || what == "devices") {
    list_family<DeviceModel>("device kinds");
    list_family<PowerModel>("power models (a device's \"power\" object, by its kind)");
    std::cout << "device price (a device's \"price\" object):\n" << describe(device_price_params(), "      ");
  }
  if (all || what == "hardware") list_presets("configs/hardware", "hardware presets");
  if (all || what == "models") list_presets("configs/models", "model presets");
  if (all || what == "systems") list_presets("configs/systems", "system presets");
}

// Every subcommand with its options; each add_* registers one.
struct Commands {
  RunOptions run_opt;
  bool check_invariants = false;
  CLI::App* run = nullptr;

  CLI::App* trace = nullptr;
  std::string gen_config = "configs/default.json", gen_out = "trace.jsonl";
  std::vector<std::string> gen_sets;
  CLI::App* gen = nullptr;
  std::shared_ptr<TraceCommands> trace_cmds;
  std::function<int()> request_cmds, report_cmd, validate_cmd, search_cmd;

  std::string what = "all";
  CLI::App* list = nullptr;

  SweepOptions sweep_opt;
  std::string shard;
  CLI::App* sweep = nullptr;

  std::string show_config;
  std::vector<std::string> show_sets;
  CLI::App* show = nullptr;
};

void add_run(CLI::App& app, Commands& c) {
  RunOptions& o = c.run_opt;
  c.run = app.add_subcommand("run", "simulate a configuration and write result.json");
  c.run->add_option("config", o.config, "configuration JSON (e.g. configs/default.json)")->required();
  c.run->add_option("--set", o.sets, "override a config value: PATH=VALUE, e.g. workload.batch=4 (repeatable)");
  c.run->add_option("--out", o.out, "output directory (default out/<config name>)");
  c.run->add_option("--timeline", o.timeline, "write a Chrome trace-event timeline to this file");
  c.run->add_option("--seed", o.seed, "seed (overrides sim.seed)")->expected(1);
  c.run->add_flag("--quiet,-q", o.quiet, "print nothing on success");
  c.run->add_option("--max-memory", o.max_memory,
                    "refuse a run whose estimated memory exceeds this (e.g. 4G, 512M; default: the machine's "
                    "available memory less a tenth)");
  c.run->add_option("--max-events", o.max_events,
                    "refuse a run whose estimated events (GPU kernels) exceed this, and stop one that passes it "
                    "(e.g. 1e9; default 1e8)");
  c.run->add_flag("--check-invariants", c.check_invariants,
                  "check the engine's invariants while it runs (capacities, block states, data on the GPU before "
                  "attention, link bytes); a violation stops the run");
}

void add_trace(CLI::App& app, Commands& c) {
  c.trace = app.add_subcommand("trace", "attention and request traces");
  c.trace->require_subcommand(1);
  c.gen = c.trace->add_subcommand("gen", "write the synthetic trace of a config (format v1, docs/formats.md)");
  c.gen->add_option("--config", c.gen_config, "configuration whose model, workload and seed shape the trace")
      ->capture_default_str();
  c.gen->add_option("--set", c.gen_sets, "override a config value: PATH=VALUE (repeatable)");
  c.gen->add_option("--out", c.gen_out, "output file")->capture_default_str();
  c.trace_cmds = add_trace_commands(*c.trace);
  c.request_cmds = add_request_trace_commands(app, *c.trace);
}

void add_list(CLI::App& app, Commands& c) {
  c.list = app.add_subcommand("list", "list policies, device kinds and presets with their parameters");
  c.list->add_option("what", c.what, "policies | devices | hardware | models | systems | all")
      ->check(CLI::IsMember({"policies", "devices", "hardware", "models", "systems", "all"}));
}

void add_sweep(CLI::App& app, Commands& c) {
  SweepOptions& o = c.sweep_opt;
  c.sweep = app.add_subcommand(
      "sweep", "run every point of a sweep file, one process per point, into a JSON-lines file (docs/sweep.md)");
  c.sweep->add_option("sweep", o.file, "sweep JSON (e.g. configs/sweeps/prefetch_depth.json)")->required();
  c.sweep->add_option("--jobs,-j", o.jobs, "points run at once (default: the number of CPUs)")
      ->check(CLI::Range(1u, 4096u));
  c.sweep->add_option("--shard", c.shard, "run only the points with index % N == I (0-based), e.g. 0/4");
  c.sweep->add_option("--out", o.out,
                      "JSON-lines output, appended to (default out/<sweep name>/sweep.jsonl; with --shard "
                      "sweep.I-of-N.jsonl)");
  c.sweep->add_option("--set", o.sets, "override a config value in every point: PATH=VALUE (repeatable)");
  c.sweep->add_flag("--quiet,-q", o.quiet, "no progress on stderr and no summary on stdout");
  c.sweep->add_flag("--dry-run", o.dry_run,
                    "validate every point and say what would run (with --slurm: print the job script); run nothing");
  SlurmOptions& s = o.slurm;
  const char* slurm = "Slurm (docs/sweep.md)";
  c.sweep->add_flag("--slurm", s.on, "run the points as a Slurm job array over shards, follow it and merge the results")
      ->group(slurm);
  c.sweep->add_option("--partition", s.partition, "sbatch --partition")->group(slurm);
  c.sweep->add_option("--time", s.time, "sbatch --time: each task's limit, e.g. 2:00:00")->group(slurm);
  c.sweep->add_option("--cpus-per-task", s.cpus_per_task, "sbatch --cpus-per-task: points each task runs at once")
      ->check(CLI::Range(1u, 4096u))
      ->group(slurm);
  c.sweep->add_option("--array-max", s.array_max, "at most this many tasks running at once (--array=...%M)")
      ->check(CLI::Range(1u, 100000u))
      ->group(slurm);
  c.sweep->add_option("--tasks", s.tasks, "shards, one array task each (default: min(points, 100); kept on re-runs)")
      ->check(CLI::Range(1u, 1000u))
      ->group(slurm);
  c.sweep->add_option("--poll", s.poll_s, "seconds between looks at the job while following it")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str()
      ->group(slurm);
}

void add_config(CLI::App& app, Commands& c) {
  c.show = app.add_subcommand("config", "print the fully resolved configuration");
  c.show->add_option("config", c.show_config, "configuration JSON")->required();
  c.show->add_option("--set", c.show_sets, "override a config value: PATH=VALUE (repeatable)");
}

// The parsed subcommand, run; its exit status.
int dispatch(Commands& c) {
  if (int rc = c.validate_cmd(); rc >= 0) return rc;
  if (*c.run) {
    if (c.check_invariants) request_invariants();
    return cmd_run(c.run_opt);
  }
  if (*c.gen) return cmd_trace_gen(c.gen_config, c.gen_sets, c.gen_out);
  if (int rc = 0; run_trace_commands(*c.trace_cmds, rc)) return rc;
  if (int rc = c.request_cmds(); rc >= 0) return rc;
  if (int rc = c.report_cmd(); rc >= 0) return rc;
  if (int rc = c.search_cmd(); rc >= 0) return rc;
  if (*c.sweep) {
    if (!c.shard.empty()) parse_shard(c.shard, c.sweep_opt.shard, c.sweep_opt.shards);
    return run_sweep(c.sweep_opt);
  }
  if (*c.show) return cmd_config(c.show_config, c.show_sets);
  if (*c.list) list(c.what);
  return 0;
}

// An unknown first word, named with the commands there are; false if it is one.
bool unknown_command(CLI::App& app, const char* word) {
  if (word[0] == '-') return false;
  std::string names;
  bool known = false;
  for (CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) {
    known = known || c->get_name() == word;
    names += (names.empty() ? "" : ", ") + c->get_name();
  }
  if (!known)
    std::cerr << "kvtier: error: unknown command '" << one_line(word) << "'; commands: " << names << " (see kvtier --help)\n";
  return !known;
}

// Parses the command line; -1 when parsed, else the exit status.
int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "kvtier: error: " << one_line(e.what()) << " (see kvtier --help)\n";
    return kBadInput;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtier: trace-driven simulation of tiered KV-cache memory for LLM inference"};
  app.name("kvtier");
  app.require_subcommand(1);
  app.set_version_flag("--version", KVTIER_VERSION);

  Commands c;
  add_run(app, c);
  add_trace(app, c);
  add_list(app, c);
  add_sweep(app, c);
  c.report_cmd = add_report_command(app);
  c.search_cmd = add_search_command(app);
  c.validate_cmd = add_validate_command(app);
  add_config(app, c);

  if (std::string dup = registry_duplicates<EvictionPolicy, PromotionPolicy, PlacementPolicy, PrefetchPolicy,
                                               EvaluationPolicy, CompressionPolicy, WeightPolicy, RouterPolicy, DeviceModel,
                                               PowerModel>();
      !dup.empty()) {
    std::cerr << "kvtier: error: " << dup << " (each name must be unique in its family)\n";
    return 1;
  }
  if (argc < 2) {  // `kvtier` alone: what it can do
    std::cout << app.help();
    return 0;
  }
  if (unknown_command(app, argv[1])) return kBadInput;
  if (int rc = parse(app, argc, argv); rc >= 0) return rc;

  try {
    return dispatch(c);
  } catch (const ConfigError& e) {
    std::cerr << "kvtier: error: " << one_line(plain_numbers(e.what())) << "\n";
    return kBadInput;
  } catch (const std::exception& e) {
    std::cerr << "kvtier: internal error: " << one_line(e.what()) << "\n";
    return 1;
  }
}
