#include "sim/app/sweep.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "sim/app/process.h"
#include "sim/core/config.h"
#include "sim/core/result.h"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

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
// A result line that could not be written (a full disk): the sweep stops
// there, keeping what it wrote.
struct WriteFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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
      throw WriteFailed(path_ + ": write failed: " + strerror(err));
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
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

std::string seconds_text(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%d min %02d s", int(s) / 60, int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%d h %02d min", int(s) / 3600, (int(s) % 3600) / 60);
  return buf;
}


// The output files of one sweep run.
struct OutputPaths {
  std::string jsonl, csv, manifest;
};

OutputPaths output_paths(const SweepOptions& o, const std::string& sweep_name) {
  OutputPaths p;
  p.jsonl = o.out;
  if (p.jsonl.empty())
    p.jsonl = (fs::path("out") / sweep_name /
               (o.shards > 1 ? "sweep." + std::to_string(o.shard) + "-of-" + std::to_string(o.shards) + ".jsonl"
                             : std::string("sweep.jsonl")))
                  .string();
  p.csv = with_extension(p.jsonl, ".csv");
  p.manifest = with_extension(p.jsonl, ".manifest.json");
  return p;
}

// How many of `mine` the JSON-lines text holds.
size_t points_in(const std::string& jsonl_text, const std::vector<const SweepPoint*>& mine) {
  std::set<std::string> keys;
  std::istringstream in(jsonl_text);
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("key") && j["key"].is_string()) keys.insert(j["key"].get<std::string>());
  }
  size_t have = 0;
  for (const auto* p : mine) have += keys.count(p->key);
  return have;
}

// One run of a sweep's points (this shard's, those not done yet), each a
// `kvtier run` child process, at most `jobs` at once.
class SweepRun {
 public:
  SweepRun(const SweepOptions& o, const Sweep& sw, const std::string& work_dir)
      : o_(o), sw_(sw), work_(work_dir), paths_(output_paths(o, sw.name)) {
    for (const auto& p : sw_.points)
      if (p.index % o_.shards == o_.shard) mine_.push_back(&p);
    const std::set<std::string> done = done_keys(paths_.jsonl, o_.quiet);
    sink_ = std::make_unique<LineAppender>(paths_.jsonl);
    for (const auto* p : mine_)
      if (!done.count(p->key)) todo_.push_back(p);
    skipped_ = mine_.size() - todo_.size();
    jobs_ = std::max<size_t>(1, o_.jobs ? o_.jobs : cpu_count());
    live_ = !o_.quiet && ::isatty(STDERR_FILENO);  // a live progress line on a terminal; nothing per point otherwise
  }

  // Runs every point to do; the stop signal that interrupted it (0: none).
  int run() {
    StopSignals signals;
    progress();
    while (next_ < todo_.size() || !running_.empty()) {
      if (signals.received()) break;
      while (next_ < todo_.size() && running_.size() < jobs_ && !signals.received()) launch(todo_[next_++]);
      int status = 0;
      const pid_t pid = wait_any(status);
      if (pid < 0) continue;
      auto it = running_.find(pid);
      if (it == running_.end()) continue;
      Running r = it->second;
      running_.erase(it);
      try {
        finish(r, status);
      } catch (const WriteFailed& e) {
        write_error_ = e.what();
        break;
      }
    }
    const int stop = signals.received();
    if (stop || !write_error_.empty()) end_running();
    if (live_) std::cerr << "\n";
    return stop;
  }

  // The flat table and the manifest, rewritten from the whole JSON-lines
  // file (earlier runs' points included).
  void write_tables(int stop) const {
    const std::string all = read_text(paths_.jsonl);
    write_file_atomic(paths_.csv, sweep_csv(all));
    json manifest = build_provenance();
    manifest["sweep_file"] = o_.file;
    manifest["sweep_name"] = sw_.name;
    manifest["host"] = host_name();
    manifest["started_utc"] = started_;
    manifest["wall_s"] = elapsed();
    manifest["jobs"] = jobs_;
    manifest["shard"] = std::to_string(o_.shard) + "/" + std::to_string(o_.shards);
    manifest["points_total"] = sw_.points.size();
    manifest["points_in_shard"] = mine_.size();
    manifest["points_done"] = points_in(all, mine_);
    manifest["points_run"] = finished_ - failed_;
    manifest["points_already_done"] = skipped_;
    manifest["points_failed"] = failed_;
    manifest["failures"] = failures_;
    manifest["interrupted_by_signal"] = stop;
    manifest["jsonl"] = paths_.jsonl;
    manifest["csv"] = paths_.csv;
    manifest["set"] = o_.sets;
    write_file_atomic(paths_.manifest, manifest.dump(2) + "\n");
  }

  // A result that could not be written ended the sweep: what it kept.
  const std::string& write_error() const { return write_error_; }
  size_t points_kept() const { return written_; }

  // The last words on stdout (or stderr when interrupted); the exit status.
  int report(int stop) const {
    if (stop) {
      std::cerr << "kvtier: sweep " << sw_.name << ": interrupted by signal " << stop << " after " << finished_
                << " of " << todo_.size() << " points; re-run to finish (" << paths_.jsonl
                << " keeps every finished point)\n";
      return 128 + stop;
    }
    if (!o_.quiet) {
      std::cout << "kvtier: sweep " << sw_.name << ": " << sw_.points.size()
                << (sw_.points.size() == 1 ? " point" : " points");
      if (o_.shards > 1) std::cout << ", shard " << o_.shard << "/" << o_.shards << " has " << mine_.size();
      std::cout << "; " << (todo_.size() - failed_) << " run, " << skipped_ << " already done, " << failed_
                << " failed; results in " << paths_.jsonl << ", " << paths_.csv << "\n";
    }
    return failed_ ? 1 : 0;
  }

 private:
  struct Running {
    const SweepPoint* point;
    std::string dir;
  };

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start_).count();
  }

  void progress() const {
    if (!live_) return;
    const double t = elapsed(), rate = t > 0 ? finished_ / t : 0;
    std::ostringstream msg;
    msg << "\r\033[Kkvtier: sweep " << sw_.name << ": " << finished_ << "/" << todo_.size() << " done";
    if (failed_) msg << ", " << failed_ << " failed";
    msg.precision(2);
    msg << std::fixed << ", " << rate << " points/s, " << seconds_text(t) << " elapsed";
    if (rate > 0 && finished_ < todo_.size()) msg << ", ~" << seconds_text((todo_.size() - finished_) / rate) << " left";
    std::cerr << msg.str() << std::flush;
  }

  // The point as `kvtier run BASE --set ... --quiet --out DIR/out`, its
  // output to DIR/log; it ends with the sweep, however the sweep ends.
  void launch(const SweepPoint* p) {
    const std::string dir = (fs::path(work_) / ("p" + std::to_string(p->index))).string();
    fs::create_directories(dir);
    std::vector<std::string> args{"kvtier", "run", sw_.base_path};
    for (const auto& s : p->sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    for (const char* a : {"--quiet", "--out"}) args.push_back(a);
    args.push_back(dir + "/out");
    SpawnOptions so;
    so.exe = "/proc/self/exe";
    so.log = dir + "/log";
    so.end_with_parent = true;
    running_[spawn(args, so)] = Running{p, dir};
  }

  // The point's result.json, or why there is none ("" with a result).
  static std::string outcome(const Running& r, int status, json& result) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      try {
        result = json::parse(read_text(r.dir + "/out/result.json"));
      } catch (const json::exception& e) {
        return std::string("unreadable result.json: ") + e.what();
      }
      return "";
    }
    std::string why = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                        : "killed by signal " + std::to_string(WTERMSIG(status));
    std::string tail = tail_of(r.dir + "/log");
    if (!tail.empty()) why += ": " + tail;
    return why;
  }

  void finish(const Running& r, int status) {
    ++finished_;
    const SweepPoint& p = *r.point;
    const std::string what = "point " + std::to_string(p.index) + " " + p.overrides.dump();
    json result;
    const std::string why = outcome(r, status, result);
    if (why.empty()) {
      // The run directory is scratch: normalise it so results are the same
      // wherever the sweep ran.
      if (result.contains("config") && result["config"].contains("sim")) result["config"]["sim"]["out_dir"] = "";
      if (result.contains("config") && config_key(result["config"]) != p.key && !o_.quiet)
        std::cerr << (live_ ? "\r\033[K" : "") << "kvtier: warning: " << what
                  << ": the run's resolved config differs from the validated one\n";
      json line{{"key", p.key}, {"index", p.index}, {"overrides", p.overrides}, {"result", result}};
      sink_->append(line.dump() + "\n");
      ++written_;
    } else {
      ++failed_;
      failures_.push_back(json{{"index", p.index}, {"overrides", p.overrides}, {"error", why}});
      std::cerr << (live_ ? "\r\033[K" : "") << "kvtier: sweep: " << what << " failed (" << why << ")\n";
    }
    progress();
    std::error_code ec;
    fs::remove_all(r.dir, ec);
  }

  // Interrupted: end the runs in flight and wait for them, so none outlives
  // the sweep; their scratch folders go with the work folder.
  void end_running() {
    for (const auto& [pid, r] : running_) ::kill(pid, SIGTERM);
    for (const auto& [pid, r] : running_) {
      int status = 0;
      wait_for(pid, status);
    }
    running_.clear();
  }

  const SweepOptions& o_;
  const Sweep& sw_;
  const std::string work_;
  const OutputPaths paths_;
  std::vector<const SweepPoint*> mine_, todo_;
  size_t skipped_ = 0, jobs_ = 1, next_ = 0, finished_ = 0, failed_ = 0;
  std::unique_ptr<LineAppender> sink_;
  std::map<pid_t, Running> running_;
  json failures_ = json::array();
  const std::string started_ = utc_now();
  const std::chrono::steady_clock::time_point t_start_ = std::chrono::steady_clock::now();
  bool live_ = false;
  std::string write_error_;  // the write that stopped the sweep, if one did
  size_t written_ = 0;       // result lines this run appended
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

int run_sweep(const SweepOptions& o) {
  WorkDir work;
  Sweep sw = load_sweep(o.file, o.sets, work.path, o.quiet);
  SweepRun run(o, sw, work.path);
  const int stop = run.run();
  if (!run.write_error().empty()) {
    // The points written before the failure stay in sweep.jsonl (a re-run
    // skips them); the tables are written for them if the disk lets us.
    std::string tables = "; the CSV and manifest list them";
    try {
      run.write_tables(stop);
    } catch (const std::exception& e) {
      tables = "; the CSV and manifest could not be written either (" + std::string(e.what()) + ")";
    }
    throw ConfigError(run.write_error() + "; the sweep stopped with " + std::to_string(run.points_kept()) +
                      " finished points kept" + tables + "; free space and re-run to finish");
  }
  run.write_tables(stop);
  return run.report(stop);
}

}  // namespace kvtier
