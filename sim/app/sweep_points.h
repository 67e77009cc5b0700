// A sweep's points resolved and validated one at a time, in the memory of
// one point: each point's configuration is built from the base (its presets
// expanded once) and its overrides, exactly as `kvtier run BASE --set ...`
// builds it, and validated by constructing the engine that would run it
// (run.h), which also fills in every default; the point's key is the hash
// of that resolved configuration. The engine is constructed in its
// validating mode (sim/core/validation_cache.h): every check a run makes,
// nothing a run allocates, the hardware parsed once per distinct hardware
// section. Points that differ only in sim.seed share
// one construction: the seed is checked on its own and spliced into the
// resolved text (a seed selects random streams, never whether or how a
// configuration is valid; a test holds every shipped config to that).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/app/sweep_file.h"
#include "sim/core/validation_cache.h"

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
  // A point's configuration, validated; its hardware section is left as
  // written (or a stand-in, when no override touches it), `hw` its parse.
  struct Built {
    json cfg;
    std::shared_ptr<const ParsedHardware> hw;
  };
  Built build(const json& overrides);
  // build(), counted; a ConfigError becomes the point's failure.
  Built construct(size_t index, const json& overrides);
  // The resolved configuration's text (its dump), hardware spliced in.
  std::string text(Built& b) const;
  // fnv1a(text(b)), the hardware's part hashed once for the text before it.
  uint64_t hash(Built& b);
  uint64_t shared_key(size_t index, const json& overrides);
  [[noreturn]] void fail(size_t index, const json& overrides, const std::string& why) const;

  const SweepSpace& space_;
  json base_;  // the base file with its presets expanded, before any override
  // base_ with its hardware section a stand-in (copied for the points whose
  // overrides leave the hardware alone), and that section's parse.
  json base_rest_;
  bool base_hardware_ok_ = false;  // base_'s hardware section is an object
  std::shared_ptr<const ParsedHardware> base_hw_;
  ValidationCache cache_;
  const std::string hardware_mark_;  // kHardwareMark as dumped
  // The FNV-1a state after the latest hardware text hashed, and before it.
  std::shared_ptr<const ParsedHardware> hashed_hw_;
  uint64_t hashed_in_ = 0, hashed_out_ = 0;
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
