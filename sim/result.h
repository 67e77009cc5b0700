// The result contract: DIR/result.json with the kvtier version, the fully
// resolved configuration, the seed and the metrics; optionally steps.csv.
// Every file is written to a temporary name and renamed, so a reader never
// sees a half-written result and a failed run leaves the old one intact.
#pragma once

#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

void write_file_atomic(const std::string& path, const std::string& content);
json make_result(const json& resolved_config, const json& metrics);
void write_steps_csv(const std::string& path, double decode_start, const std::vector<double>& step_ends);

}  // namespace kvtier
