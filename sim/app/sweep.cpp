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
#include "sim/app/scratch_dir.h"
#include "sim/app/sweep_output.h"
#include "sim/app/sweep_points.h"
#include "sim/app/sweep_slurm.h"
#include "sim/core/config.h"
#include "sim/core/result.h"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

// One run of a sweep's points (this shard's, those not done yet), each a
// `kvtier run` child process, at most `jobs` at once.
class SweepRun {
 public:
  SweepRun(const SweepOptions& o, const SweepSpace& sp, const SweepPlan& plan, const std::string& work_dir)
      : o_(o), sp_(sp), plan_(plan), work_(work_dir), paths_(output_paths(o.out, sp.name(), o.shard, o.shards)) {
    const std::set<std::string> done = done_keys(paths_.jsonl, /*cut=*/true, o_.quiet);
    sink_ = std::make_unique<LineAppender>(paths_.jsonl);
    for (const auto& p : plan_.mine)
      if (!done.count(key_text(p.key))) todo_.push_back(p);
    skipped_ = plan_.mine.size() - todo_.size();
    jobs_ = std::max<size_t>(1, o_.jobs ? o_.jobs : cpu_count());
    live_ = !o_.quiet && ::isatty(STDERR_FILENO);  // a live progress line on a terminal; nothing per point otherwise
  }

  // Runs every point to do; the stop signal that interrupted it (0: none).
  int run() {
    StopSignals signals;
    progress();
    while (next_ < todo_.size() || !running_.empty()) {
      if (signals.received()) break;
      while (next_ < todo_.size() && running_.size() < jobs_ && !signals.received())
        launch(sweep_point(sp_, todo_[next_++]));
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
    write_file_atomic(paths_.csv, sweep_csv(paths_.jsonl));
    json manifest = manifest_head(o_.file, sp_.name(), started_, elapsed());
    manifest["jobs"] = jobs_;
    manifest["shard"] = std::to_string(o_.shard) + "/" + std::to_string(o_.shards);
    manifest["points_total"] = plan_.total - plan_.duplicates;
    manifest["points_in_shard"] = plan_.mine.size();
    manifest["points_done"] = points_done();
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
      std::cerr << "kvtier: sweep " << sp_.name() << ": interrupted by signal " << stop << " after " << finished_
                << " of " << todo_.size() << " points; re-run to finish (" << paths_.jsonl
                << " keeps every finished point)\n";
      return 128 + stop;
    }
    if (!o_.quiet) {
      const size_t n = plan_.total - plan_.duplicates;
      std::cout << "kvtier: sweep " << sp_.name() << ": " << n << (n == 1 ? " point" : " points");
      if (o_.shards > 1) std::cout << ", shard " << o_.shard << "/" << o_.shards << " has " << plan_.mine.size();
      std::cout << "; " << (todo_.size() - failed_) << " run, " << skipped_ << " already done, " << failed_
                << " failed; results in " << paths_.jsonl << ", " << paths_.csv << "\n";
    }
    return failed_ ? 1 : 0;
  }

 private:
  struct Running {
    SweepPoint point;
    std::string dir;
  };

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start_).count();
  }

  void progress() const {
    if (!live_) return;
    const double t = elapsed(), rate = t > 0 ? finished_ / t : 0;
    std::ostringstream msg;
    msg << "\r\033[Kkvtier: sweep " << sp_.name() << ": " << finished_ << "/" << todo_.size() << " done";
    if (failed_) msg << ", " << failed_ << " failed";
    msg.precision(2);
    msg << std::fixed << ", " << rate << " points/s, " << seconds_text(t) << " elapsed";
    if (rate > 0 && finished_ < todo_.size()) msg << ", ~" << seconds_text((todo_.size() - finished_) / rate) << " left";
    std::cerr << msg.str() << std::flush;
  }

  // The point as `kvtier run BASE --set ... --quiet --out DIR/out`, its
  // output to DIR/log; it ends with the sweep, however the sweep ends.
  void launch(SweepPoint p) {
    const std::string dir = (fs::path(work_) / ("p" + std::to_string(p.index))).string();
    fs::create_directories(dir);
    std::vector<std::string> args{"kvtier", "run", sp_.base_path()};
    for (const auto& s : p.sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    for (const char* a : {"--quiet", "--out"}) args.push_back(a);
    args.push_back(dir + "/out");
    SpawnOptions so;
    so.exe = "/proc/self/exe";
    so.log = dir + "/log";
    so.end_with_parent = true;
    running_[spawn(args, so)] = Running{std::move(p), dir};
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
    const SweepPoint& p = r.point;
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

  // This shard's points in the output file now.
  size_t points_done() const {
    const std::set<std::string> have = done_keys(paths_.jsonl, /*cut=*/false, /*quiet=*/true);
    size_t n = 0;
    for (const auto& p : plan_.mine) n += have.count(key_text(p.key));
    return n;
  }

  const SweepOptions& o_;
  const SweepSpace& sp_;
  const SweepPlan& plan_;
  const std::string work_;
  const OutputPaths paths_;
  std::vector<SweepPlan::Point> todo_;
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

// --dry-run: what would run, after every point is validated; nothing is
// run or written.
int report_plan(const SweepOptions& o, const SweepSpace& space, const SweepPlan& plan) {
  if (o.quiet) return 0;
  const size_t n = plan.total - plan.duplicates;
  std::cout << "kvtier: sweep " << space.name() << ": " << n << (n == 1 ? " point" : " points") << " valid";
  if (plan.duplicates) std::cout << " (" << plan.duplicates << " more repeat one of them)";
  if (o.shards > 1) std::cout << ", shard " << o.shard << "/" << o.shards << " has " << plan.mine.size();
  std::cout << "; " << plan.constructed << " configurations constructed to validate them; nothing run (--dry-run)\n";
  return 0;
}

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
  if (o.slurm.on) return run_slurm_sweep(o);
  ScratchDir work;
  const SweepSpace space(o.file, o.sets, work.path);
  const SweepPlan plan = plan_sweep(space, o.shard, o.shards, o.quiet);
  if (o.dry_run) return report_plan(o, space, plan);
  SweepRun run(o, space, plan, work.path);
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
