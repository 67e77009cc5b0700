// Parameter sweeps: `kvtier sweep SWEEP.json`. The sweep file is read,
// expanded and every point validated first (sweep_file.h), then each point
// runs as its own `kvtier run` child process, because SimGrid allows one
// simulation per process; the engine each point runs on (single-batch or
// serving) is the one `kvtier run` picks for it (run.h). Results are
// appended to a JSON-lines file, one line per point, keyed by a hash of the
// point's fully resolved configuration, so a re-run skips what is done and
// shards of one sweep merge by concatenation (docs/sweep.md).
#pragma once

#include <string>
#include <vector>

#include "sim/app/sweep_file.h"

namespace kvtier {

// `--slurm`: the points run as a Slurm job array over shards (sweep_slurm.h).
struct SlurmOptions {
  bool on = false;
  std::string partition, time;      // sbatch --partition, --time ("" = the cluster's default)
  unsigned cpus_per_task = 1;       // sbatch --cpus-per-task; each task runs that many points at once
  unsigned array_max = 0;           // at most this many tasks at once (--array=...%M); 0 = no limit
  unsigned tasks = 0;               // shards, one array task each; 0 = min(points, 100)
  double poll_s = 5;                // how often the job is looked at while followed
};

struct SweepOptions {
  std::string file;                 // the sweep JSON
  unsigned jobs = 0;                // points at once; 0 = the CPUs this process may use
  unsigned shard = 0, shards = 1;   // run the points with index % shards == shard
  std::string out;                  // JSON-lines file; "" = out/<sweep name>/sweep.jsonl
  std::vector<std::string> sets;    // fixed overrides from the command line (after the file's "set")
  bool quiet = false;               // no progress on stderr, no summary on stdout
  bool dry_run = false;             // validate every point and say what would run; run nothing
  SlurmOptions slurm;
};

// "I/N" with 0 <= I < N; throws ConfigError naming --shard.
void parse_shard(const std::string& text, unsigned& shard, unsigned& shards);

// The whole subcommand; returns the exit status (0, or 1 when points failed).
int run_sweep(const SweepOptions& options);

}  // namespace kvtier
