// The result contract (docs/results.md): DIR/result.json with the kvtier
// version, where the binary came from (git commit, SimGrid version), the
// fully resolved configuration, the seed and the metrics; optionally
// steps.csv. Nothing that varies between two runs of one binary (host, clock)
// is in it, so the same configuration and seed give a byte-identical file.
// Every file is written to a temporary name and renamed, so a reader never
// sees a half-written result and a failed run leaves the old one intact.
#pragma once

#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

void write_file_atomic(const std::string& path, const std::string& content);
json make_result(const json& resolved_config, const json& metrics);
// {"kvtier_version", "git_commit", "simgrid_version"} of this binary.
json build_provenance();
// Checks, before a run, that its outputs can be written, creating nothing:
// `out_dir` is a folder or can become one, and `timeline` (may be empty) is
// not a folder and its folder can be written. Throws ConfigError naming the
// option (--out, --timeline).
void check_run_outputs(const std::string& out_dir, const std::string& timeline, bool steps_csv = false,
                       bool iterations_csv = false);
void write_steps_csv(const std::string& path, double decode_start, const std::vector<double>& step_ends);
std::string steps_csv(double decode_start, const std::vector<double>& step_ends);

// The files of one run, all or nothing: each is staged as FILE.tmp in its own
// folder and renamed into place by commit(), in the order staged (so stage
// result.json last: it appears only once every other output has). Until
// commit() returns, a thrown error, a return, exit() or SIGINT/SIGTERM/SIGHUP
// removes every staged file and every folder created for them.
class StagedOutputs {
 public:
  StagedOutputs();
  ~StagedOutputs();
  StagedOutputs(const StagedOutputs&) = delete;
  StagedOutputs& operator=(const StagedOutputs&) = delete;
  // Creates the folders of `final_path` and returns the name to write it
  // under (FILE.tmp; a writer that itself writes FILE.tmp.tmp and renames it
  // is covered too). `what` names the option in errors (--out, --timeline).
  std::string stage(const std::string& final_path, const std::string& what);
  // Stages `final_path` with `content`.
  void write(const std::string& final_path, const std::string& content, const std::string& what);
  void commit();

 private:
  void discard();
  std::vector<std::pair<std::string, std::string>> files_;  // staged, final
  std::vector<std::string> created_dirs_;                    // outermost first
  bool committed_ = false;
};

}  // namespace kvtier
