#include "sim/result.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <simgrid/config.h>
#include <simgrid/version.h>

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
              {"simgrid_version", std::to_string(SIMGRID_VERSION_MAJOR) + "." + std::to_string(SIMGRID_VERSION_MINOR) +
                                      "." + std::to_string(SIMGRID_VERSION_PATCH)}};
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

void check_run_outputs(const std::string& out_dir, const std::string& timeline) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir(out_dir);
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw ConfigError("--out " + out_dir + ": exists and is not a folder (result.json goes into a folder)");
  if (fs::is_directory(dir / "result.json", ec))
    throw ConfigError("--out " + out_dir + ": " + (dir / "result.json").string() + " is a folder");
  check_creatable(dir, "--out " + out_dir);
  if (timeline.empty()) return;
  const fs::path tl(timeline);
  if (fs::is_directory(tl, ec))
    throw ConfigError("--timeline " + timeline + ": is a folder; expected a file name such as " +
                      (tl / "timeline.json").string());
  if (tl.filename().empty()) throw ConfigError("--timeline " + timeline + ": expected a file name");
  if (fs::weakly_canonical(tl, ec) == fs::weakly_canonical(dir / "result.json", ec))
    throw ConfigError("--timeline " + timeline + ": is the run's result.json");
  check_creatable(tl.has_parent_path() ? tl.parent_path() : fs::path("."), "--timeline " + timeline);
}

void write_steps_csv(const std::string& path, double decode_start, const std::vector<double>& ends) {
  std::ostringstream o;
  o.precision(17);
  o << "step,start_s,end_s,latency_s\n";
  double prev = decode_start;
  for (size_t i = 0; i < ends.size(); ++i) {
    o << i << ',' << prev << ',' << ends[i] << ',' << ends[i] - prev << '\n';
    prev = ends[i];
  }
  write_file_atomic(path, o.str());
}

}  // namespace kvtier
