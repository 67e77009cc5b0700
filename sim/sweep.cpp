#include "sim/sweep.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "sim/config.h"
#include "sim/engine.h"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kSweepKeys{"name", "base", "set", "grid", "points", "seed"};

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

// Removes the scratch folder however the sweep ends (short of a kill).
struct WorkDir {
  std::string path;
  WorkDir() {
    std::string tmpl = (fs::temp_directory_path() / "kvtier-sweep-XXXXXX").string();
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
                      (hint.empty() ? " (expected base, set, grid, points, seed, name)"
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
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].contains("sim.seed"))
        throw ConfigError(file + ": " + grid_path("points[" + std::to_string(i) + "]", "sim.seed") +
                          ": also given as seed");
  }
  if (seeds.empty()) seeds.push_back(json());

  // Expand: each point entry x the grid (keys in sorted order, the last
  // varying fastest) x the seeds.
  std::vector<json> overrides;
  for (const auto& e : entries) {
    std::vector<size_t> at(gk.size(), 0);
    while (true) {
      json o = e;
      for (size_t k = 0; k < gk.size(); ++k) o[gk[k]] = (*gv[k])[at[k]];
      for (const auto& s : seeds) {
        json os = o;
        if (!s.is_null()) os["sim.seed"] = s;
        overrides.push_back(std::move(os));
      }
      size_t k = gk.size();
      while (k > 0 && ++at[k - 1] == gv[k - 1]->size()) at[--k] = 0;
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
      throw ConfigError(file + ": point " + std::to_string(i) + " " + pt.overrides.dump() + ": " + msg);
    }
    pt.key = config_key(pt.config);
    auto [it, fresh] = first.emplace(pt.key, i);
    if (!fresh) {
      if (!quiet)
        std::cerr << "kvtier: note: " << file << ": point " << i << " " << pt.overrides.dump()
                  << " resolves to the same configuration as point " << it->second << "; it runs once\n";
      continue;
    }
    sw.points.push_back(std::move(pt));
  }
  return sw;
}

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

  std::vector<const SweepPoint*> mine;
  for (const auto& p : sw.points)
    if (p.index % o.shards == o.shard) mine.push_back(&p);
  const std::set<std::string> done = done_keys(out, o.quiet);
  LineAppender sink(out);
  std::vector<const SweepPoint*> todo;
  for (const auto* p : mine)
    if (!done.count(p->key)) todo.push_back(p);
  const size_t skipped = mine.size() - todo.size();

  // Every child gets the same argv shape; built before fork().
  const std::string self = "/proc/self/exe";
  struct Running {
    const SweepPoint* point;
    std::string dir;
    std::chrono::steady_clock::time_point start;
  };
  std::map<pid_t, Running> running;
  const size_t jobs = std::max<size_t>(1, o.jobs ? o.jobs : cpu_count());
  size_t next = 0, finished = 0, failed = 0;

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
    running[pid] = Running{p, dir, std::chrono::steady_clock::now()};
  };

  auto finish = [&](const Running& r, int status) {
    ++finished;
    const SweepPoint& p = *r.point;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count();
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
        std::cerr << "kvtier: warning: " << what << ": the run's resolved config differs from the validated one\n";
      json line{{"key", p.key}, {"index", p.index}, {"overrides", p.overrides}, {"result", result}};
      sink.append(line.dump() + "\n");
      if (!o.quiet) {
        std::ostringstream msg;
        msg << "kvtier: sweep: [" << finished << "/" << todo.size() << "] " << what;
        const json& m = result.value("metrics", json::object());
        if (m.contains("decode_tokens_per_s") && m["decode_tokens_per_s"].is_number())
          msg << ": " << m["decode_tokens_per_s"].get<double>() << " tokens/s";
        msg << " (" << std::fixed;
        msg.precision(2);
        msg << secs << " s)\n";
        std::cerr << msg.str();
      }
    } else {
      ++failed;
      std::cerr << "kvtier: sweep: [" << finished << "/" << todo.size() << "] " << what << " failed (" << why << ")\n";
    }
    std::error_code ec;
    fs::remove_all(r.dir, ec);
  };

  while (next < todo.size() || !running.empty()) {
    while (next < todo.size() && running.size() < jobs) launch(todo[next++]);
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

  if (!o.quiet) {
    std::cout << "kvtier: sweep " << sw.name << ": " << sw.points.size() << (sw.points.size() == 1 ? " point" : " points");
    if (sharded) std::cout << ", shard " << o.shard << "/" << o.shards << " has " << mine.size();
    std::cout << "; " << (todo.size() - failed) << " run, " << skipped << " already done, " << failed
              << " failed; results in " << out << "\n";
  }
  return failed ? 1 : 0;
}

}  // namespace kvtier
