// Parameter sweeps: `kvtier sweep SWEEP.json`. A sweep file names a base
// configuration, fixed overrides, a grid and/or an explicit list of points
// (docs/sweep.md). Every point is resolved and validated in this process
// (constructing a Simulation does not start SimGrid), then each runs as its
// own `kvtier run` child process, because SimGrid allows one simulation per
// process. Results are appended to a JSON-lines file, one line per point,
// keyed by a hash of the point's fully resolved configuration, so a re-run
// skips what is done and shards of one sweep merge by concatenation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

// The most points one sweep file may expand to (docs/config.md, Limits).
constexpr uint64_t kMaxSweepPoints = 1000000;

struct SweepOptions {
  std::string file;                 // the sweep JSON
  unsigned jobs = 0;                // points at once; 0 = the CPUs this process may use
  unsigned shard = 0, shards = 1;   // run the points with index % shards == shard
  std::string out;                  // JSON-lines file; "" = out/<sweep name>/sweep.jsonl
  std::vector<std::string> sets;    // fixed overrides from the command line (after the file's "set")
  bool quiet = false;               // no progress on stderr, no summary on stdout
};

// One point of a sweep, resolved.
struct SweepPoint {
  size_t index = 0;                 // position in the expanded sweep (points x grid x seeds)
  json overrides;                   // what varies: {"dotted.path": value, ...}
  std::vector<std::string> sets;    // every PATH=VALUE applied to the base, in order
  json config;                      // fully resolved (presets expanded, defaults filled)
  std::string key;                  // config_key(config)
};

struct Sweep {
  std::string file, name;
  std::string base_path;            // the config file every point starts from
  std::vector<SweepPoint> points;   // all points, in index order (duplicates removed)
};

// "I/N" with 0 <= I < N; throws ConfigError naming --shard.
void parse_shard(const std::string& text, unsigned& shard, unsigned& shards);

// FNV-1a 64 of the canonical dump() of a resolved configuration, 16 hex digits.
std::string config_key(const json& resolved_config);

// Reads and validates the sweep file and resolves and validates every point
// (throws ConfigError: one line naming the file and the JSON path, or the
// point's overrides). An inline base is written as base.json to work_dir.
Sweep load_sweep(const std::string& file, const std::vector<std::string>& cli_sets, const std::string& work_dir,
                 bool quiet);

// The whole subcommand; returns the exit status (0, or 1 when points failed).
int run_sweep(const SweepOptions& options);

}  // namespace kvtier
