// Self-describing parameters, after Ramulator 2.0: every component declares its
// parameters once (name, type, default, range, one-line doc), so the same list
// validates a config, fills in defaults and prints `kvtier list`.
//
// This lives in models/ because models/ is the lowest layer: policies/, traces/
// and sim/ all depend on it, and it depends on nothing of ours.
#pragma once

#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvtier {

using json = nlohmann::json;

// Every user-facing input error. The message is one line and names the file,
// the JSON path or the trace line, and what was expected; the CLI prints it
// and exits with code 2.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class ParamType { Number, Integer, Bool, String, Object, Array, Any };
const char* to_string(ParamType t);

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::Number;
  json def;  // null: required (no default)
  std::string doc;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;      // true: value must be > min (bandwidths, capacities)
  std::vector<std::string> choices;  // for strings: the allowed values, empty = any
};
using ParamList = std::vector<ParamSpec>;

// One-line declarations. `positive` is the common case for physical quantities.
ParamSpec num(std::string name, json def, std::string doc, double min = -std::numeric_limits<double>::infinity(),
              double max = std::numeric_limits<double>::infinity());
ParamSpec positive(std::string name, json def, std::string doc);
ParamSpec integer(std::string name, json def, std::string doc, double min = 0,
                  double max = std::numeric_limits<double>::infinity());
ParamSpec boolean(std::string name, bool def, std::string doc);
ParamSpec str(std::string name, json def, std::string doc, std::vector<std::string> choices = {});
ParamSpec any(std::string name, json def, std::string doc, ParamType t = ParamType::Any);

// Keys every parameter object may carry without a declaration: where a figure
// comes from, and free text for humans.
bool is_annotation_key(const std::string& key);

// Checks `obj` (at JSON path `where`, e.g. "hardware.devices.nvme") against
// `specs`: rejects unknown keys (suggesting the nearest known one), missing
// required keys, wrong types, values out of range or not among the choices,
// and fills in defaults. Keys in `also_allowed` pass unchecked.
void resolve_params(json& obj, const ParamList& specs, const std::string& where,
                    const std::vector<std::string>& also_allowed = {});

// The candidate closest to `key` by edit distance, or "" if none is close.
std::string nearest(const std::string& key, const std::vector<std::string>& candidates);

// Typed access after resolve_params; the path is only used in messages.
double get_num(const json& obj, const std::string& key);
long long get_int(const json& obj, const std::string& key);

// "name (type, default D, range): doc" lines for `kvtier list`.
std::string describe(const ParamList& specs, const std::string& indent);

}  // namespace kvtier
