#include "sim/app/sweep_points.h"

#include <algorithm>
#include <iostream>

#include "sim/app/run.h"
#include "sim/core/config.h"

namespace kvtier {

namespace {

const char* const kSeedPath = "sim.seed";
// Stands for the seed in a resolved configuration's text; a string no
// configuration value is (it is checked to occur once).
const char* const kSeedMark = "\x01kvtier seed\x01";
// Stands for the hardware section in the same way.
const char* const kHardwareMark = "\x01kvtier hardware\x01";
// Shared constructions kept at once: seeds are the innermost loop of a
// sweep's index, so the points that share one come together.
constexpr size_t kMaxShared = 4096;
// Duplicates named one by one on stderr; the rest are counted.
constexpr size_t kNotedDuplicates = 10;

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
}

// A seed checked as load_config checks sim.seed; its resolved value.
json checked_seed(const json& seed) {
  static const ParamList spec = [] {
    ParamList all = sim_params(), only;
    for (ParamSpec& p : all)
      if (p.name == "seed") only.push_back(std::move(p));
    return only;
  }();
  json sim{{"seed", seed}};
  resolve_params(sim, spec, "sim");
  return sim["seed"];
}

// An override that sets the hardware section or anything in it.
bool touches_hardware(const std::string& set) {
  static const std::string h = "hardware";
  return set.compare(0, h.size(), h) == 0 && set.size() > h.size() && (set[h.size()] == '.' || set[h.size()] == '=');
}

}  // namespace

PointResolver::PointResolver(const SweepSpace& space) : space_(space), hardware_mark_(json(kHardwareMark).dump()) {
  try {
    base_ = expand_config_file(find_config_file(space.base_path()));
  } catch (const ConfigError& e) {
    base_error_ = e.what();  // reported as point 0's, as loading it would
    return;
  }
  base_hardware_ok_ = base_.is_object() && base_.contains("hardware") && base_["hardware"].is_object();
  if (base_hardware_ok_) {
    base_rest_ = base_;
    base_rest_["hardware"] = json::object();  // an object, as finish_config requires
  }
}

void PointResolver::fail(size_t index, const json& overrides, const std::string& why) const {
  std::string msg = why;
  if (!space_.inline_path().empty()) replace_all(msg, space_.inline_path(), space_.file() + " (inline base)");
  throw ConfigError(space_.file() + ": point " + std::to_string(index) + " " + brief_dump(overrides, 200) + ": " + msg);
}

// The point's configuration as `kvtier run BASE --set ...` builds it,
// validated by the engine that would run it, constructed to validate only;
// starts no simulation.
PointResolver::Built PointResolver::build(const json& overrides) {
  if (!base_error_.empty()) throw ConfigError(base_error_);
  const std::vector<std::string> sets = space_.sets(overrides);
  // A cluster's instances each parse the hardware with their own GPU and
  // tiers: its points keep the hardware section.
  const bool own = !base_hardware_ok_ || base_.contains("cluster") ||
                   std::any_of(sets.begin(), sets.end(), touches_hardware);
  Built b;
  b.cfg = own ? base_ : base_rest_;
  finish_config(b.cfg, space_.base_path(), sets);
  if (own) {
    b.hw = cache_.hardware(b.cfg["hardware"]);
  } else {
    if (!base_hw_) base_hw_ = cache_.hardware(base_["hardware"]);
    b.hw = base_hw_;
  }
  validate_config(b.cfg, cache_, b.hw);
  return b;
}

std::string PointResolver::text(Built& b) const {
  b.cfg["hardware"] = kHardwareMark;
  std::string t = b.cfg.dump();
  const std::string& mark = hardware_mark_;
  const size_t at = t.find(mark);
  if (at != std::string::npos && t.find(mark, at + 1) == std::string::npos) return t.replace(at, mark.size(), b.hw->text);
  b.cfg["hardware"] = b.hw->resolved;  // the mark is in a value too: the whole text
  return b.cfg.dump();
}

uint64_t PointResolver::hash(Built& b) {
  b.cfg["hardware"] = kHardwareMark;
  const std::string t = b.cfg.dump();
  const std::string& mark = hardware_mark_;
  const size_t at = t.find(mark);
  if (at == std::string::npos || t.find(mark, at + 1) != std::string::npos) return fnv1a(text(b));
  // The text before the hardware is the same for most points (the keys
  // before "hardware" sort first): its hardware part is hashed once.
  const uint64_t in = fnv1a(t.data(), at, fnv1a(std::string()));
  if (b.hw != hashed_hw_ || in != hashed_in_) {
    hashed_hw_ = b.hw;
    hashed_in_ = in;
    hashed_out_ = fnv1a(b.hw->text, in);
  }
  return fnv1a(t.data() + at + mark.size(), t.size() - at - mark.size(), hashed_out_);
}

json PointResolver::resolved(size_t index) const {
  const json o = space_.overrides(index);
  try {
    if (!base_error_.empty()) throw ConfigError(base_error_);
    json cfg = base_;
    finish_config(cfg, space_.base_path(), space_.sets(o));
    resolve_config(cfg);
    return cfg;
  } catch (const ConfigError& e) {
    fail(index, o, e.what());
  }
}

PointResolver::Built PointResolver::construct(size_t index, const json& o) {
  Built b;
  try {
    b = build(o);
  } catch (const ConfigError& e) {
    fail(index, o, e.what());
  }
  ++constructed_;
  return b;
}

uint64_t PointResolver::key(size_t index) {
  const json o = space_.overrides(index);
  if (share_ && o.contains(kSeedPath)) return shared_key(index, o);
  Built b = construct(index, o);
  return hash(b);
}

// A point whose overrides name sim.seed: the configuration without the seed
// is constructed once, the seed checked on its own and put in its place.
uint64_t PointResolver::shared_key(size_t index, const json& o) {
  json seed;
  json rest = o;
  rest.erase(kSeedPath);
  const std::string shared = rest.dump();
  try {
    seed = checked_seed(o[kSeedPath]);
  } catch (const ConfigError& e) {
    fail(index, o, e.what());
  }
  const std::string seed_text = seed.dump();
  if (auto it = around_.find(shared); it != around_.end())
    return fnv1a(it->second.suffix, fnv1a(seed_text, it->second.prefix_state));

  Built b = construct(index, o);
  const std::string whole = text(b);
  // The splice must give back this very text, or no point shares.
  if (!b.cfg["sim"].is_object() || b.cfg["sim"]["seed"] != seed) {
    share_ = false;
    return fnv1a(whole);
  }
  b.cfg["sim"]["seed"] = kSeedMark;
  const std::string marked = text(b), mark = json(kSeedMark).dump();
  const size_t at = marked.find(mark);
  Around a;
  if (at == std::string::npos || marked.find(mark, at + 1) != std::string::npos ||
      marked.substr(0, at) + seed_text + marked.substr(at + mark.size()) != whole) {
    share_ = false;
    return fnv1a(whole);
  }
  a.prefix_state = fnv1a(marked.substr(0, at));
  a.suffix = marked.substr(at + mark.size());
  if (around_.size() >= kMaxShared) around_.clear();
  around_.emplace(shared, std::move(a));
  return fnv1a(whole);
}

SweepPlan plan_sweep(const SweepSpace& space, unsigned shard, unsigned shards, bool quiet) {
  SweepPlan plan;
  plan.total = space.size();
  PointResolver resolver(space);
  std::vector<uint64_t> keys(plan.total);
  for (size_t i = 0; i < plan.total; ++i) keys[i] = resolver.key(i);
  plan.constructed = resolver.constructed();

  // Duplicates: every point whose key an earlier point has.
  std::vector<bool> dup(plan.total, false);
  std::vector<std::pair<size_t, size_t>> dups;  // (point, the earlier point it repeats)
  {
    std::vector<std::pair<uint64_t, uint32_t>> by_key(plan.total);
    for (size_t i = 0; i < plan.total; ++i) by_key[i] = {keys[i], static_cast<uint32_t>(i)};
    std::sort(by_key.begin(), by_key.end());
    for (size_t j = 1; j < by_key.size(); ++j) {
      if (by_key[j].first != by_key[j - 1].first) continue;
      size_t first = j - 1;
      while (first > 0 && by_key[first - 1].first == by_key[j].first) --first;
      dup[by_key[j].second] = true;
      dups.emplace_back(by_key[j].second, by_key[first].second);
    }
  }
  plan.duplicates = dups.size();
  std::sort(dups.begin(), dups.end());
  for (size_t d = 0; d < dups.size() && d < kNotedDuplicates && !quiet; ++d)
    std::cerr << "kvtier: note: " << space.file() << ": point " << dups[d].first << " "
              << brief_dump(space.overrides(dups[d].first), 200)
              << " resolves to the same configuration as point " << dups[d].second << "; it runs once\n";
  if (dups.size() > kNotedDuplicates && !quiet)
    std::cerr << "kvtier: note: " << space.file() << ": " << dups.size() - kNotedDuplicates
              << " more points repeat an earlier point's configuration; each runs once\n";

  for (size_t i = shard; i < plan.total; i += shards)
    if (!dup[i]) plan.mine.push_back({i, keys[i]});
  return plan;
}

SweepPoint sweep_point(const SweepSpace& space, const SweepPlan::Point& p) {
  SweepPoint pt;
  pt.index = p.index;
  pt.overrides = space.overrides(p.index);
  pt.sets = space.sets(pt.overrides);
  pt.key = key_text(p.key);
  return pt;
}

}  // namespace kvtier
