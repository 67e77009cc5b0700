#include "models/param.h"

#include <algorithm>
#include <cmath>
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
    case ParamType::Integer: return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    case ParamType::Bool: return v.is_boolean();
    case ParamType::String: return v.is_string();
    case ParamType::Object: return v.is_object();
    case ParamType::Array: return v.is_array();
    case ParamType::Any: return true;
  }
  return false;
}

static std::string join_path(const std::string& where, const std::string& key) {
  return where.empty() ? key : where + "." + key;
}

void resolve_params(json& obj, const ParamList& specs, const std::string& where,
                    const std::vector<std::string>& also_allowed) {
  if (!obj.is_object()) throw ConfigError(where + ": expected an object, got " + obj.dump());
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
      throw ConfigError(path + ": expected " + to_string(s.type) + ", got " + v.dump());
    if (s.type == ParamType::Integer && v.is_number_float()) v = static_cast<long long>(v.get<double>());
    if (s.type == ParamType::Number || s.type == ParamType::Integer) {
      double x = v.get<double>();
      bool low = s.min_exclusive ? !(x > s.min) : !(x >= s.min);
      if (low || x > s.max || !std::isfinite(x)) {
        std::ostringstream m;
        m << path << ": " << v.dump() << " is out of range, expected ";
        if (s.min_exclusive) m << "a value > " << s.min;
        else m << "a value >= " << s.min;
        if (std::isfinite(s.max)) m << " and <= " << s.max;
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

double get_num(const json& obj, const std::string& key) { return obj.at(key).get<double>(); }
long long get_int(const json& obj, const std::string& key) { return obj.at(key).get<long long>(); }

std::string describe(const ParamList& specs, const std::string& indent) {
  std::ostringstream o;
  for (const auto& s : specs) {
    o << indent << s.name << " (" << to_string(s.type);
    if (!s.def.is_null()) o << ", default " << s.def.dump();
    else if (s.type != ParamType::Any) o << ", required";
    if (std::isfinite(s.min) || std::isfinite(s.max)) {
      o << ", " << (s.min_exclusive ? "(" : "[");
      if (std::isfinite(s.min)) o << s.min;
      o << "..";
      if (std::isfinite(s.max)) o << s.max;
      o << "]";
    }
    if (!s.choices.empty()) {
      o << ", one of";
      for (const auto& c : s.choices) o << " " << c;
    }
    o << "): " << s.doc << "\n";
  }
  return o.str();
}

}  // namespace kvtier
