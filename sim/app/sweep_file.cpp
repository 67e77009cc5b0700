#include "sim/app/sweep_file.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "sim/core/config.h"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kSweepKeys{"name", "base", "set", "grid", "zip", "points", "seed"};

std::string grid_path(const std::string& section, const std::string& key) {
  return section + "[\"" + key + "\"]";
}

void check_dotted(const std::string& file, const std::string& where, const std::string& path) {
  bool ok = !path.empty() && path.find('=') == std::string::npos && path.front() != '.' && path.back() != '.' &&
            path.find("..") == std::string::npos;
  if (!ok)
    throw ConfigError(file + ": " + where + ": expected a dotted config path like workload.batch (as for --set)");
}

// An object of dotted path -> JSON value.
void check_overrides(const std::string& file, const std::string& where, const json& o) {
  if (!o.is_object())
    throw ConfigError(file + ": " + where + ": expected an object of overrides {\"dotted.path\": value, ...}");
  for (auto it = o.begin(); it != o.end(); ++it) check_dotted(file, grid_path(where, it.key()), it.key());
}

// A list of values one path takes: a non-empty array.
void check_values(const std::string& file, const std::string& where, const json& v) {
  if (!v.is_array() || v.empty()) throw ConfigError(file + ": " + where + ": expected a non-empty array of values");
}

std::string assignment(const std::string& path, const json& value) { return path + "=" + value.dump(); }

// An inline base: file names in it are relative to the sweep file, so make
// them absolute before it is written elsewhere (nested presets stay relative
// to the files that name them, as load_config does).
json absolutize_inline_base(json base, const std::string& file) {
  auto fix = [&](json& v, const std::string& where) {
    if (v.is_string()) v = fs::absolute(find_data_file(v.get<std::string>(), file, where)).string();
  };
  if (base.contains("preset")) fix(base["preset"], "base.preset");
  for (const char* s : {"hardware", "model", "workload", "policies", "sim"}) {
    if (!base.contains(s)) continue;
    json& sec = base[s];
    if (sec.is_string()) fix(sec, std::string("base.") + s);
    else if (sec.is_object() && sec.contains("preset")) fix(sec["preset"], std::string("base.") + s + ".preset");
  }
  return base;
}


void check_top_keys(const std::string& file, const json& doc) {
  if (!doc.is_object()) throw ConfigError(file + ": expected a JSON object at the top level (docs/sweep.md)");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (is_annotation_key(it.key()) || std::find(kSweepKeys.begin(), kSweepKeys.end(), it.key()) != kSweepKeys.end())
      continue;
    std::string hint = nearest(it.key(), kSweepKeys);
    throw ConfigError(file + ": " + it.key() + ": unknown key in a sweep file" +
                      (hint.empty() ? " (expected base, set, grid, zip, points, seed, name)"
                                    : " (did you mean '" + hint + "'?)"));
  }
}

std::string sweep_name(const std::string& file, const json& doc) {
  if (!doc.contains("name")) return fs::path(file).stem().string();
  const json& n = doc["name"];
  if (!n.is_string() || n.get<std::string>().empty() || n.get<std::string>().find('/') != std::string::npos ||
      n.get<std::string>() == "." || n.get<std::string>() == "..")
    throw ConfigError(file + ": name: expected a non-empty string usable as a folder name");
  return n.get<std::string>();
}

// The base config's file; an inline base is written to work_dir and its
// path also returned in `inline_path`.
std::string base_file(const std::string& file, const json& doc, const std::string& name, const std::string& work_dir,
                      std::string& inline_path) {
  if (!doc.contains("base")) throw ConfigError(file + ": base: required (a config file name or an inline config object)");
  const json& base = doc["base"];
  if (base.is_string()) return find_data_file(base.get<std::string>(), file, file + ": base");
  if (!base.is_object()) throw ConfigError(file + ": base: expected a config file name or an inline config object");
  json b = absolutize_inline_base(base, file);
  if (!b.contains("name")) b["name"] = name;
  inline_path = (fs::path(work_dir) / "base.json").string();
  std::ofstream(inline_path, std::ios::binary) << b.dump(2) << "\n";
  return inline_path;
}

}  // namespace

uint64_t fnv1a(const std::string& bytes, uint64_t h) { return fnv1a(bytes.data(), bytes.size(), h); }

uint64_t fnv1a(const char* bytes, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 1099511628211ull;
  }
  return h;
}

std::string key_text(uint64_t key) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(key));
  return buf;
}

// nlohmann::json keeps object keys sorted, so dump() is canonical.
std::string config_key(const json& cfg) { return key_text(fnv1a(cfg.dump())); }

SweepSpace::SweepSpace(const std::string& file, const std::vector<std::string>& cli_sets, const std::string& work_dir)
    : file_(file), cli_sets_(cli_sets) {
  const json doc = load_json_file(file);
  check_top_keys(file, doc);
  name_ = sweep_name(file, doc);
  base_path_ = base_file(file, doc, name_, work_dir, inline_path_);
  if (doc.contains("set")) {
    check_overrides(file, "set", doc["set"]);
    fixed_ = doc["set"];
  }
  read_grid(doc);
  read_zip(doc);
  read_points(doc);
  read_seeds(doc);
  count_points();
}

void SweepSpace::read_grid(const json& doc) {
  if (!doc.contains("grid")) return;
  const json& g = doc["grid"];
  if (!g.is_object()) throw ConfigError(file_ + ": grid: expected an object {\"dotted.path\": [values...], ...}");
  if (g.empty()) throw ConfigError(file_ + ": grid: empty (name at least one path with its values, or leave grid out)");
  for (auto it = g.begin(); it != g.end(); ++it) {
    const std::string where = grid_path("grid", it.key());
    check_dotted(file_, where, it.key());
    check_values(file_, where, it.value());
    grid_paths_.push_back(it.key());
    grid_values_.push_back(it.value());
  }
}

// zip: linked axes, each a set of paths that move together (the i-th value
// of every list at once); each axis is one more grid dimension.
void SweepSpace::read_zip(const json& doc) {
  if (!doc.contains("zip")) return;
  const json& z = doc["zip"];
  std::vector<const json*> axes;
  if (z.is_object()) {
    axes.push_back(&z);
  } else if (z.is_array() && !z.empty()) {
    for (const auto& a : z) axes.push_back(&a);
  } else {
    throw ConfigError(file_ + ": zip: expected an object {\"dotted.path\": [values...], ...} of lists of one "
                      "length, or a non-empty array of such objects");
  }
  std::set<std::string> seen(grid_paths_.begin(), grid_paths_.end());
  for (size_t a = 0; a < axes.size(); ++a) {
    const std::string where = z.is_object() ? std::string("zip") : "zip[" + std::to_string(a) + "]";
    const json& axis = *axes[a];
    if (!axis.is_object() || axis.empty())
      throw ConfigError(file_ + ": " + where + ": expected a non-empty object {\"dotted.path\": [values...], ...}");
    Linked l;
    for (auto it = axis.begin(); it != axis.end(); ++it) {
      const std::string w = grid_path(where, it.key());
      check_dotted(file_, w, it.key());
      check_values(file_, w, it.value());
      if (l.size == 0) l.size = it.value().size();
      if (it.value().size() != l.size)
        throw ConfigError(file_ + ": " + w + ": has " + std::to_string(it.value().size()) + " values, expected " +
                          std::to_string(l.size) + " like the other paths of " + where +
                          " (linked paths move together)");
      if (!seen.insert(it.key()).second)
        throw ConfigError(file_ + ": " + w + ": also in grid or another zip axis (a path varies in one place only)");
      l.paths.push_back(it.key());
      l.values.push_back(it.value());
    }
    zips_.push_back(std::move(l));
  }
}

void SweepSpace::read_points(const json& doc) {
  if (!doc.contains("points")) {
    entries_.push_back(json::object());
    return;
  }
  const json& p = doc["points"];
  if (!p.is_array() || p.empty()) throw ConfigError(file_ + ": points: expected a non-empty array of override objects");
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string where = "points[" + std::to_string(i) + "]";
    check_overrides(file_, where, p[i]);
    for (const auto& k : grid_paths_)
      if (p[i].contains(k))
        throw ConfigError(file_ + ": " + grid_path(where, k) + ": also in grid (a path varies in one place only)");
    for (const auto& l : zips_)
      for (const auto& k : l.paths)
        if (p[i].contains(k))
          throw ConfigError(file_ + ": " + grid_path(where, k) + ": also in zip (a path varies in one place only)");
    entries_.push_back(p[i]);
  }
}

void SweepSpace::read_seeds(const json& doc) {
  if (!doc.contains("seed")) {
    seeds_.push_back(json());
    return;
  }
  const json& s = doc["seed"];
  auto ok = [](const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); };
  if (ok(s)) {
    seeds_.push_back(s);
  } else if (s.is_array() && !s.empty() && std::all_of(s.begin(), s.end(), ok)) {
    seeds_.assign(s.begin(), s.end());
  } else {
    throw ConfigError(file_ + ": seed: expected a non-negative integer or a non-empty array of them");
  }
  // "seed" and sim.seed varied elsewhere too: refused.
  for (const auto& k : grid_paths_)
    if (k == "sim.seed") throw ConfigError(file_ + ": " + grid_path("grid", k) + ": also given as seed");
  for (const auto& l : zips_)
    for (const auto& k : l.paths)
      if (k == "sim.seed") throw ConfigError(file_ + ": zip: sim.seed: also given as seed");
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].contains("sim.seed"))
      throw ConfigError(file_ + ": " + grid_path("points[" + std::to_string(i) + "]", "sim.seed") +
                        ": also given as seed");
}

// Counted before anything is expanded: a product of axes can be astronomically large.
void SweepSpace::count_points() {
  for (const json& v : grid_values_) axis_sizes_.push_back(v.size());
  for (const auto& l : zips_) axis_sizes_.push_back(l.size);
  uint64_t combos = 1, total = 0;
  bool over = false;
  for (size_t n : axis_sizes_) over = over || __builtin_mul_overflow(combos, uint64_t(n), &combos);
  over = over || __builtin_mul_overflow(combos, uint64_t(entries_.size()), &total) ||
         __builtin_mul_overflow(total, uint64_t(seeds_.size()), &total);
  if (over || total > kMaxSweepPoints)
    throw ConfigError(file_ + ": " + (over ? std::string("more than 2^64") : std::to_string(total)) +
                      " points (points x grid x zip x seeds), more than the " + std::to_string(kMaxSweepPoints) +
                      " a sweep may have (split it, or use --shard)");
  combos_ = static_cast<size_t>(combos);
  size_ = static_cast<size_t>(total);
}

// Index order: each point entry x the axes (the grid's paths in sorted
// order, then the zip axes in file order; the last varying fastest) x the
// seeds, so the index is a number in mixed radix whose last digit is the seed.
json SweepSpace::overrides(size_t index) const {
  const size_t seed = index % seeds_.size();
  size_t rest = index / seeds_.size();
  size_t combo = rest % combos_;
  json o = entries_[rest / combos_];
  std::vector<size_t> at(axis_sizes_.size());
  for (size_t k = axis_sizes_.size(); k-- > 0;) {
    at[k] = combo % axis_sizes_[k];
    combo /= axis_sizes_[k];
  }
  const size_t ng = grid_paths_.size();
  for (size_t k = 0; k < ng; ++k) o[grid_paths_[k]] = grid_values_[k][at[k]];
  for (size_t z = 0; z < zips_.size(); ++z)
    for (size_t p = 0; p < zips_[z].paths.size(); ++p) o[zips_[z].paths[p]] = zips_[z].values[p][at[ng + z]];
  if (!seeds_[seed].is_null()) o["sim.seed"] = seeds_[seed];
  return o;
}

std::vector<std::string> SweepSpace::sets(const json& overrides) const {
  std::vector<std::string> sets;
  for (auto it = fixed_.begin(); it != fixed_.end(); ++it) sets.push_back(assignment(it.key(), it.value()));
  sets.insert(sets.end(), cli_sets_.begin(), cli_sets_.end());
  for (auto it = overrides.begin(); it != overrides.end(); ++it) sets.push_back(assignment(it.key(), it.value()));
  // Points keep result.json only: no timeline, no steps.csv, out_dir per run.
  for (const char* s : {"sim.out_dir=\"\"", "sim.timeline=\"\"", "sim.step_csv=false"}) sets.push_back(s);
  return sets;
}

}  // namespace kvtier
