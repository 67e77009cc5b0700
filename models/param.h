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

// Typed access after resolve_params. get_num throws ConfigError unless the
// value is a finite number; get_int unless it is an integer that fits a
// long long (a float only when it is integral and in range: no
// out-of-range float-to-integer conversion).
double get_num(const json& obj, const std::string& key);
long long get_int(const json& obj, const std::string& key);

// Input limits (docs/config.md, "Limits"). Integer parameters without a
// declared maximum are capped at kMaxPlainInteger (they become uint32/int in
// the models); numbers without one at kMaxPlainNumber; time parameters (a
// name ending in "_us") at kMaxTimeUs, beyond which simulated times lose
// their microseconds and SimGrid's solver stops converging.
constexpr double kMaxPlainInteger = 2147483647.0;  // 2^31 - 1
constexpr double kMaxPlainNumber = 1e15;
constexpr double kMaxTimeUs = 1e9;  // 1000 s
// A positive quantity (a rate, a capacity) is at least this much: smaller
// rates make times that overflow to infinity, which SimGrid cannot schedule.
constexpr double kMinPositive = 1e-12;
// JSON nested deeper than this is rejected while it is parsed, before any
// recursive processing can exhaust the stack.
constexpr int kMaxJsonDepth = 256;

// Parses JSON text under the limits above: nesting at most kMaxJsonDepth,
// no key twice in one object (nlohmann would keep the last one silently),
// numbers that fit a double. Returns "" or what is wrong; `byte` is where
// (0 when unknown), `syntax` is true for plain syntax errors.
std::string parse_json_limited(const std::string& text, json& out, size_t& byte, bool& syntax);
// The same, throwing ConfigError "NAME:LINE:COLUMN: what" (NAME alone when `text` is one line).
json parse_json_text(const std::string& text, const std::string& name);

// A value for an error message: at most `max_chars` characters of its JSON,
// never recursing deeper than a few levels, so a huge or deeply nested value
// cannot flood stderr or the stack.
std::string brief_dump(const json& v, size_t max_chars = 80);

// "name (type, default D, range): doc" lines for `kvtier list`.
std::string describe(const ParamList& specs, const std::string& indent);

}  // namespace kvtier
