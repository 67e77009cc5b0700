#include "models/curve.h"

#include <algorithm>
#include <cmath>

namespace kvtier {

Curve::Curve(std::vector<std::pair<double, double>> points, Interp interp, const std::string& where)
    : pts_(std::move(points)), interp_(interp) {
  if (pts_.empty()) throw ConfigError(where + ": a curve needs at least one point");
  std::sort(pts_.begin(), pts_.end());
  for (size_t i = 0; i < pts_.size(); ++i) {
    const auto& [x, y] = pts_[i];
    if (!std::isfinite(x) || !std::isfinite(y)) throw ConfigError(where + ": non-finite point in curve");
    if (interp_ == Interp::LogX && !(x > 0)) throw ConfigError(where + ": log_x curves need x > 0");
    if (i > 0 && pts_[i - 1].first == x)
      throw ConfigError(where + ": two points at x = " + std::to_string(x));
  }
}

double Curve::operator()(double x) const {
  if (pts_.empty()) return 0;
  if (x <= pts_.front().first) return pts_.front().second;
  if (x >= pts_.back().first) return pts_.back().second;
  auto hi = std::upper_bound(pts_.begin(), pts_.end(), x,
                             [](double v, const std::pair<double, double>& p) { return v < p.first; });
  auto lo = hi - 1;
  double t;
  if (interp_ == Interp::LogX)
    t = std::log(x / lo->first) / std::log(hi->first / lo->first);
  else
    t = (x - lo->first) / (hi->first - lo->first);
  return lo->second + t * (hi->second - lo->second);
}

double Curve::max_y() const {
  double m = 0;
  for (size_t i = 0; i < pts_.size(); ++i) m = i == 0 ? pts_[i].second : std::max(m, pts_[i].second);
  return m;
}

double Curve::min_y() const {
  double m = 0;
  for (size_t i = 0; i < pts_.size(); ++i) m = i == 0 ? pts_[i].second : std::min(m, pts_[i].second);
  return m;
}

Curve Curve::scaled(double k) const {
  Curve c = *this;
  for (auto& p : c.pts_) p.second *= k;
  return c;
}

Curve parse_curve(const json& j, const std::string& where, bool positive_y) {
  const json* pts = &j;
  Curve::Interp interp = Curve::Interp::Linear;
  std::string pts_where = where;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "points" && it.key() != "interp" && !is_annotation_key(it.key()))
        throw ConfigError(where + "." + it.key() + ": unknown key in a curve (expected points, interp, source)");
    if (!j.contains("points")) throw ConfigError(where + ".points: required array of [x, y] pairs is missing");
    pts = &j["points"];
    pts_where = where + ".points";
    if (j.contains("interp")) {
      const json& m = j["interp"];
      if (m == "linear") interp = Curve::Interp::Linear;
      else if (m == "log_x") interp = Curve::Interp::LogX;
      else throw ConfigError(where + ".interp: expected \"linear\" or \"log_x\", got " + m.dump());
    }
  }
  if (!pts->is_array()) throw ConfigError(pts_where + ": expected an array of [x, y] pairs, got " + pts->dump());
  std::vector<std::pair<double, double>> v;
  for (size_t i = 0; i < pts->size(); ++i) {
    const json& p = (*pts)[i];
    std::string pw = pts_where + "[" + std::to_string(i) + "]";
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
      throw ConfigError(pw + ": expected [x, y] (two numbers), got " + p.dump());
    double y = p[1].get<double>();
    if (positive_y && !(y > 0)) throw ConfigError(pw + ": " + p[1].dump() + " is out of range, expected a value > 0");
    v.emplace_back(p[0].get<double>(), y);
  }
  return Curve(std::move(v), interp, pts_where);
}

json curve_to_json(const Curve& c) {
  json pts = json::array();
  for (const auto& [x, y] : c.points()) pts.push_back({x, y});
  return {{"points", pts}, {"interp", c.interp() == Curve::Interp::LogX ? "log_x" : "linear"}};
}

}  // namespace kvtier
