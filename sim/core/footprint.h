// What a run will hold in memory, estimated from its shape before the large
// allocations are made, against a limit: refused up front (a ConfigError
// naming the knob that drives the largest part) rather than exhausting the
// machine part way through.
//
// The limit is the machine's available memory (MemAvailable) less a tenth,
// or what --max-memory sets. Parts are committed as the engine meets them
// (the request stream before it is loaded, the block table before it is
// allocated), so the check each time is against everything committed so far
// plus the process's own base.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace kvtier {

// Bytes the process holds before any of a run's state: the binary, SimGrid,
// the C++ runtime (peak RSS of the smallest runs, docs/reliability.md).
constexpr double kProcessBaseBytes = 48.0 * 1024 * 1024;

struct FootprintPart {
  std::string what;  // "the KV block table (N blocks x B bytes)"
  std::string knob;  // the settings that drive it
  double bytes = 0;
};

// Sets the limit (bytes; 0: the default, from the machine).
void set_memory_limit(double bytes);
// The limit in force, and a phrase saying where it came from.
double memory_limit();
std::string memory_limit_source();
// Parses "512M", "4G", "4GiB", "1.5T" or a byte count; throws ConfigError naming `option`.
double parse_memory_size(const std::string& text, const std::string& option);

// Commits a part: throws ConfigError if what is committed, with it, exceeds the limit.
void commit_footprint(const FootprintPart& part);
// What has been committed (the process base included), for result.json.
double committed_footprint_bytes();
nlohmann::json footprint_json();
// Forgets what was committed (a new run in the same process).
void reset_footprint();

// Heap bytes in use now (glibc's allocator), for measuring what a structure takes.
double heap_bytes_in_use();

}  // namespace kvtier
