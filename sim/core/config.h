// Loading a run configuration: JSON files with presets, command-line
// overrides, and validation of the top-level sections. The component
// sections (devices, policies, trace generator) are validated by their own
// ParamLists when the simulation is set up. Conventions: docs/config.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier {

// Parses a JSON file; syntax errors name file:line:column.
json load_json_file(const std::string& path);

// Finds a data file named in a config: as given (absolute or relative to the
// current directory), then relative to the including file's directory, then
// relative to the kvtier source tree. Throws ConfigError naming `where`.
std::string find_data_file(const std::string& path, const std::string& including_file, const std::string& where);

// Loads `path` (found like a preset: as given, then in the kvtier source
// tree), expands presets (a section given as a file name, or an object with
// "preset": file plus overrides; a top-level "preset" is a whole base config,
// in which a section naming its own preset replaces the base's), normalises
// policies given by name to {"name": ...}, applies `--set a.b.c=value`
// overrides, and checks the top-level sections. Ready for Simulation.
json load_config(const std::string& path, const std::vector<std::string>& sets);

// load_config in its three steps, for callers that build many configs from
// one file (a sweep expands its base once): the file found as load_config
// finds it, its presets expanded, then the overrides applied and the
// top-level sections checked.
std::string find_config_file(const std::string& given);
json expand_config_file(const std::string& path);
void finish_config(json& cfg, const std::string& path, const std::vector<std::string>& sets);

// Applies one "a.b.c=value" override; value is JSON if it parses, else a
// string. A section (hardware=FILE, model={"preset": FILE, ...}) or a policy
// (policies.eviction=h2o, =FILE.json) is expanded as in a file; null deletes
// the key; a new workload.trace.kind starts the trace section afresh.
void apply_set(json& cfg, const std::string& assignment);

// An error message with std::to_string's six-decimal numbers trimmed ("13.4", not "13.400000").
std::string plain_numbers(const std::string& text);
// A message fit for one terminal line: control characters in it (a key with
// a newline, an ANSI escape quoted from a user's file) written as \n, \t,
// \r or \xNN, so an error stays one line and cannot drive the terminal.
std::string one_line(const std::string& text);

// Workload limits (docs/config.md, "Limits"): every count the engine keeps
// as a 32-bit integer stays far from wrapping, and the KV blocks it tracks
// (batch x layers x blocks per sequence) are bounded before anything is
// allocated.
constexpr long long kMaxContextTokens = 1LL << 24;
constexpr long long kMaxDecodeSteps = 1LL << 24;
constexpr long long kMaxBlockTokens = 1LL << 16;
constexpr long long kMaxBatch = 4096;
constexpr long long kMaxKvBlocks = 1LL << 26;
// A configuration or sweep file larger than this is refused unread.
constexpr unsigned long long kMaxConfigBytes = 16ULL << 20;

// A seed option: decimal digits only, 0 to 2^64-1 (strtoull would take "-1"
// as 2^64-1 and saturate anything larger). Throws ConfigError naming `option`.
uint64_t parse_seed(const std::string& text, const std::string& option);

ParamList workload_params();
ParamList sim_params();

}  // namespace kvtier
