#include "models/calibration.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <sstream>

namespace kvtier {

static bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

ParamSpec curves_param(const std::vector<std::string>& names) {
  std::string doc = "calibrated curves replacing constants, name -> [[x, y], ...]; names:";
  for (const auto& n : names) doc += " " + n;
  return any("curves", json::object(), doc, ParamType::Object);
}

CurveSet parse_curve_set(const json& obj, const std::vector<std::string>& allowed, const std::string& where) {
  CurveSet out;
  if (!obj.contains("curves") || obj["curves"].is_null()) return out;
  const json& cs = obj["curves"];
  std::string cw = where.empty() ? "curves" : where + ".curves";
  if (!cs.is_object()) throw ConfigError(cw + ": expected an object (curve name -> points), got " + cs.dump());
  for (auto it = cs.begin(); it != cs.end(); ++it) {
    if (is_annotation_key(it.key())) continue;
    std::string path = cw + "." + it.key();
    if (std::find(allowed.begin(), allowed.end(), it.key()) == allowed.end()) {
      std::string msg = path + ": unknown curve";
      std::string hint = nearest(it.key(), allowed);
      if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
      msg += "; this object takes:";
      for (const auto& a : allowed) msg += " " + a;
      throw ConfigError(msg);
    }
    bool pos = ends_with(it.key(), "_GBps") || ends_with(it.key(), "_us") || ends_with(it.key(), "_s");
    out.emplace(it.key(), parse_curve(it.value(), path, pos));
  }
  return out;
}

json load_calibration_file(const std::string& path, const std::string& where) {
  std::ifstream f(path);
#ifdef KVTIER_SOURCE_DIR
  if (!f && !path.empty() && path[0] != '/') f.open(std::string(KVTIER_SOURCE_DIR) + "/" + path);
#endif
  if (!f) throw ConfigError(where + ": cannot open calibration file '" + path + "'");
  try {
    return json::parse(f);
  } catch (const json::parse_error& e) {
    throw ConfigError(where + ": calibration file '" + path + "' is not valid JSON: " + e.what());
  }
}

namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  std::string cur;
  for (char c : s + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      w.push_back(cur);
      cur.clear();
    }
  }
  return w;
}

void collect_text(const json& j, std::string* out) {
  if (j.is_string()) *out += " " + j.get<std::string>();
  else if (j.is_object() || j.is_array())
    for (const auto& v : j) collect_text(v, out);
}

}  // namespace

std::string calibration_device_mismatch(const json& hw, const json& cal) {
  if (!cal.is_object() || !cal.contains("device") || !cal["device"].is_string()) return "";
  const std::string device = cal["device"].get<std::string>();
  // The words of the device's name that carry a number are its model
  // ("h200", "4090", "7950x"); without any, every word counts.
  std::vector<std::string> key;
  for (const auto& w : words(device))
    if (std::any_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
      key.push_back(w);
  if (key.empty()) key = words(device);
  if (key.empty()) return "";
  std::string text;
  for (const char* k : {"name", "description"})
    if (hw.contains(k)) collect_text(hw[k], &text);
  if (hw.contains("devices") && hw["devices"].is_object())
    for (const auto& d : hw["devices"]) {
      if (!d.is_object()) continue;
      for (const char* k : {"source", "description", "note"})
        if (d.contains(k)) collect_text(d[k], &text);
    }
  const std::vector<std::string> have = words(text);
  for (const auto& w : key)
    if (std::find(have.begin(), have.end(), w) == have.end()) return device;
  return "";
}

void merge_calibration(json& hw, const json& cal, const std::string& fw) {
  if (!cal.is_object()) throw ConfigError(fw + ": expected an object with \"devices\" and/or \"links\"");
  const std::string other = calibration_device_mismatch(hw, cal);
  if (!other.empty())
    std::cerr << "kvtier: warning: " << fw << ": calibration measured on '" << other << "' applied to hardware '"
              << hw.value("name", std::string("unnamed"))
              << "', whose name, description and sources do not mention it: its curves describe another device\n";
  for (auto it = cal.begin(); it != cal.end(); ++it) {
    const std::string& k = it.key();
    // "device" names the measured device; "paths" holds fitted models that
    // are reported, not merged.
    if (is_annotation_key(k) || k == "name" || k == "device" || k == "paths") continue;
    if (k != "devices" && k != "links")
      throw ConfigError(fw + "." + k + ": unknown key (expected devices, links, source)");
    const json& group = it.value();
    if (!group.is_object()) throw ConfigError(fw + "." + k + ": expected an object");
    for (auto g = group.begin(); g != group.end(); ++g) {
      std::string path = fw + "." + k + "." + g.key();
      if (!hw.contains(k) || !hw[k].is_object() || !hw[k].contains(g.key()))
        throw ConfigError(path + ": the hardware description has no " + k.substr(0, k.size() - 1) + " named '" +
                          g.key() + "'");
      if (!g.value().is_object()) throw ConfigError(path + ": expected an object: curve name -> curve");
      json& target = hw[k][g.key()];
      if (!target.is_object()) continue;  // the hardware parser reports the malformed object
      if (!target.contains("curves") || !target["curves"].is_object()) target["curves"] = json::object();
      for (auto c = g.value().begin(); c != g.value().end(); ++c) {
        if (is_annotation_key(c.key())) continue;
        if (!target["curves"].contains(c.key())) target["curves"][c.key()] = c.value();
      }
    }
  }
}

}  // namespace kvtier
