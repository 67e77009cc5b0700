// A sweep file (docs/sweep.md), read and expanded into points: a base
// configuration, fixed overrides, a grid, linked (zip) axes and/or an
// explicit list of points, and seeds. Every point is resolved and validated
// by the engine that will run it (run.h: single-batch or serving); nothing
// here starts a process or a simulation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

// The most points one sweep file may expand to (docs/config.md, Limits).
constexpr uint64_t kMaxSweepPoints = 1000000;

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

// FNV-1a 64 of the canonical dump() of a resolved configuration, 16 hex digits.
std::string config_key(const json& resolved_config);

// Reads and validates the sweep file and resolves and validates every point
// (throws ConfigError: one line naming the file and the JSON path, or the
// point's overrides). An inline base is written as base.json to work_dir.
Sweep load_sweep(const std::string& file, const std::vector<std::string>& cli_sets, const std::string& work_dir,
                 bool quiet);

}  // namespace kvtier
