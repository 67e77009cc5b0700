#include "models/param.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <sstream>

namespace kvtier {

const char* to_string(ParamType t) {
  switch (t) {
    case ParamType::Number: return "number";
    case ParamType::Integer: return "integer";
    case ParamType::Bool: return "boolean";
    case ParamType::String: return "string";
    case ParamType::Object: return "object";
    case ParamType::Array: return "array";
    case ParamType::Any: return "any";
  }
  return "?";
}

static ParamSpec make(std::string name, ParamType t, json def, std::string doc) {
  ParamSpec p;
  p.name = std::move(name);
  p.type = t;
  p.def = std::move(def);
  p.doc = std::move(doc);
  return p;
}

ParamSpec num(std::string name, json def, std::string doc, double min, double max) {
  ParamSpec p = make(std::move(name), ParamType::Number, std::move(def), std::move(doc));
  p.min = min;
  p.max = max;
  return p;
}
ParamSpec positive(std::string name, json def, std::string doc) {
  ParamSpec p = num(std::move(name), std::move(def), std::move(doc), 0.0);
  p.min_exclusive = true;
  return p;
}
ParamSpec integer(std::string name, json def, std::string doc, double min, double max) {
  ParamSpec p = make(std::move(name), ParamType::Integer, std::move(def), std::move(doc));
  p.min = min;
  p.max = max;
  return p;
}
ParamSpec boolean(std::string name, bool def, std::string doc) {
  return make(std::move(name), ParamType::Bool, json(def), std::move(doc));
}
ParamSpec str(std::string name, json def, std::string doc, std::vector<std::string> choices) {
  ParamSpec p = make(std::move(name), ParamType::String, std::move(def), std::move(doc));
  p.choices = std::move(choices);
  return p;
}
ParamSpec any(std::string name, json def, std::string doc, ParamType t) {
  return make(std::move(name), t, std::move(def), std::move(doc));
}

bool is_annotation_key(const std::string& key) { return key == "source" || key == "note" || key == "description"; }

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest(const std::string& key, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    size_t d = edit_distance(key, c);
    // A prefix or substring match is a good suggestion whatever the distance
    // ("bandwidth" for "bandwidth_GBps").
    if (c.find(key) != std::string::npos || key.find(c) != std::string::npos) d = std::min<size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (best_d > std::max<size_t>(3, key.size() / 2)) return "";
  return best;
}

static bool type_ok(const json& v, ParamType t) {
  switch (t) {
    case ParamType::Number: return v.is_number();
    case ParamType::Integer: return v.is_number();  // integral-ness and range: to_integer()
    case ParamType::Bool: return v.is_boolean();
    case ParamType::String: return v.is_string();
    case ParamType::Object: return v.is_object();
    case ParamType::Array: return v.is_array();
    case ParamType::Any: return true;
  }
  return false;
}

// An integer value as an exact JSON integer, or "" and the reason it is not
// one. A float counts when it is integral and fits: casting a float outside
// the range of the integer type is undefined behaviour.
static std::string to_integer(json& v) {
  if (v.is_number_integer()) return "";
  const double x = v.get<double>();
  if (!std::isfinite(x) || std::floor(x) != x) return "not an integer";
  if (x >= 0 && x < 18446744073709551616.0) {
    v = static_cast<uint64_t>(x);
    return "";
  }
  if (x < 0 && x >= -9223372036854775808.0) {
    v = static_cast<int64_t>(x);
    return "";
  }
  return "out of range";
}

// The upper bound a spec enforces: its own, or the cap for its kind.
static double effective_max(const ParamSpec& s) {
  if (std::isfinite(s.max)) return s.max;
  if (s.type == ParamType::Integer) return kMaxPlainInteger;
  const size_t n = s.name.size();
  if (n >= 3 && s.name.compare(n - 3, 3, "_us") == 0) return kMaxTimeUs;
  return kMaxPlainNumber;
}

static double effective_min(const ParamSpec& s) {
  if (s.min_exclusive && s.min == 0) return kMinPositive;
  if (std::isfinite(s.min)) return s.min;
  return s.type == ParamType::Integer ? -kMaxPlainInteger : -kMaxPlainNumber;
}

// A bound as people write it: integers in full, others in short form.
static std::string bound_text(double x) {
  if (x == 18446744073709551616.0) return "18446744073709551615";  // 2^64 - 1 as a double
  std::ostringstream o;
  if (std::floor(x) == x && std::fabs(x) < 1e16) o << static_cast<long long>(x);
  else o << x;
  return o.str();
}

// Exact comparison of a JSON number with a double bound (long double holds
// every 64-bit integer exactly).
static long double as_long_double(const json& v) {
  if (v.is_number_unsigned()) return static_cast<long double>(v.get<uint64_t>());
  if (v.is_number_integer()) return static_cast<long double>(v.get<int64_t>());
  return static_cast<long double>(v.get<double>());
}

static std::string join_path(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

void resolve_params(json& obj, const ParamList& specs, const std::string& where,
                    const std::vector<std::string>& also_allowed) {
  if (!obj.is_object()) throw ConfigError(where + ": expected an object, got " + brief_dump(obj));
  std::vector<std::string> known;
  for (const auto& s : specs) known.push_back(s.name);
  for (const auto& a : also_allowed) known.push_back(a);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& k = it.key();
    if (is_annotation_key(k) || std::find(known.begin(), known.end(), k) != known.end()) continue;
    std::string hint = nearest(k, known);
    std::string msg = join_path(where, k) + ": unknown key";
    if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
    else {
      msg += "; known keys:";
      for (const auto& n : known) msg += " " + n;
    }
    throw ConfigError(msg);
  }
  for (const auto& s : specs) {
    std::string path = join_path(where, s.name);
    if (!obj.contains(s.name) || obj[s.name].is_null()) {
      if (s.def.is_null()) {
        if (s.type == ParamType::Any || obj.contains(s.name)) {
          obj[s.name] = nullptr;
          continue;
        }
        throw ConfigError(path + ": required " + to_string(s.type) + " is missing (" + s.doc + ")");
      }
      obj[s.name] = s.def;
      continue;
    }
    json& v = obj[s.name];
    if (!type_ok(v, s.type))
      throw ConfigError(path + ": expected " + to_string(s.type) + ", got " + brief_dump(v));
    if (s.type == ParamType::Integer) {
      const std::string why = to_integer(v);
      if (!why.empty() && why != "out of range")
        throw ConfigError(path + ": expected an integer, got " + brief_dump(v));
      if (!why.empty()) v = v.get<double>();  // reported as out of range below
    }
    if (s.type == ParamType::Number || s.type == ParamType::Integer) {
      const long double x = as_long_double(v);
      const double lo = effective_min(s), hi = effective_max(s);
      const bool exclusive = s.min_exclusive && lo != kMinPositive;
      const bool low = exclusive ? !(x > lo) : !(x >= lo);
      const bool integral_ok = s.type != ParamType::Integer || v.is_number_integer();
      if (low || x > hi || !std::isfinite(static_cast<double>(x)) || !integral_ok) {
        std::ostringstream m;
        m << path << ": " << brief_dump(v) << " is out of range, expected "
          << (s.type == ParamType::Integer ? "an integer " : "a value ");
        if (lo == kMinPositive && s.min_exclusive) m << "> 0 (at least " << bound_text(lo) << ")";
        else m << (exclusive ? "> " : ">= ") << bound_text(lo);
        m << " and <= " << bound_text(hi);
        throw ConfigError(m.str());
      }
    }
    if (s.type == ParamType::String && !s.choices.empty()) {
      const auto& sv = v.get_ref<const std::string&>();
      if (std::find(s.choices.begin(), s.choices.end(), sv) == s.choices.end()) {
        std::string msg = path + ": '" + sv + "' is not one of:";
        for (const auto& c : s.choices) msg += " " + c;
        throw ConfigError(msg);
      }
    }
  }
}

double get_num(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number() || !std::isfinite(it->get<double>()))
    throw ConfigError(key + ": expected a finite number, got " + (it == obj.end() ? std::string("nothing") : brief_dump(*it)));
  return it->get<double>();
}

long long get_int(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it != obj.end()) {
    if (it->is_number_unsigned()) {
      if (it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<long long>::max())) return it->get<long long>();
    } else if (it->is_number_integer()) {
      return it->get<long long>();
    } else if (it->is_number_float()) {
      const double x = it->get<double>();
      if (std::floor(x) == x && x >= -9223372036854775808.0 && x < 9223372036854775808.0) return static_cast<long long>(x);
    }
  }
  throw ConfigError(key + ": expected an integer from -2^63 to 2^63-1, got " +
                    (it == obj.end() ? std::string("nothing") : brief_dump(*it)));
}

std::string describe(const ParamList& specs, const std::string& indent) {
  std::ostringstream o;
  for (const auto& s : specs) {
    o << indent << s.name << " (" << to_string(s.type);
    if (!s.def.is_null()) o << ", default " << s.def.dump();
    else if (s.type != ParamType::Any) o << ", required";
    if (s.type == ParamType::Number || s.type == ParamType::Integer) {
      const bool exclusive = s.min_exclusive && effective_min(s) != kMinPositive;
      o << ", " << (exclusive ? "(" : "[") << bound_text(effective_min(s)) << ".." << bound_text(effective_max(s))
        << "]";
    }
    if (!s.choices.empty()) {
      o << ", one of";
      for (const auto& c : s.choices) o << " " << c;
    }
    o << "): " << s.doc << "\n";
  }
  return o.str();
}


namespace {

// Thrown from the parser callback to stop at the first limit broken.
struct JsonLimitError {
  std::string what;
};

struct Frame {
  bool array = false;
  std::string key;   // objects: the key being read
  size_t index = 0;  // arrays: the element being read
  std::vector<std::string> keys;
};

// Reads `text` for nlohmann's parser and remembers how far it has read, so
// that an error thrown from the parser callback (which gets no position)
// can say where it is: the reader stands just past the token the callback
// is about.
struct TrackingIt {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  const char* p = nullptr;
  const char** furthest = nullptr;
  reference operator*() const { return *p; }
  TrackingIt& operator++() {
    if (++p > *furthest) *furthest = p;
    return *this;
  }
  TrackingIt operator++(int) {
    TrackingIt t = *this;
    ++*this;
    return t;
  }
  bool operator==(const TrackingIt& o) const { return p == o.p; }
  bool operator!=(const TrackingIt& o) const { return p != o.p; }
};

std::string frame_path(const std::vector<Frame>& frames) {
  std::string p;
  for (size_t i = 0; i + 1 < frames.size(); ++i) {
    if (frames[i].array) p += "[" + std::to_string(frames[i].index) + "]";
    else p += (p.empty() ? "" : ".") + frames[i].key;
  }
  return p;
}

}  // namespace

std::string parse_json_limited(const std::string& text, json& out, size_t& byte, bool& syntax) {
  byte = 0;
  syntax = false;
  std::vector<Frame> frames;
  auto cb = [&](int /*depth*/, json::parse_event_t ev, json& parsed) -> bool {
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (frames.size() >= static_cast<size_t>(kMaxJsonDepth))
          throw JsonLimitError{"nested more than " + std::to_string(kMaxJsonDepth) + " levels deep"};
        frames.push_back(Frame{ev == json::parse_event_t::array_start, {}, 0, {}});
        break;
      case json::parse_event_t::key: {
        Frame& f = frames.back();
        f.key = parsed.get<std::string>();
        if (std::find(f.keys.begin(), f.keys.end(), f.key) != f.keys.end()) {
          std::string at = frame_path(frames);
          throw JsonLimitError{"key \"" + f.key.substr(0, 80) + "\" appears twice in " +
                               (at.empty() ? std::string("the top-level object") : "object " + at.substr(0, 200))};
        }
        f.keys.push_back(f.key);
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames.pop_back();
        if (!frames.empty() && frames.back().array) ++frames.back().index;
        break;
      case json::parse_event_t::value:
        if (!frames.empty() && frames.back().array) ++frames.back().index;
        break;
    }
    return true;
  };
  const char* read = text.data();
  try {
    out = json::parse(TrackingIt{text.data(), &read}, TrackingIt{text.data() + text.size(), &read}, cb);
  } catch (const JsonLimitError& e) {
    out = json();
    byte = static_cast<size_t>(read - text.data());  // 1-based: the last character read
    return e.what;
  } catch (const json::parse_error& e) {
    out = json();
    byte = e.byte;
    syntax = true;
    std::string what = e.what();
    auto pos = what.find("syntax error");
    return pos == std::string::npos ? what : what.substr(pos);
  } catch (const json::out_of_range& e) {
    // A number too large for a double ("1e400"): nlohmann names it, not where.
    out = json();
    std::string what = e.what();
    auto q = what.find('\'');
    auto q2 = q == std::string::npos ? q : what.find('\'', q + 1);
    std::string num = q2 == std::string::npos ? std::string() : what.substr(q + 1, q2 - q - 1);
    if (!num.empty()) {
      auto at = text.find(num);
      if (at != std::string::npos) byte = at + 1;
    }
    return "number " + (num.empty() ? std::string("") : num.substr(0, 40) + " ") +
           "does not fit a double (expected a finite number)";
  } catch (const json::exception& e) {
    out = json();
    return e.what();
  }
  return "";
}

json parse_json_text(const std::string& text, const std::string& name) {
  json out;
  size_t byte = 0;
  bool syntax = false;
  const std::string err = parse_json_limited(text, out, byte, syntax);
  if (err.empty()) return out;
  if (byte == 0) throw ConfigError(name + ": invalid JSON: " + err);
  // nlohmann reports a byte offset; users want line and column.
  size_t line = 1, col = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  throw ConfigError(name + ":" + std::to_string(line) + ":" + std::to_string(col) + ": invalid JSON: " + err);
}

namespace {
// Invalid UTF-8 in a string is replaced rather than thrown about.
std::string safe_dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

void brief(const json& v, std::string& out, size_t budget, int depth) {
  if (out.size() >= budget) return;
  if (v.is_object() || v.is_array()) {
    if (depth >= 4 || v.empty()) {
      out += v.is_object() ? (v.empty() ? "{}" : "{...}") : (v.empty() ? "[]" : "[...]");
      return;
    }
    out += v.is_object() ? '{' : '[';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() < budget; ++it) {
      if (!first) out += ',';
      first = false;
      if (v.is_object()) out += safe_dump(json(it.key().substr(0, budget))) + ":";
      brief(it.value(), out, budget, depth + 1);
    }
    out += v.is_object() ? '}' : ']';
    return;
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    out += safe_dump(json(s.substr(0, budget)));
    return;
  }
  out += safe_dump(v);
}
}  // namespace

std::string brief_dump(const json& v, size_t max_chars) {
  std::string out;
  brief(v, out, max_chars, 0);
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

}  // namespace kvtier
