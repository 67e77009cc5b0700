#include "sim/result.h"

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
