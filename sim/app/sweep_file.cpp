#include "sim/app/sweep_file.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "sim/app/run.h"
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

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
}

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

// Linked paths: the i-th value of every list at once (one zip axis).
struct Linked {
  std::vector<std::string> paths;
  std::vector<const json*> values;
  size_t size = 0;
};

// What a sweep file varies, checked.
struct Axes {
  std::vector<std::string> grid_paths;  // sorted (a JSON object's order)
  std::vector<const json*> grid_values;
  std::vector<Linked> zips;             // in file order
  std::vector<json> entries;            // the point entries; one empty one without "points"
  std::vector<json> seeds;              // one null one without "seed"
};

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

json fixed_set(const std::string& file, const json& doc) {
  if (!doc.contains("set")) return json::object();
  check_overrides(file, "set", doc["set"]);
  return doc["set"];
}

void read_grid(const std::string& file, const json& doc, Axes& ax) {
  if (!doc.contains("grid")) return;
  const json& g = doc["grid"];
  if (!g.is_object()) throw ConfigError(file + ": grid: expected an object {\"dotted.path\": [values...], ...}");
  if (g.empty()) throw ConfigError(file + ": grid: empty (name at least one path with its values, or leave grid out)");
  for (auto it = g.begin(); it != g.end(); ++it) {
    const std::string where = grid_path("grid", it.key());
    check_dotted(file, where, it.key());
    check_values(file, where, it.value());
    ax.grid_paths.push_back(it.key());
    ax.grid_values.push_back(&it.value());
  }
}

// One zip axis at `where`; `seen` holds the paths already varied.
Linked read_zip_axis(const std::string& file, const std::string& where, const json& axis, std::set<std::string>& seen) {
  if (!axis.is_object() || axis.empty())
    throw ConfigError(file + ": " + where + ": expected a non-empty object {\"dotted.path\": [values...], ...}");
  Linked l;
  for (auto it = axis.begin(); it != axis.end(); ++it) {
    const std::string w = grid_path(where, it.key());
    check_dotted(file, w, it.key());
    check_values(file, w, it.value());
    if (l.size == 0) l.size = it.value().size();
    if (it.value().size() != l.size)
      throw ConfigError(file + ": " + w + ": has " + std::to_string(it.value().size()) + " values, expected " +
                        std::to_string(l.size) + " like the other paths of " + where +
                        " (linked paths move together)");
    if (!seen.insert(it.key()).second)
      throw ConfigError(file + ": " + w + ": also in grid or another zip axis (a path varies in one place only)");
    l.paths.push_back(it.key());
    l.values.push_back(&it.value());
  }
  return l;
}

// zip: linked axes, each a set of paths that move together (the i-th value
// of every list at once); each axis is one more grid dimension.
void read_zip(const std::string& file, const json& doc, Axes& ax) {
  if (!doc.contains("zip")) return;
  const json& z = doc["zip"];
  std::vector<const json*> axes;
  if (z.is_object()) {
    axes.push_back(&z);
  } else if (z.is_array() && !z.empty()) {
    for (const auto& a : z) axes.push_back(&a);
  } else {
    throw ConfigError(file + ": zip: expected an object {\"dotted.path\": [values...], ...} of lists of one "
                      "length, or a non-empty array of such objects");
  }
  std::set<std::string> seen(ax.grid_paths.begin(), ax.grid_paths.end());
  for (size_t a = 0; a < axes.size(); ++a) {
    const std::string where = z.is_object() ? std::string("zip") : "zip[" + std::to_string(a) + "]";
    ax.zips.push_back(read_zip_axis(file, where, *axes[a], seen));
  }
}

void read_points(const std::string& file, const json& doc, Axes& ax) {
  if (!doc.contains("points")) {
    ax.entries.push_back(json::object());
    return;
  }
  const json& p = doc["points"];
  if (!p.is_array() || p.empty()) throw ConfigError(file + ": points: expected a non-empty array of override objects");
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string where = "points[" + std::to_string(i) + "]";
    check_overrides(file, where, p[i]);
    for (const auto& k : ax.grid_paths)
      if (p[i].contains(k))
        throw ConfigError(file + ": " + grid_path(where, k) + ": also in grid (a path varies in one place only)");
    for (const auto& l : ax.zips)
      for (const auto& k : l.paths)
        if (p[i].contains(k))
          throw ConfigError(file + ": " + grid_path(where, k) + ": also in zip (a path varies in one place only)");
    ax.entries.push_back(p[i]);
  }
}

// "seed" and sim.seed varied elsewhere too: refused.
void check_seed_once(const std::string& file, const Axes& ax) {
  for (const auto& k : ax.grid_paths)
    if (k == "sim.seed") throw ConfigError(file + ": " + grid_path("grid", k) + ": also given as seed");
  for (const auto& l : ax.zips)
    for (const auto& k : l.paths)
      if (k == "sim.seed") throw ConfigError(file + ": zip: sim.seed: also given as seed");
  for (size_t i = 0; i < ax.entries.size(); ++i)
    if (ax.entries[i].contains("sim.seed"))
      throw ConfigError(file + ": " + grid_path("points[" + std::to_string(i) + "]", "sim.seed") +
                        ": also given as seed");
}

void read_seeds(const std::string& file, const json& doc, Axes& ax) {
  if (!doc.contains("seed")) {
    ax.seeds.push_back(json());
    return;
  }
  const json& s = doc["seed"];
  auto ok = [](const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); };
  if (ok(s)) {
    ax.seeds.push_back(s);
  } else if (s.is_array() && !s.empty() && std::all_of(s.begin(), s.end(), ok)) {
    ax.seeds.assign(s.begin(), s.end());
  } else {
    throw ConfigError(file + ": seed: expected a non-negative integer or a non-empty array of them");
  }
  check_seed_once(file, ax);
}

std::vector<size_t> axis_sizes(const Axes& ax) {
  std::vector<size_t> sizes;
  for (const json* v : ax.grid_values) sizes.push_back(v->size());
  for (const auto& l : ax.zips) sizes.push_back(l.size);
  return sizes;
}

// Counted before anything is expanded: a product of axes can be astronomically large.
void check_point_count(const std::string& file, const Axes& ax) {
  uint64_t total = ax.entries.size();
  bool over = false;
  for (size_t n : axis_sizes(ax)) over = over || __builtin_mul_overflow(total, uint64_t(n), &total);
  over = over || __builtin_mul_overflow(total, uint64_t(ax.seeds.size()), &total);
  if (over || total > kMaxSweepPoints)
    throw ConfigError(file + ": " + (over ? std::string("more than 2^64") : std::to_string(total)) +
                      " points (points x grid x zip x seeds), more than the " + std::to_string(kMaxSweepPoints) +
                      " a sweep may have (split it, or use --shard)");
}

// Each point entry x the axes (the grid's paths in sorted order, then the
// zip axes in file order; the last varying fastest) x the seeds.
std::vector<json> expand(const Axes& ax) {
  const std::vector<size_t> axis_size = axis_sizes(ax);
  const size_t ng = ax.grid_paths.size();
  std::vector<json> overrides;
  for (const auto& e : ax.entries) {
    std::vector<size_t> at(axis_size.size(), 0);
    while (true) {
      json o = e;
      for (size_t k = 0; k < ng; ++k) o[ax.grid_paths[k]] = (*ax.grid_values[k])[at[k]];
      for (size_t z = 0; z < ax.zips.size(); ++z)
        for (size_t p = 0; p < ax.zips[z].paths.size(); ++p)
          o[ax.zips[z].paths[p]] = (*ax.zips[z].values[p])[at[ng + z]];
      for (const auto& s : ax.seeds) {
        json os = o;
        if (!s.is_null()) os["sim.seed"] = s;
        overrides.push_back(std::move(os));
      }
      size_t k = axis_size.size();
      while (k > 0 && ++at[k - 1] == axis_size[k - 1]) at[--k] = 0;
      if (k == 0) break;
    }
  }
  return overrides;
}

// Every PATH=VALUE of a point: the file's set, the command line's, the
// point's own; then what points never write.
std::vector<std::string> point_sets(const json& fixed, const std::vector<std::string>& cli_sets, const json& overrides) {
  std::vector<std::string> sets;
  for (auto it = fixed.begin(); it != fixed.end(); ++it) sets.push_back(assignment(it.key(), it.value()));
  sets.insert(sets.end(), cli_sets.begin(), cli_sets.end());
  for (auto it = overrides.begin(); it != overrides.end(); ++it) sets.push_back(assignment(it.key(), it.value()));
  // Points keep result.json only: no timeline, no steps.csv, out_dir per run.
  for (const char* s : {"sim.out_dir=\"\"", "sim.timeline=\"\"", "sim.step_csv=false"}) sets.push_back(s);
  return sets;
}

// The point resolved and validated by the engine that will run it.
SweepPoint resolve_point(const Sweep& sw, size_t index, json overrides, std::vector<std::string> sets,
                         const std::string& inline_path) {
  SweepPoint pt;
  pt.index = index;
  pt.overrides = std::move(overrides);
  pt.sets = std::move(sets);
  try {
    json cfg = load_config(sw.base_path, pt.sets);
    resolve_config(cfg);  // validates every component; starts no simulation
    pt.config = std::move(cfg);
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    if (!inline_path.empty()) replace_all(msg, inline_path, sw.file + " (inline base)");
    throw ConfigError(sw.file + ": point " + std::to_string(index) + " " + brief_dump(pt.overrides, 200) + ": " + msg);
  }
  pt.key = config_key(pt.config);
  return pt;
}

}  // namespace

std::string config_key(const json& cfg) {
  // nlohmann::json keeps object keys sorted, so dump() is canonical.
  const std::string s = cfg.dump();
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Sweep load_sweep(const std::string& file, const std::vector<std::string>& cli_sets, const std::string& work_dir,
                 bool quiet) {
  Sweep sw;
  sw.file = file;
  json doc = load_json_file(file);
  check_top_keys(file, doc);
  sw.name = sweep_name(file, doc);
  std::string inline_path;
  sw.base_path = base_file(file, doc, sw.name, work_dir, inline_path);
  const json fixed = fixed_set(file, doc);
  Axes ax;
  read_grid(file, doc, ax);
  read_zip(file, doc, ax);
  read_points(file, doc, ax);
  read_seeds(file, doc, ax);
  check_point_count(file, ax);
  std::vector<json> overrides = expand(ax);

  // Resolve and validate every point before anything runs.
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < overrides.size(); ++i) {
    std::vector<std::string> sets = point_sets(fixed, cli_sets, overrides[i]);
    SweepPoint pt = resolve_point(sw, i, std::move(overrides[i]), std::move(sets), inline_path);
    auto [it, fresh] = first.emplace(pt.key, i);
    if (!fresh) {
      if (!quiet)
        std::cerr << "kvtier: note: " << file << ": point " << i << " " << brief_dump(pt.overrides, 200)
                  << " resolves to the same configuration as point " << it->second << "; it runs once\n";
      continue;
    }
    sw.points.push_back(std::move(pt));
  }
  return sw;
}

}  // namespace kvtier
