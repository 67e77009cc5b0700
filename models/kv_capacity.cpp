#include "models/kv_capacity.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace kvtier {

namespace {

KvCapacity parse_one(const json& v, const std::string& path) {
  KvCapacity c;
  c.text = v.dump();
  const std::string expected = ": expected a size such as \"40GB\" or \"37.5GiB\" (MB, MiB, TB, TiB too), or a count of "
                               "blocks (a positive integer), got ";
  if (v.is_number_integer() || v.is_number_unsigned()) {
    if (v.is_number_integer() && v.get<int64_t>() <= 0) throw ConfigError(path + expected + brief_dump(v));
    c.blocks = v.get<uint64_t>();
    return c;
  }
  if (!v.is_string()) throw ConfigError(path + expected + brief_dump(v));
  const std::string s = v.get<std::string>();
  std::istringstream in(s);
  double x = 0;
  std::string unit;
  if (!(in >> x) || !std::isfinite(x) || x <= 0) throw ConfigError(path + expected + brief_dump(v));
  std::getline(in, unit);
  unit.erase(0, std::min(unit.find_first_not_of(' '), unit.size()));
  static const std::map<std::string, double> kUnits{{"MB", 1e6},  {"GB", 1e9},  {"TB", 1e12}, {"MiB", 1048576.0},
                                                    {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  const auto u = kUnits.find(unit);
  if (u == kUnits.end()) throw ConfigError(path + expected + brief_dump(v));
  c.bytes = x * u->second;
  if (!(c.bytes < 1e18)) throw ConfigError(path + ": " + s + " is out of range");
  return c;
}

std::string gb(double bytes) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << bytes / 1e9;
  return o.str();
}

}  // namespace

std::map<std::string, KvCapacity> parse_kv_capacity(const json& v, const std::vector<std::string>& tiers,
                                                    const std::string& where) {
  std::map<std::string, KvCapacity> out;
  if (v.is_null()) return out;
  if (!v.is_object())
    throw ConfigError(where + ": expected an object: tier name -> size (\"40GB\") or blocks, got " + brief_dump(v));
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (is_annotation_key(it.key())) continue;
    if (std::find(tiers.begin(), tiers.end(), it.key()) == tiers.end()) {
      const std::string hint = nearest(it.key(), tiers);
      std::string msg = where + "." + it.key() + ": not a tier of hardware.tiers" +
                        (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; tiers:";
      for (const auto& t : tiers) msg += " " + t;
      throw ConfigError(msg);
    }
    out[it.key()] = parse_one(it.value(), where + "." + it.key());
  }
  return out;
}

double kv_room_bytes(const std::map<std::string, KvCapacity>& given, const std::string& tier, double derived,
                     double block_bytes, const std::string& after) {
  const auto it = given.find(tier);
  if (it == given.end()) return derived;
  const double room = it->second.room_bytes(block_bytes);
  if (room > derived)
    throw ConfigError("hardware.kv_capacity." + tier + ": " + it->second.text + " (" + gb(room) +
                      " GB of KV) is more than the device holds: " + gb(std::max(0.0, derived)) + " GB" + after);
  return room;
}

}  // namespace kvtier
