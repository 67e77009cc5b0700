// Validating many configurations in a row without running them (a sweep's
// points): what they share is built once, and what a run would allocate is
// estimated and checked against the memory limit but not taken.
//
// An engine constructed with a ValidationCache (sim/engine/engine.h,
// sim/serving/serving.h) makes every check its run would make: the KV store
// commits the block table's memory and checks its shape and the tiers'
// capacities, the policies are set up on the table's shape, but the
// per-block arrays are never allocated. Such an engine cannot run.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "models/hardware.h"
#include "policies/block_table.h"

namespace kvtier {

struct EnginePolicies;

// A hardware section as parse_hardware resolved it.
struct ParsedHardware {
  nlohmann::json resolved;  // defaults filled, calibration merged
  std::string text;         // resolved.dump()
  Hardware hw;
};

class ValidationCache {
 public:
  // `given` (a config's hardware section, as written) parsed; sections equal
  // to one parsed before share its parse. Throws ConfigError as parse_hardware.
  std::shared_ptr<const ParsedHardware> hardware(const nlohmann::json& given);
  // EnginePolicies::state_bytes_per_block, measured once per policy spec and
  // everything of the table's shape the measurement reads.
  double policy_state_bytes(const EnginePolicies& pol, const BlockTable& shape);

 private:
  // By std::hash of the given section: (the section, its parse).
  std::unordered_multimap<size_t, std::pair<nlohmann::json, std::shared_ptr<const ParsedHardware>>> hardware_;
  std::unordered_map<std::string, double> policy_state_;
};

}  // namespace kvtier
