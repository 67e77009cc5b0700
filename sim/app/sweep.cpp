#include "sim/app/sweep.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "sim/core/config.h"
#include "sim/engine/engine.h"
#include "sim/core/result.h"

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

unsigned cpu_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<unsigned>(n);
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// Keys already in the output file. A last line without its newline is what
// an interrupted write leaves: it is cut off so appending starts clean.
std::set<std::string> done_keys(const std::string& out, bool quiet) {
  std::set<std::string> keys;
  std::error_code ec;
  if (!fs::exists(out, ec)) return keys;
  std::string text = read_text(out);
  if (!text.empty() && text.back() != '\n') {
    size_t keep = text.rfind('\n');
    keep = keep == std::string::npos ? 0 : keep + 1;
    fs::resize_file(out, keep, ec);
    if (ec) throw ConfigError(out + ": cannot cut off its unfinished last line: " + ec.message());
    text.resize(keep);
    if (!quiet) std::cerr << "kvtier: warning: " << out << ": dropped an unfinished last line (an interrupted write)\n";
  }
  std::istringstream in(text);
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error&) {
    }
    if (!j.is_object() || !j.contains("key") || !j["key"].is_string())
      throw ConfigError(out + ":" + std::to_string(n) + ": not a sweep result line (expected a JSON object with \"key\")");
    keys.insert(j["key"].get<std::string>());
  }
  return keys;
}

// Removes the scratch folder however the sweep ends; a sweep killed outright
// (SIGKILL) leaves its folder, named for its process id, and the next sweep
// removes the folders of processes that no longer exist.
struct WorkDir {
  std::string path;
  WorkDir() {
    const fs::path tmp = fs::temp_directory_path();
    const std::string prefix = "kvtier-sweep-";
    std::error_code ec;
    for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      const size_t dash = name.find('-', prefix.size());
      const std::string pid_text = name.substr(prefix.size(), dash == std::string::npos ? 0 : dash - prefix.size());
      if (pid_text.empty() || pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
        std::error_code rm;
        fs::remove_all(it->path(), rm);
      }
    }
    std::string tmpl = (tmp / (prefix + std::to_string(::getpid()) + "-XXXXXX")).string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("cannot create a scratch folder in " + tmpl + ": " + strerror(errno));
    path = buf.data();
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Appends one line with a single write() on an O_APPEND descriptor: a crash
// leaves whole lines only (done_keys cuts off anything else).
class LineAppender {
 public:
  explicit LineAppender(const std::string& path) : path_(path) {
    fs::path p(path);
    std::error_code ec;
    if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
    if (ec) throw ConfigError(p.parent_path().string() + ": cannot create directory: " + ec.message());
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw ConfigError(path + ": cannot open for appending: " + strerror(errno));
  }
  ~LineAppender() {
    if (fd_ >= 0) ::close(fd_);
  }
  void append(const std::string& line) {
    struct stat st;
    off_t before = ::fstat(fd_, &st) == 0 ? st.st_size : -1;
    ssize_t n;
    do {
      n = ::write(fd_, line.data(), line.size());
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(line.size())) {
      int err = n < 0 ? errno : ENOSPC;
      if (n > 0 && before >= 0 && ::ftruncate(fd_, before) != 0) {
      }
      throw std::runtime_error(path_ + ": write failed: " + strerror(err));
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

void parse_shard(const std::string& text, unsigned& shard, unsigned& shards) {
  auto bad = [&]() { return ConfigError("--shard '" + text + "': expected I/N with 0 <= I < N, e.g. 0/4"); };
  auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) throw bad();
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  std::string a = text.substr(0, slash), b = text.substr(slash + 1);
  if (!digits(a) || !digits(b)) throw bad();
  shard = static_cast<unsigned>(std::stoul(a));
  shards = static_cast<unsigned>(std::stoul(b));
  if (shards == 0 || shard >= shards) throw bad();
}

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
  if (!doc.is_object()) throw ConfigError(file + ": expected a JSON object at the top level (docs/sweep.md)");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (is_annotation_key(it.key()) || std::find(kSweepKeys.begin(), kSweepKeys.end(), it.key()) != kSweepKeys.end())
      continue;
    std::string hint = nearest(it.key(), kSweepKeys);
    throw ConfigError(file + ": " + it.key() + ": unknown key in a sweep file" +
                      (hint.empty() ? " (expected base, set, grid, zip, points, seed, name)"
                                    : " (did you mean '" + hint + "'?)"));
  }

  // name
  sw.name = fs::path(file).stem().string();
  if (doc.contains("name")) {
    const json& n = doc["name"];
    if (!n.is_string() || n.get<std::string>().empty() || n.get<std::string>().find('/') != std::string::npos ||
        n.get<std::string>() == "." || n.get<std::string>() == "..")
      throw ConfigError(file + ": name: expected a non-empty string usable as a folder name");
    sw.name = n.get<std::string>();
  }

  // base
  if (!doc.contains("base")) throw ConfigError(file + ": base: required (a config file name or an inline config object)");
  const json& base = doc["base"];
  std::string inline_path;
  if (base.is_string()) {
    sw.base_path = find_data_file(base.get<std::string>(), file, file + ": base");
  } else if (base.is_object()) {
    json b = absolutize_inline_base(base, file);
    if (!b.contains("name")) b["name"] = sw.name;
    inline_path = (fs::path(work_dir) / "base.json").string();
    std::ofstream(inline_path, std::ios::binary) << b.dump(2) << "\n";
    sw.base_path = inline_path;
  } else {
    throw ConfigError(file + ": base: expected a config file name or an inline config object");
  }

  // set
  json fixed = json::object();
  if (doc.contains("set")) {
    fixed = doc["set"];
    check_overrides(file, "set", fixed);
  }

  // grid
  std::vector<std::string> gk;
  std::vector<const json*> gv;
  if (doc.contains("grid")) {
    const json& g = doc["grid"];
    if (!g.is_object()) throw ConfigError(file + ": grid: expected an object {\"dotted.path\": [values...], ...}");
    if (g.empty()) throw ConfigError(file + ": grid: empty (name at least one path with its values, or leave grid out)");
    for (auto it = g.begin(); it != g.end(); ++it) {
      const std::string where = grid_path("grid", it.key());
      check_dotted(file, where, it.key());
      if (!it.value().is_array() || it.value().empty())
        throw ConfigError(file + ": " + where + ": expected a non-empty array of values");
      gk.push_back(it.key());
      gv.push_back(&it.value());
    }
  }

  // zip: linked axes, each a set of paths that move together (the i-th
  // value of every list at once); each axis is one more grid dimension.
  struct Linked {
    std::vector<std::string> paths;
    std::vector<const json*> values;
    size_t size = 0;
  };
  std::vector<Linked> zips;
  if (doc.contains("zip")) {
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
    std::set<std::string> seen(gk.begin(), gk.end());
    for (size_t a = 0; a < axes.size(); ++a) {
      const std::string where = z.is_object() ? std::string("zip") : "zip[" + std::to_string(a) + "]";
      const json& ax = *axes[a];
      if (!ax.is_object() || ax.empty())
        throw ConfigError(file + ": " + where + ": expected a non-empty object {\"dotted.path\": [values...], ...}");
      Linked l;
      for (auto it = ax.begin(); it != ax.end(); ++it) {
        const std::string w = grid_path(where, it.key());
        check_dotted(file, w, it.key());
        if (!it.value().is_array() || it.value().empty())
          throw ConfigError(file + ": " + w + ": expected a non-empty array of values");
        if (l.size == 0) l.size = it.value().size();
        if (it.value().size() != l.size)
          throw ConfigError(file + ": " + w + ": has " + std::to_string(it.value().size()) +
                            " values, expected " + std::to_string(l.size) + " like the other paths of " + where +
                            " (linked paths move together)");
        if (!seen.insert(it.key()).second)
          throw ConfigError(file + ": " + w + ": also in grid or another zip axis (a path varies in one place only)");
        l.paths.push_back(it.key());
        l.values.push_back(&it.value());
      }
      zips.push_back(std::move(l));
    }
  }

  // points
  std::vector<json> entries;
  if (doc.contains("points")) {
    const json& p = doc["points"];
    if (!p.is_array() || p.empty())
      throw ConfigError(file + ": points: expected a non-empty array of override objects");
    for (size_t i = 0; i < p.size(); ++i) {
      const std::string where = "points[" + std::to_string(i) + "]";
      check_overrides(file, where, p[i]);
      for (const auto& k : gk)
        if (p[i].contains(k))
          throw ConfigError(file + ": " + grid_path(where, k) + ": also in grid (a path varies in one place only)");
      for (const auto& l : zips)
        for (const auto& k : l.paths)
          if (p[i].contains(k))
            throw ConfigError(file + ": " + grid_path(where, k) + ": also in zip (a path varies in one place only)");
      entries.push_back(p[i]);
    }
  } else {
    entries.push_back(json::object());
  }

  // seed
  std::vector<json> seeds;
  if (doc.contains("seed")) {
    const json& s = doc["seed"];
    auto ok = [](const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); };
    if (ok(s)) {
      seeds.push_back(s);
    } else if (s.is_array() && !s.empty() && std::all_of(s.begin(), s.end(), ok)) {
      seeds.assign(s.begin(), s.end());
    } else {
      throw ConfigError(file + ": seed: expected a non-negative integer or a non-empty array of them");
    }
    for (const auto& k : gk)
      if (k == "sim.seed") throw ConfigError(file + ": " + grid_path("grid", k) + ": also given as seed");
    for (const auto& l : zips)
      for (const auto& k : l.paths)
        if (k == "sim.seed") throw ConfigError(file + ": zip: sim.seed: also given as seed");
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].contains("sim.seed"))
        throw ConfigError(file + ": " + grid_path("points[" + std::to_string(i) + "]", "sim.seed") +
                          ": also given as seed");
  }
  if (seeds.empty()) seeds.push_back(json());

  // Expand: each point entry x the axes (the grid's paths in sorted order,
  // then the zip axes in file order; the last varying fastest) x the seeds.
  std::vector<size_t> axis_size;
  for (const json* v : gv) axis_size.push_back(v->size());
  for (const auto& l : zips) axis_size.push_back(l.size);
  {
    // Counted before anything is expanded: a product of axes can be astronomically large.
    uint64_t total = entries.size();
    bool over = false;
    for (size_t n : axis_size) over = over || __builtin_mul_overflow(total, uint64_t(n), &total);
    over = over || __builtin_mul_overflow(total, uint64_t(seeds.size()), &total);
    if (over || total > kMaxSweepPoints)
      throw ConfigError(file + ": " + (over ? std::string("more than 2^64") : std::to_string(total)) +
                        " points (points x grid x zip x seeds), more than the " + std::to_string(kMaxSweepPoints) +
                        " a sweep may have (split it, or use --shard)");
  }
  std::vector<json> overrides;
  for (const auto& e : entries) {
    std::vector<size_t> at(axis_size.size(), 0);
    while (true) {
      json o = e;
      for (size_t k = 0; k < gk.size(); ++k) o[gk[k]] = (*gv[k])[at[k]];
      for (size_t z = 0; z < zips.size(); ++z)
        for (size_t p = 0; p < zips[z].paths.size(); ++p) o[zips[z].paths[p]] = (*zips[z].values[p])[at[gk.size() + z]];
      for (const auto& s : seeds) {
        json os = o;
        if (!s.is_null()) os["sim.seed"] = s;
        overrides.push_back(std::move(os));
      }
      size_t k = axis_size.size();
      while (k > 0 && ++at[k - 1] == axis_size[k - 1]) at[--k] = 0;
      if (k == 0) break;
    }
  }

  // Resolve and validate every point before anything runs.
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < overrides.size(); ++i) {
    SweepPoint pt;
    pt.index = i;
    pt.overrides = overrides[i];
    for (auto it = fixed.begin(); it != fixed.end(); ++it) pt.sets.push_back(assignment(it.key(), it.value()));
    pt.sets.insert(pt.sets.end(), cli_sets.begin(), cli_sets.end());
    for (auto it = pt.overrides.begin(); it != pt.overrides.end(); ++it)
      pt.sets.push_back(assignment(it.key(), it.value()));
    // Points keep result.json only: no timeline, no steps.csv, out_dir per run.
    for (const char* s : {"sim.out_dir=\"\"", "sim.timeline=\"\"", "sim.step_csv=false"}) pt.sets.push_back(s);
    try {
      json cfg = load_config(sw.base_path, pt.sets);
      Simulation sim(cfg);  // validates every component; does not start SimGrid
      pt.config = std::move(cfg);
    } catch (const ConfigError& e) {
      std::string msg = e.what();
      if (!inline_path.empty()) replace_all(msg, inline_path, file + " (inline base)");
      throw ConfigError(file + ": point " + std::to_string(i) + " " + brief_dump(pt.overrides, 200) + ": " + msg);
    }
    pt.key = config_key(pt.config);
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

namespace {

// The signal that asked the sweep to stop (0: none). Children are ended and
// the scratch folder removed by the normal return path.
volatile sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

struct SignalGuard {
  struct sigaction old_int {}, old_term {}, old_hup {};
  SignalGuard() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: waitpid() returns EINTR so the loop sees the signal
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, &sa, &old_hup);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    sigaction(SIGHUP, &old_hup, nullptr);
  }
};

std::string with_extension(const std::string& jsonl, const std::string& ext) {
  const std::string suffix = ".jsonl";
  if (jsonl.size() > suffix.size() && jsonl.compare(jsonl.size() - suffix.size(), suffix.size(), suffix) == 0)
    return jsonl.substr(0, jsonl.size() - suffix.size()) + ext;
  return jsonl + ext;
}

// Scalars of a nested object as "a.b.c" -> value.
void flatten(const json& v, const std::string& prefix, std::map<std::string, json>& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) flatten(v[i], prefix + "." + std::to_string(i), out);
  } else {
    out[prefix] = v;
  }
}

std::string csv_cell(const json& v) {
  std::string s;
  if (v.is_null()) return "";
  if (v.is_string()) {
    s = v.get<std::string>();
  } else {  // numbers in the shortest form that reads back exactly
    s = v.dump();
  }
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// The flat table of a sweep's JSON-lines file: index, key, every override
// path, every metric; one row per line, sorted by index (then key).
std::string sweep_csv(const std::string& jsonl_text) {
  struct Row {
    size_t index;
    std::string key;
    std::map<std::string, json> o, m;
  };
  std::vector<Row> rows;
  std::set<std::string> ocols, mcols;
  std::istringstream in(jsonl_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    Row r;
    r.index = j.value("index", size_t(0));
    r.key = j.value("key", std::string());
    if (j.contains("overrides") && j["overrides"].is_object())
      for (auto it = j["overrides"].begin(); it != j["overrides"].end(); ++it) r.o[it.key()] = it.value();
    if (j.contains("result") && j["result"].is_object() && j["result"].contains("metrics"))
      flatten(j["result"]["metrics"], "", r.m);
    for (const auto& kv : r.o) ocols.insert(kv.first);
    for (const auto& kv : r.m) mcols.insert(kv.first);
    rows.push_back(std::move(r));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.index != b.index ? a.index < b.index : a.key < b.key; });
  std::ostringstream o;
  o << "index,key";
  for (const auto& c : ocols) o << ',' << csv_cell(c);
  for (const auto& c : mcols) o << ',' << csv_cell(c);
  o << '\n';
  for (const auto& r : rows) {
    o << r.index << ',' << r.key;
    for (const auto& c : ocols) {
      auto it = r.o.find(c);
      o << ',' << (it == r.o.end() ? std::string() : csv_cell(it->second.is_structured() ? json(it->second.dump()) : it->second));
    }
    for (const auto& c : mcols) {
      auto it = r.m.find(c);
      o << ',' << (it == r.m.end() ? std::string() : csv_cell(it->second));
    }
    o << '\n';
  }
  return o.str();
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string seconds_text(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%d min %02d s", int(s) / 60, int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%d h %02d min", int(s) / 3600, (int(s) % 3600) / 60);
  return buf;
}

}  // namespace

int run_sweep(const SweepOptions& o) {
  WorkDir work;
  Sweep sw = load_sweep(o.file, o.sets, work.path, o.quiet);
  const bool sharded = o.shards > 1;
  std::string out = o.out;
  if (out.empty())
    out = (fs::path("out") / sw.name /
           (sharded ? "sweep." + std::to_string(o.shard) + "-of-" + std::to_string(o.shards) + ".jsonl"
                    : std::string("sweep.jsonl")))
              .string();
  const std::string csv_path = with_extension(out, ".csv"), manifest_path = with_extension(out, ".manifest.json");

  std::vector<const SweepPoint*> mine;
  for (const auto& p : sw.points)
    if (p.index % o.shards == o.shard) mine.push_back(&p);
  const std::set<std::string> done = done_keys(out, o.quiet);
  LineAppender sink(out);
  std::vector<const SweepPoint*> todo;
  for (const auto* p : mine)
    if (!done.count(p->key)) todo.push_back(p);
  const size_t skipped = mine.size() - todo.size();

  const std::string started = utc_now();
  const auto t_start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count(); };
  // A live progress line on a terminal; nothing per point otherwise.
  const bool live = !o.quiet && ::isatty(STDERR_FILENO);

  // Every child gets the same argv shape; built before fork().
  const std::string self = "/proc/self/exe";
  struct Running {
    const SweepPoint* point;
    std::string dir;
  };
  std::map<pid_t, Running> running;
  const size_t jobs = std::max<size_t>(1, o.jobs ? o.jobs : cpu_count());
  size_t next = 0, finished = 0, failed = 0;
  json failures = json::array();
  SignalGuard signals;
  g_stop_signal = 0;
  const pid_t parent = ::getpid();

  auto progress = [&] {
    if (!live) return;
    const double t = elapsed(), rate = t > 0 ? finished / t : 0;
    std::ostringstream msg;
    msg << "\r\033[Kkvtier: sweep " << sw.name << ": " << finished << "/" << todo.size() << " done";
    if (failed) msg << ", " << failed << " failed";
    msg.precision(2);
    msg << std::fixed << ", " << rate << " points/s, " << seconds_text(t) << " elapsed";
    if (rate > 0 && finished < todo.size()) msg << ", ~" << seconds_text((todo.size() - finished) / rate) << " left";
    std::cerr << msg.str() << std::flush;
  };

  auto launch = [&](const SweepPoint* p) {
    const std::string dir = (fs::path(work.path) / ("p" + std::to_string(p->index))).string();
    fs::create_directories(dir);
    const std::string log = dir + "/log";
    std::vector<std::string> args{"kvtier", "run", sw.base_path};
    for (const auto& s : p->sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    for (const char* a : {"--quiet", "--out"}) args.push_back(a);
    args.push_back(dir + "/out");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::cout.flush();
    std::cerr.flush();
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + strerror(errno));
    if (pid == 0) {
      // The run ends with the sweep, however the sweep ends (even SIGKILL).
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(128 + SIGTERM);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigaction(SIGINT, &dfl, nullptr);
      sigaction(SIGTERM, &dfl, nullptr);
      sigaction(SIGHUP, &dfl, nullptr);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
      ::execv(self.c_str(), argv.data());
      const char msg[] = "kvtier: sweep: cannot exec /proc/self/exe\n";
      ssize_t ignored = ::write(2, msg, sizeof msg - 1);
      (void)ignored;
      ::_exit(127);
    }
    running[pid] = Running{p, dir};
  };

  auto finish = [&](const Running& r, int status) {
    ++finished;
    const SweepPoint& p = *r.point;
    const std::string what = "point " + std::to_string(p.index) + " " + p.overrides.dump();
    std::string why;
    json result;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      try {
        result = json::parse(read_text(r.dir + "/out/result.json"));
      } catch (const json::exception& e) {
        why = std::string("unreadable result.json: ") + e.what();
      }
    } else {
      why = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                              : "killed by signal " + std::to_string(WTERMSIG(status));
      std::string tail = last_line(read_text(r.dir + "/log"));
      if (!tail.empty()) why += ": " + tail;
    }
    if (why.empty()) {
      // The run directory is scratch: normalise it so results are the same
      // wherever the sweep ran.
      if (result.contains("config") && result["config"].contains("sim")) result["config"]["sim"]["out_dir"] = "";
      if (result.contains("config") && config_key(result["config"]) != p.key && !o.quiet)
        std::cerr << (live ? "\r\033[K" : "") << "kvtier: warning: " << what
                  << ": the run's resolved config differs from the validated one\n";
      json line{{"key", p.key}, {"index", p.index}, {"overrides", p.overrides}, {"result", result}};
      sink.append(line.dump() + "\n");
    } else {
      ++failed;
      failures.push_back(json{{"index", p.index}, {"overrides", p.overrides}, {"error", why}});
      std::cerr << (live ? "\r\033[K" : "") << "kvtier: sweep: " << what << " failed (" << why << ")\n";
    }
    progress();
    std::error_code ec;
    fs::remove_all(r.dir, ec);
  };

  progress();
  while (next < todo.size() || !running.empty()) {
    if (g_stop_signal) break;
    while (next < todo.size() && running.size() < jobs && !g_stop_signal) launch(todo[next++]);
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("waitpid failed: ") + strerror(errno));
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    Running r = it->second;
    running.erase(it);
    finish(r, status);
  }
  const int stop = g_stop_signal;
  if (stop) {
    // Interrupted: end the runs in flight and wait for them, so none outlives
    // the sweep; their scratch folders go with the work folder.
    for (const auto& [pid, r] : running) ::kill(pid, SIGTERM);
    for (const auto& [pid, r] : running) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    running.clear();
  }
  if (live) std::cerr << "\n";

  // The flat table and the manifest, rewritten from the whole JSON-lines
  // file (earlier runs' points included).
  const std::string all = read_text(out);
  write_file_atomic(csv_path, sweep_csv(all));
  size_t have = 0;
  {
    std::set<std::string> keys;
    std::istringstream in(all);
    std::string line;
    while (std::getline(in, line)) {
      json j = json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("key") && j["key"].is_string()) keys.insert(j["key"].get<std::string>());
    }
    for (const auto* p : mine) have += keys.count(p->key);
  }
  json manifest = build_provenance();
  manifest["sweep_file"] = o.file;
  manifest["sweep_name"] = sw.name;
  manifest["host"] = host_name();
  manifest["started_utc"] = started;
  manifest["wall_s"] = elapsed();
  manifest["jobs"] = jobs;
  manifest["shard"] = std::to_string(o.shard) + "/" + std::to_string(o.shards);
  manifest["points_total"] = sw.points.size();
  manifest["points_in_shard"] = mine.size();
  manifest["points_done"] = have;
  manifest["points_run"] = finished - failed;
  manifest["points_already_done"] = skipped;
  manifest["points_failed"] = failed;
  manifest["failures"] = failures;
  manifest["interrupted_by_signal"] = stop;
  manifest["jsonl"] = out;
  manifest["csv"] = csv_path;
  manifest["set"] = o.sets;
  write_file_atomic(manifest_path, manifest.dump(2) + "\n");

  if (stop) {
    std::cerr << "kvtier: sweep " << sw.name << ": interrupted by signal " << stop << " after " << finished << " of "
              << todo.size() << " points; re-run to finish (" << out << " keeps every finished point)\n";
    return 128 + stop;
  }
  if (!o.quiet) {
    std::cout << "kvtier: sweep " << sw.name << ": " << sw.points.size() << (sw.points.size() == 1 ? " point" : " points");
    if (sharded) std::cout << ", shard " << o.shard << "/" << o.shards << " has " << mine.size();
    std::cout << "; " << (todo.size() - failed) << " run, " << skipped << " already done, " << failed
              << " failed; results in " << out << ", " << csv_path << "\n";
  }
  return failed ? 1 : 0;
}

}  // namespace kvtier
