#include "sim/app/sweep_slurm.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "sim/app/process.h"
#include "sim/app/scratch_dir.h"
#include "sim/app/sweep_output.h"
#include "sim/app/sweep_points.h"
#include "sim/core/config.h"
#include "sim/core/result.h"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

// Slurm's default MaxArraySize is 1001: task ids 0..1000.
constexpr unsigned kMaxTasks = 1000;
constexpr unsigned kDefaultTasks = 100;
// squeue failing this many times in a row (the controller unreachable) ends the following.
constexpr int kMaxQueueErrors = 12;

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A job name Slurm and a shell take as it is.
std::string job_name(const std::string& sweep) {
  std::string n = "kvtier-" + sweep;
  for (char& c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return n.substr(0, 64);
}

// 0-3,5,7-9: task ids in ranges, as --array takes them.
std::string ranges(const std::vector<unsigned>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    s += (s.empty() ? "" : ",") + std::to_string(ids[i]) + (j > i ? "-" + std::to_string(ids[j]) : "");
    i = j + 1;
  }
  return s;
}

// Runs a Slurm command to the end; its exit status and what it printed.
int capture(const std::vector<std::string>& argv, const std::string& scratch, std::string& out) {
  const std::string log = (fs::path(scratch) / "slurm-command.log").string();
  SpawnOptions so;
  so.search_path = true;
  so.log = log;
  so.exec_error = "kvtier: cannot run " + argv[0] + "\n";
  int status = 0;
  wait_for(spawn(argv, so), status);
  out = read_text(log);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && out.find("cannot run") != std::string::npos)
    throw ConfigError("--slurm: " + argv[0] + " not found (a Slurm client: Debian's slurm-client, or slurm-wlm)");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// The job a sweep submitted, recorded in FILE.slurm/job.json.
struct JobRecord {
  std::string id;         // "" when none was submitted
  unsigned tasks = 0;     // the shards (N of --shard I/N)
  std::string submitted;  // UTC
};

JobRecord read_record(const std::string& path) {
  JobRecord r;
  std::error_code ec;
  if (!fs::exists(path, ec)) return r;
  const json j = json::parse(read_text(path), nullptr, false);
  if (!j.is_object() || !j.contains("job_id") || !j["job_id"].is_string() || !j.contains("tasks") ||
      !j["tasks"].is_number_unsigned() || j["tasks"].get<unsigned>() == 0 || j["tasks"].get<unsigned>() > kMaxTasks)
    throw ConfigError(path + ": not a sweep's Slurm job record (expected job_id and tasks; remove the file to start over)");
  r.id = j["job_id"].get<std::string>();
  r.tasks = j["tasks"].get<unsigned>();
  r.submitted = j.value("submitted_utc", "");
  return r;
}

// The JSON-lines file of shard `i` of `n`.
std::string shard_file(const std::string& dir, unsigned i, unsigned n) {
  return (fs::path(dir) / ("sweep." + std::to_string(i) + "-of-" + std::to_string(n) + ".jsonl")).string();
}

class SlurmSweep {
 public:
  SlurmSweep(const SweepOptions& o, const SweepSpace& sp, const SweepPlan& plan, const std::string& scratch)
      : o_(o), sp_(sp), plan_(plan), scratch_(scratch), paths_(output_paths(o.out, sp.name(), 0, 1)),
        dir_(with_extension(paths_.jsonl, ".slurm")), record_path_((fs::path(dir_) / "job.json").string()) {
    for (const auto& p : plan_.mine) planned_.insert(key_text(p.key));
    record_ = read_record(record_path_);
    tasks_ = record_.tasks ? record_.tasks
                           : std::min<size_t>(o_.slurm.tasks ? o_.slurm.tasks : kDefaultTasks, plan_.mine.size());
    tasks_ = std::max(1u, std::min(tasks_, kMaxTasks));
    live_ = !o_.quiet && ::isatty(STDERR_FILENO);
  }

  int run();

 private:
  std::vector<unsigned> shards_to_run() const;
  std::string script(const std::vector<unsigned>& shards) const;
  void submit(const std::vector<unsigned>& shards);
  bool job_alive(int& errors) const;
  void merge();
  size_t failed_in_shards() const;
  int follow();
  void write_tables(int stop) const;
  int report(int stop) const;
  void progress(size_t failed) const;

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

  const SweepOptions& o_;
  const SweepSpace& sp_;
  const SweepPlan& plan_;
  const std::string scratch_;
  const OutputPaths paths_;
  const std::string dir_, record_path_;
  std::set<std::string> planned_;          // the keys of every point that runs
  JobRecord record_;
  unsigned tasks_ = 1;
  std::set<std::string> done_;             // keys in sweep.jsonl
  std::map<std::string, uint64_t> read_;   // shard file -> bytes merged from it
  std::unique_ptr<LineAppender> sink_;
  size_t already_ = 0, merged_ = 0, at_start_ = 0;
  bool live_ = false;
  const std::string started_ = utc_now();
  const std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// The shards that still have points to run.
std::vector<unsigned> SlurmSweep::shards_to_run() const {
  std::set<unsigned> s;
  for (const auto& p : plan_.mine)
    if (!done_.count(key_text(p.key))) s.insert(static_cast<unsigned>(p.index % tasks_));
  return {s.begin(), s.end()};
}

std::string SlurmSweep::script(const std::vector<unsigned>& shards) const {
  const SlurmOptions& s = o_.slurm;
  const std::string n = std::to_string(tasks_), dir = fs::absolute(dir_).string();
  std::ostringstream o;
  o << "#!/bin/bash\n# kvtier sweep " << sp_.name() << ": " << plan_.mine.size() << " points in " << n
    << " shards, one array task each (docs/sweep.md)\n";
  o << "#SBATCH --job-name=" << job_name(sp_.name()) << "\n";
  o << "#SBATCH --array=" << ranges(shards) << (s.array_max ? "%" + std::to_string(s.array_max) : "") << "\n";
  o << "#SBATCH --cpus-per-task=" << s.cpus_per_task << "\n";
  if (!s.partition.empty()) o << "#SBATCH --partition=" << s.partition << "\n";
  if (!s.time.empty()) o << "#SBATCH --time=" << s.time << "\n";
  o << "#SBATCH --chdir=" << fs::current_path().string() << "\n";
  o << "#SBATCH --output=" << dir << "/logs/%A_%a.out\n";
  o << "exec " << shell_quote(self_exe()) << " sweep " << shell_quote(fs::absolute(o_.file).string())
    << " --shard \"$SLURM_ARRAY_TASK_ID\"/" << n << " --jobs " << s.cpus_per_task << " --out " << shell_quote(dir)
    << "/sweep.\"$SLURM_ARRAY_TASK_ID\"-of-" << n << ".jsonl --quiet";
  for (const auto& set : o_.sets) o << " --set " << shell_quote(set);
  o << "\n";
  return o.str();
}

void SlurmSweep::submit(const std::vector<unsigned>& shards) {
  fs::create_directories(fs::path(dir_) / "logs");
  const std::string file = (fs::path(dir_) / "job.sh").string();
  write_file_atomic(file, script(shards));
  std::string out;
  const int rc = capture({"sbatch", "--parsable", file}, scratch_, out);
  const std::string id = last_line(out).substr(0, last_line(out).find(';'));
  if (rc != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw ConfigError("--slurm: sbatch " + file + " failed: " + (last_line(out).empty() ? "exit " + std::to_string(rc) : last_line(out)));
  record_ = JobRecord{id, tasks_, utc_now()};
  json j{{"job_id", id}, {"tasks", tasks_}, {"submitted_utc", record_.submitted}, {"array", ranges(shards)},
         {"sweep_file", o_.file}};
  write_file_atomic(record_path_, j.dump(2) + "\n");
  if (!o_.quiet)
    std::cerr << "kvtier: sweep " << sp_.name() << ": submitted Slurm job " << id << " (" << shards.size() << " of "
              << tasks_ << " shards; " << file << ")\n";
}

// Whether the recorded job still has tasks pending or running. `errors`
// counts squeue's failures in a row (a controller that does not answer).
bool SlurmSweep::job_alive(int& errors) const {
  if (record_.id.empty()) return false;
  std::string out;
  const int rc = capture({"squeue", "--noheader", "--jobs", record_.id, "--format", "%i"}, scratch_, out);
  if (rc != 0) {
    if (out.find("Invalid job id") != std::string::npos) return false;  // finished and forgotten
    if (++errors >= kMaxQueueErrors)
      throw ConfigError("--slurm: squeue --jobs " + record_.id + " failed " + std::to_string(errors) +
                        " times: " + last_line(out) + "; re-run the same command to follow the job");
    return true;
  }
  errors = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, record_.id.size(), record_.id) == 0) return true;
  return false;
}

// Appends to sweep.jsonl every whole line of the shards' files whose point
// is not there yet: each point once, whichever shard (or earlier job) ran it.
void SlurmSweep::merge() {
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().string();
    if (it->path().extension() != ".jsonl") continue;
    std::ifstream in(f, std::ios::binary);
    uint64_t& at = read_[f];
    in.seekg(static_cast<std::streamoff>(at));
    std::string line;
    while (std::getline(in, line) && !in.eof()) {
      at += line.size() + 1;
      const json j = json::parse(line, nullptr, false);
      if (!j.is_object() || !j.contains("key") || !j["key"].is_string()) continue;
      const std::string key = j["key"].get<std::string>();
      if (!planned_.count(key) || done_.count(key)) continue;  // another sweep's point, or merged already
      sink_->append(line + "\n");
      done_.insert(key);
      ++merged_;
    }
  }
}

// Points the shards of this job reported failed (their manifests, written
// when a task ends).
size_t SlurmSweep::failed_in_shards() const {
  size_t failed = 0;
  for (unsigned i = 0; i < tasks_; ++i) {
    const std::string m = with_extension(shard_file(dir_, i, tasks_), ".manifest.json");
    const json j = json::parse(read_text(m), nullptr, false);
    if (j.is_object() && j.value("started_utc", "") >= record_.submitted) failed += j.value("points_failed", size_t(0));
  }
  return failed;
}

void SlurmSweep::progress(size_t failed) const {
  if (!live_) return;
  const size_t total = plan_.mine.size(), now = done_.size();
  const double t = elapsed(), rate = t > 0 ? (now - at_start_) / t : 0;
  std::ostringstream msg;
  msg << "\r\033[Kkvtier: sweep " << sp_.name() << " (Slurm job " << record_.id << "): " << now << "/" << total
      << " done";
  if (failed) msg << ", " << failed << " failed";
  msg << ", " << seconds_text(t) << " elapsed";
  if (rate > 0 && now < total) msg << ", ~" << seconds_text((total - now) / rate) << " left";
  std::cerr << msg.str() << std::flush;
}

// Follows the job until none of its tasks is left, merging as points land;
// the stop signal that ended the following (0: the job ended).
int SlurmSweep::follow() {
  StopSignals signals;
  int errors = 0;
  while (true) {
    merge();
    progress(failed_in_shards());
    if (!job_alive(errors)) break;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(o_.slurm.poll_s);
    while (!signals.received() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (signals.received()) break;
  }
  merge();  // what the last tasks wrote
  if (live_) std::cerr << "\n";
  return signals.received();
}

void SlurmSweep::write_tables(int stop) const {
  write_file_atomic(paths_.csv, sweep_csv(paths_.jsonl));
  json manifest = manifest_head(o_.file, sp_.name(), started_, elapsed());
  manifest["engine"] = "slurm";
  manifest["slurm_job"] = record_.id;
  manifest["slurm_tasks"] = tasks_;
  manifest["jobs"] = o_.slurm.cpus_per_task;
  manifest["shard"] = "0/1";
  manifest["points_total"] = plan_.mine.size();
  manifest["points_in_shard"] = plan_.mine.size();
  manifest["points_done"] = done_.size();
  manifest["points_run"] = merged_;
  manifest["points_already_done"] = already_;
  manifest["points_failed"] = plan_.mine.size() - done_.size();
  json failures = json::array();
  for (const auto& p : plan_.mine)
    if (!done_.count(key_text(p.key)) && failures.size() < 1000)
      failures.push_back(json{{"index", p.index}, {"overrides", sp_.overrides(p.index)},
                              {"error", stop ? "not run: the sweep was interrupted" : "no result from its Slurm task"}});
  manifest["failures"] = failures;
  manifest["interrupted_by_signal"] = stop;
  manifest["jsonl"] = paths_.jsonl;
  manifest["csv"] = paths_.csv;
  manifest["set"] = o_.sets;
  write_file_atomic(paths_.manifest, manifest.dump(2) + "\n");
}

int SlurmSweep::report(int stop) const {
  const size_t total = plan_.mine.size(), missing = total - done_.size();
  if (stop) {
    std::cerr << "kvtier: sweep " << sp_.name() << ": stopped following Slurm job " << record_.id << " (signal " << stop
              << ") with " << done_.size() << " of " << total << " points in " << paths_.jsonl
              << "; the job goes on (scancel " << record_.id
              << " ends it); the same command follows it again and merges the rest\n";
    return 128 + stop;
  }
  if (missing)
    std::cerr << "kvtier: sweep " << sp_.name() << ": " << missing << " of " << total
              << " points have no result (failed, or their tasks were cancelled; logs in " << dir_
              << "/logs); the same command submits them again\n";
  if (!o_.quiet)
    std::cout << "kvtier: sweep " << sp_.name() << ": " << total << (total == 1 ? " point" : " points") << "; "
              << merged_ << " run on Slurm" << (record_.id.empty() ? "" : " (job " + record_.id + ")") << ", "
              << already_ << " already done, " << missing << " failed; results in " << paths_.jsonl << ", "
              << paths_.csv << "\n";
  return missing ? 1 : 0;
}

int SlurmSweep::run() {
  if (o_.dry_run) {  // the script that would be submitted; nothing written
    done_ = done_keys(paths_.jsonl, /*cut=*/false, /*quiet=*/true);
    const auto shards = shards_to_run();
    if (shards.empty()) std::cout << "# kvtier sweep " << sp_.name() << ": every point is done; nothing to submit\n";
    else std::cout << script(shards);
    return 0;
  }
  done_ = done_keys(paths_.jsonl, /*cut=*/true, o_.quiet);
  sink_ = std::make_unique<LineAppender>(paths_.jsonl);
  fs::create_directories(dir_);
  merge();  // what an earlier job left
  already_ = done_.size();
  merged_ = 0;
  int errors = 0;
  if (!job_alive(errors)) {
    const auto shards = shards_to_run();
    if (!shards.empty()) submit(shards);
  } else if (!o_.quiet) {
    std::cerr << "kvtier: sweep " << sp_.name() << ": following Slurm job " << record_.id << ", still running\n";
  }
  at_start_ = done_.size();
  const int stop = record_.id.empty() ? 0 : follow();
  write_tables(stop);
  return report(stop);
}

}  // namespace

int run_slurm_sweep(const SweepOptions& o) {
  if (o.shards > 1) throw ConfigError("--slurm: --shard is what the job array does; give one or the other");
  // They go into #SBATCH lines of the script as they are.
  for (const auto& [opt, v] : {std::pair<const char*, const std::string&>{"--partition", o.slurm.partition},
                               std::pair<const char*, const std::string&>{"--time", o.slurm.time}})
    if (v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,:-") != std::string::npos)
      throw ConfigError(std::string(opt) + " '" + v + "': expected a Slurm " + (opt[2] == 'p' ? "partition name" : "time limit such as 2:00:00") +
                        " (letters, digits, _ . , : -)");
  ScratchDir work;
  const SweepSpace space(o.file, o.sets, work.path);
  const SweepPlan plan = plan_sweep(space, 0, 1, o.quiet);
  SlurmSweep sweep(o, space, plan, work.path);
  return sweep.run();
}

}  // namespace kvtier
