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
void check_run_outputs(const std::string& out_dir, const std::string& timeline);
void write_steps_csv(const std::string& path, double decode_start, const std::vector<double>& step_ends);

}  // namespace kvtier
