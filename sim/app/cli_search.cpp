#include "sim/app/cli_search.h"

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/param.h"
#include "sim/app/process.h"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

struct SearchArgs {
  std::string file, out;
  unsigned trials = 0, jobs = 0;
  bool quiet = false;
  // Passed to each round's kvtier sweep.
  bool slurm = false;
  std::string partition, time;
  unsigned cpus_per_task = 0, array_max = 0, tasks = 0;
  double poll = 0;
};

// The --slurm options, as kvtier sweep takes them.
std::vector<std::string> sweep_args(const SearchArgs& a) {
  std::vector<std::string> s;
  if (!a.slurm) return s;
  s.push_back("--slurm");
  auto opt = [&s](const char* name, const std::string& v) {
    if (v.empty() || v == "0") return;
    s.push_back(name);
    s.push_back(v);
  };
  opt("--partition", a.partition);
  opt("--time", a.time);
  opt("--cpus-per-task", std::to_string(a.cpus_per_task));
  opt("--array-max", std::to_string(a.array_max));
  opt("--tasks", std::to_string(a.tasks));
  if (a.poll > 0) opt("--poll", std::to_string(a.poll));
  return s;
}

int run_search(const SearchArgs& a) {
  std::error_code ec;
  if (!fs::is_regular_file(a.file, ec)) throw ConfigError(a.file + ": no such search file");
  const std::string script = (fs::path(KVTIER_SOURCE_DIR) / "bench" / "search" / "kvtier_search.py").string();
  if (!fs::is_regular_file(script, ec)) throw ConfigError(script + ": the search driver is missing from the kvtier source tree");
  std::vector<std::string> args{script, "--kvtier", self_exe()};
  if (a.trials) args.insert(args.end(), {"--trials", std::to_string(a.trials)});
  if (a.jobs) args.insert(args.end(), {"--jobs", std::to_string(a.jobs)});
  if (!a.out.empty()) args.insert(args.end(), {"--out", a.out});
  if (a.quiet) args.push_back("-q");
  args.push_back(a.file);  // then what each round's kvtier sweep takes
  const std::vector<std::string> sw = sweep_args(a);
  if (!sw.empty()) {
    args.push_back("--");
    args.insert(args.end(), sw.begin(), sw.end());
  }
  return run_python(args, "kvtier: error: search: cannot run python3 (Debian: apt install python3-optuna python3-matplotlib)\n");
}

}  // namespace

std::function<int()> add_search_command(CLI::App& app) {
  auto a = std::make_shared<SearchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "search", "the best configuration of a space under constraints for a budget of runs, by Optuna (docs/sweep.md)");
  cmd->add_option("search", a->file, "search JSON (e.g. configs/searches/hillinfer_alpha_beta_depth.json)")->required();
  cmd->add_option("--trials", a->trials, "the budget of trials (default: the file's trials)")->check(CLI::Range(1u, 100000u));
  cmd->add_option("--jobs,-j", a->jobs, "trials run at once, and per round (default: the file's batch, else the CPUs)")
      ->check(CLI::Range(1u, 4096u));
  cmd->add_option("--out", a->out, "output folder (default out/<search name>)");
  cmd->add_flag("--quiet,-q", a->quiet, "print nothing on success");
  const char* slurm = "Slurm: each round of trials as a job array (docs/sweep.md)";
  cmd->add_flag("--slurm", a->slurm, "run each round's trials on Slurm")->group(slurm);
  cmd->add_option("--partition", a->partition, "sbatch --partition")->group(slurm);
  cmd->add_option("--time", a->time, "sbatch --time")->group(slurm);
  cmd->add_option("--cpus-per-task", a->cpus_per_task, "sbatch --cpus-per-task")->check(CLI::Range(1u, 4096u))->group(slurm);
  cmd->add_option("--array-max", a->array_max, "tasks running at once")->check(CLI::Range(1u, 100000u))->group(slurm);
  cmd->add_option("--tasks", a->tasks, "shards per round")->check(CLI::Range(1u, 1000u))->group(slurm);
  cmd->add_option("--poll", a->poll, "seconds between looks at a job")->check(CLI::Range(0.05, 3600.0))->group(slurm);
  return [a, cmd]() { return *cmd ? run_search(*a) : -1; };
}

}  // namespace kvtier
