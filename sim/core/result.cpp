#include "sim/core/result.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>


#include "git_commit.h"

namespace kvtier {

void write_file_atomic(const std::string& path, const std::string& content) {
  namespace fs = std::filesystem;
  fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec) throw ConfigError(p.parent_path().string() + ": cannot create directory: " + ec.message());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw ConfigError(path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw ConfigError(path + ": could not rename the finished file into place");
  }
}

json build_provenance() {
  return json{{"kvtier_version", KVTIER_VERSION},
              {"git_commit", KVTIER_GIT_COMMIT},
              {"simgrid_version", KVTIER_SIMGRID_VERSION}};
}

json make_result(const json& cfg, const json& metrics) {
  json r;
  r["kvtier_version"] = KVTIER_VERSION;
  r["provenance"] = build_provenance();
  r["seed"] = cfg["sim"]["seed"];
  r["config"] = cfg;
  r["metrics"] = metrics;
  return r;
}

namespace {

// The nearest existing folder at or above `p`, which must be writable for
// `p` to be created; throws naming `what` if an ancestor is a file.
void check_creatable(const std::filesystem::path& p, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path at = fs::absolute(p, ec);
  while (!at.empty() && !fs::exists(at, ec)) {
    if (at == at.parent_path()) break;
    at = at.parent_path();
  }
  if (!fs::is_directory(at, ec))
    throw ConfigError(what + ": " + at.string() + " is a file, not a folder");
  if (::access(at.c_str(), W_OK | X_OK) != 0) throw ConfigError(what + ": cannot write in " + at.string());
}

}  // namespace

void check_run_outputs(const std::string& out_dir, const std::string& timeline, bool steps_csv, bool iterations_csv) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir(out_dir);
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError("--out " + out_dir + ": exists and is not a folder (result.json goes into a folder)");
  for (const char* f : {"result.json", "steps.csv", "iterations.csv"}) {
    if (std::string(f) == "steps.csv" && !steps_csv) continue;
    if (std::string(f) == "iterations.csv" && !iterations_csv) continue;
    for (const fs::path& p : {dir / f, dir / (std::string(f) + ".tmp")})
      if (fs::is_directory(p, ec)) throw ConfigError("--out " + out_dir + ": " + p.string() + " is a folder");
  }
  check_creatable(dir, "--out " + out_dir);
  if (timeline.empty()) return;
  const fs::path tl(timeline);
  if (fs::is_directory(tl, ec))
    throw ConfigError("--timeline " + timeline + ": is a folder; expected a file name such as " +
                      (tl / "timeline.json").string());
  if (tl.filename().empty()) throw ConfigError("--timeline " + timeline + ": expected a file name");
  for (const std::string& t : {timeline + ".tmp", timeline + ".tmp.tmp"})
    if (fs::is_directory(t, ec)) throw ConfigError("--timeline " + timeline + ": " + t + " is a folder");
  if (fs::weakly_canonical(tl, ec) == fs::weakly_canonical(dir / "result.json", ec))
    throw ConfigError("--timeline " + timeline + ": is the run's result.json");
  check_creatable(tl.has_parent_path() ? tl.parent_path() : fs::path("."), "--timeline " + timeline);
}

void write_steps_csv(const std::string& path, double decode_start, const std::vector<double>& ends) {
  write_file_atomic(path, steps_csv(decode_start, ends));
}

std::string steps_csv(double decode_start, const std::vector<double>& ends) {
  std::ostringstream o;
  o.precision(17);
  o << "step,start_s,end_s,latency_s\n";
  double prev = decode_start;
  for (size_t i = 0; i < ends.size(); ++i) {
    o << i << ',' << prev << ',' << ends[i] << ',' << ends[i] - prev << '\n';
    prev = ends[i];
  }
  return o.str();
}

// ---- staged outputs ----

namespace {

// What a signal handler or exit() must remove: fixed buffers, because a
// handler may not allocate. Only one StagedOutputs is live at a time.
constexpr int kMaxStagedPaths = 32;
constexpr size_t kMaxStagedPathBytes = 4096;
char g_cleanup[kMaxStagedPaths][kMaxStagedPathBytes];
bool g_cleanup_is_dir[kMaxStagedPaths];
volatile sig_atomic_t g_cleanup_count = 0;
volatile sig_atomic_t g_cleanup_armed = 0;
struct sigaction g_old_int {}, g_old_term {}, g_old_hup {};
bool g_atexit_registered = false;

// Files first, then folders innermost first (they are registered outermost first).
void cleanup_now() {
  if (!g_cleanup_armed) return;
  g_cleanup_armed = 0;
  for (int i = 0; i < g_cleanup_count; ++i)
    if (!g_cleanup_is_dir[i]) ::unlink(g_cleanup[i]);
  for (int i = g_cleanup_count; i-- > 0;)
    if (g_cleanup_is_dir[i]) ::rmdir(g_cleanup[i]);
}

void on_signal(int sig) {
  cleanup_now();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void register_cleanup(const std::string& path, bool dir) {
  if (g_cleanup_count >= kMaxStagedPaths || path.size() >= kMaxStagedPathBytes)
    throw ConfigError(path.substr(0, 200) + ": output path too long or too many outputs");
  const int i = g_cleanup_count;
  std::memcpy(g_cleanup[i], path.c_str(), path.size() + 1);
  g_cleanup_is_dir[i] = dir;
  g_cleanup_count = i + 1;
}

}  // namespace

StagedOutputs::StagedOutputs() {
  g_cleanup_count = 0;
  g_cleanup_armed = 1;
  if (!g_atexit_registered) {
    std::atexit(cleanup_now);  // SimGrid's SIGINT handler ends the process with exit()
    g_atexit_registered = true;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  sigaction(SIGHUP, &sa, &g_old_hup);
}

StagedOutputs::~StagedOutputs() {
  if (!committed_) discard();
  g_cleanup_armed = 0;
  g_cleanup_count = 0;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGHUP, &g_old_hup, nullptr);
}

void StagedOutputs::discard() {
  std::error_code ec;
  for (const auto& f : files_) {
    std::filesystem::remove(f.first, ec);
    std::filesystem::remove(f.first + ".tmp", ec);
  }
  for (auto it = created_dirs_.rbegin(); it != created_dirs_.rend(); ++it) std::filesystem::remove(*it, ec);
  files_.clear();
  created_dirs_.clear();
}

std::string StagedOutputs::stage(const std::string& final_path, const std::string& what) {
  namespace fs = std::filesystem;
  const fs::path p(final_path);
  std::error_code ec;
  if (p.has_parent_path()) {
    // The folders missing above the file, outermost first.
    std::vector<fs::path> missing;
    for (fs::path d = p.parent_path(); !d.empty() && !fs::exists(d, ec); d = d.parent_path()) {
      missing.push_back(d);
      if (d == d.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      register_cleanup(it->string(), true);
      if (!fs::create_directory(*it, ec) && ec)
        throw ConfigError(what + " " + final_path + ": cannot create " + it->string() + ": " + ec.message());
      created_dirs_.push_back(it->string());
    }
  }
  const std::string tmp = final_path + ".tmp";
  register_cleanup(tmp, false);
  register_cleanup(tmp + ".tmp", false);
  files_.emplace_back(tmp, final_path);
  return tmp;
}

void StagedOutputs::write(const std::string& final_path, const std::string& content, const std::string& what) {
  const std::string tmp = stage(final_path, what);
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out << content;
  out.flush();
  if (!out) throw ConfigError(what + " " + final_path + ": write failed");
}

void StagedOutputs::commit() {
  for (size_t i = 0; i < files_.size(); ++i) {
    const auto& [tmp, final_path] = files_[i];
    if (std::rename(tmp.c_str(), final_path.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      // The files already renamed belong to this failed run: take them back out.
      for (size_t k = 0; k < i; ++k) ::unlink(files_[k].second.c_str());
      throw ConfigError(final_path + ": could not rename the finished file into place: " + why);
    }
  }
  committed_ = true;
  g_cleanup_armed = 0;
}

}  // namespace kvtier
