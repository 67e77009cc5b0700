// A sweep file (docs/sweep.md), read and checked: a base configuration,
// fixed overrides, a grid, linked (zip) axes and/or an explicit list of
// points, and seeds. Nothing is expanded up front: a point's overrides are
// computed from its index, so a sweep of any size is held in the memory of
// its axes. Resolving and validating the points is sweep_points.h; nothing
// here starts a process or a simulation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

// The most points one sweep file may expand to (docs/config.md, Limits).
constexpr uint64_t kMaxSweepPoints = 1000000;

// One point of a sweep, resolved: what a run of it needs.
struct SweepPoint {
  size_t index = 0;                 // position in the expanded sweep (points x grid x seeds)
  json overrides;                   // what varies: {"dotted.path": value, ...}
  std::vector<std::string> sets;    // every PATH=VALUE applied to the base, in order
  std::string key;                  // config_key of its resolved configuration
};

// FNV-1a 64 of the canonical dump() of a resolved configuration, 16 hex digits.
std::string config_key(const json& resolved_config);
std::string key_text(uint64_t key);
uint64_t fnv1a(const std::string& bytes, uint64_t state = 14695981039346656037ull);
uint64_t fnv1a(const char* bytes, size_t n, uint64_t state);

// A sweep file read and checked (throws ConfigError: one line naming the
// file and the JSON path). An inline base is written as base.json to
// work_dir.
class SweepSpace {
 public:
  SweepSpace(const std::string& file, const std::vector<std::string>& cli_sets, const std::string& work_dir);

  const std::string& file() const { return file_; }
  const std::string& name() const { return name_; }
  // The config file every point starts from (the inline base's copy).
  const std::string& base_path() const { return base_path_; }
  // An inline base's copy, "" for a base file: errors name the sweep file instead.
  const std::string& inline_path() const { return inline_path_; }

  // Points before duplicates are removed (at most kMaxSweepPoints).
  size_t size() const { return size_; }
  // What varies at point `index`: {"dotted.path": value, ...}.
  json overrides(size_t index) const;
  // Every PATH=VALUE of a point with these overrides: the file's set, the
  // command line's, the point's own; then what points never write.
  std::vector<std::string> sets(const json& overrides) const;

 private:
  struct Linked {  // one zip axis: the i-th value of every list at once
    std::vector<std::string> paths;
    std::vector<json> values;
    size_t size = 0;
  };
  void read_grid(const json& doc);
  void read_zip(const json& doc);
  void read_points(const json& doc);
  void read_seeds(const json& doc);
  void count_points();

  std::string file_, name_, base_path_, inline_path_;
  std::vector<std::string> cli_sets_;
  json fixed_ = json::object();
  std::vector<std::string> grid_paths_;  // sorted (a JSON object's order)
  std::vector<json> grid_values_;
  std::vector<Linked> zips_;             // in file order
  std::vector<json> entries_;            // the point entries; one empty one without "points"
  std::vector<json> seeds_;              // one null one without "seed"
  std::vector<size_t> axis_sizes_;       // grid paths, then zip axes
  size_t combos_ = 1, size_ = 0;         // axis combinations; all points
};

}  // namespace kvtier
