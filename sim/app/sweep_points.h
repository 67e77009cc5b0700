// A sweep's points resolved and validated one at a time, in the memory of
// one point: each point's configuration is built from the base (its presets
// expanded once) and its overrides, exactly as `kvtier run BASE --set ...`
// builds it, and validated by constructing the engine that would run it
// (run.h), which also fills in every default; the point's key is the hash
// of that resolved configuration. Points that differ only in sim.seed share
// one construction: the seed is checked on its own and spliced into the
// resolved text (a seed selects random streams, never whether or how a
// configuration is valid; a test holds every shipped config to that).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/app/sweep_file.h"

namespace kvtier {

class PointResolver {
 public:
  explicit PointResolver(const SweepSpace& space);
  // The key of point `index` (validated); throws ConfigError naming the
  // sweep file, the point and what is wrong.
  uint64_t key(size_t index);
  // The point's fully resolved configuration, built in full (no sharing).
  json resolved(size_t index) const;
  // Engines constructed so far (the points that shared one are not counted).
  size_t constructed() const { return constructed_; }

 private:
  // The resolved text of a configuration around its seed: prefix + seed + suffix.
  struct Around {
    uint64_t prefix_state = 0;  // FNV-1a state after the prefix
    std::string suffix;
  };
  json build(const json& overrides) const;
  uint64_t shared_key(size_t index, const json& overrides);
  [[noreturn]] void fail(size_t index, const json& overrides, const std::string& why) const;

  const SweepSpace& space_;
  json base_;  // the base file with its presets expanded, before any override
  std::string base_error_;  // why the base could not be expanded (every point fails with it)
  std::unordered_map<std::string, Around> around_;  // by the overrides other than sim.seed
  bool share_ = true;
  size_t constructed_ = 0;
};

// Every point's key in index order, duplicates found, and the points of one
// shard that run: the plan of a sweep. Memory: 8 bytes a point while
// validating, 16 while finding duplicates, plus the shard's own list.
struct SweepPlan {
  size_t total = 0;                 // points in the sweep
  size_t duplicates = 0;            // points that resolve to an earlier point's configuration
  size_t constructed = 0;           // engines constructed to validate them
  struct Point {
    size_t index;
    uint64_t key;
  };
  std::vector<Point> mine;          // this shard's points, duplicates left out, in index order
};

// Validates every point of `space` (throws ConfigError at the first invalid
// one) and plans shard `shard` of `shards`; notes duplicates on stderr
// unless quiet.
SweepPlan plan_sweep(const SweepSpace& space, unsigned shard, unsigned shards, bool quiet);

// A planned point, materialised for its run.
SweepPoint sweep_point(const SweepSpace& space, const SweepPlan::Point& p);

}  // namespace kvtier
