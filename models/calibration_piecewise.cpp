#include "models/calibration_piecewise.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvtier {

namespace {

// Least squares of relative error, min sum ((a + c S - t) / t)^2 over
// points [i, j], with c >= 0 (a time does not shrink with size; if the
// unconstrained slope is negative the best constant is taken).
Segment fit_line(const std::vector<MeasuredPoint>& p, size_t i, size_t j, double* cost) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t k = i; k <= j; ++k) {
    const double w = 1.0 / (p[k].median_us * p[k].median_us);
    sw += w;
    sx += w * p[k].bytes;
    sy += w * p[k].median_us;
    sxx += w * p[k].bytes * p[k].bytes;
    sxy += w * p[k].bytes * p[k].median_us;
  }
  Segment s;
  s.lo_bytes = p[i].bytes;
  s.hi_bytes = p[j].bytes;
  const double det = sw * sxx - sx * sx;
  double a = sy / sw, c = 0;
  if (det > 0 && j > i) {
    c = (sw * sxy - sx * sy) / det;
    a = (sy - c * sx) / sw;
    if (c < 0) {
      c = 0;
      a = sy / sw;
    }
  }
  s.fixed_us = a;
  s.us_per_byte = c;
  double e = 0;
  for (size_t k = i; k <= j; ++k) {
    const double r = (a + c * p[k].bytes - p[k].median_us) / p[k].median_us;
    e += r * r;
  }
  *cost = e;
  return s;
}

double line_at(const Segment& s, double bytes) { return s.fixed_us + s.us_per_byte * bytes; }

}  // namespace

double PiecewiseFit::predict_us(double bytes) const {
  if (segments.empty()) return 0;
  const double floor_us = 1e-3;
  if (bytes <= segments.front().hi_bytes) return std::max(floor_us, line_at(segments.front(), bytes));
  for (size_t k = 0; k < segments.size(); ++k) {
    const Segment& s = segments[k];
    if (bytes <= s.hi_bytes) {
      if (bytes >= s.lo_bytes) return std::max(floor_us, line_at(s, bytes));
      // Between the previous segment and this one: log-size interpolation.
      const Segment& p = segments[k - 1];
      const double u = (std::log(bytes) - std::log(p.hi_bytes)) / (std::log(s.lo_bytes) - std::log(p.hi_bytes));
      const double y0 = std::log(std::max(floor_us, line_at(p, bytes)));
      const double y1 = std::log(std::max(floor_us, line_at(s, bytes)));
      return std::exp(y0 + u * (y1 - y0));
    }
  }
  return std::max(floor_us, line_at(segments.back(), bytes));
}

json PiecewiseFit::to_json() const {
  json a = json::array();
  for (const auto& s : segments)
    a.push_back({{"from_bytes", s.lo_bytes}, {"to_bytes", s.hi_bytes}, {"fixed_us", s.fixed_us},
                 {"GBps", s.us_per_byte > 0 ? 1e-3 / s.us_per_byte : 0.0}});
  return a;
}

PiecewiseFit fit_piecewise(const std::vector<MeasuredPoint>& pts, int max_segments) {
  const size_t n = pts.size();
  if (n < 2) throw std::invalid_argument("fit_piecewise: at least two sizes are needed");
  const size_t M = std::min<size_t>(std::max(1, max_segments), n / 2);
  const double inf = std::numeric_limits<double>::infinity();
  // best[m][j]: least cost of points 0..j-1 in m segments; from[m][j]: start of the last.
  std::vector<std::vector<double>> best(M + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<size_t>> from(M + 1, std::vector<size_t>(n + 1, 0));
  std::vector<std::vector<double>> seg_cost(n, std::vector<double>(n, inf));
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) fit_line(pts, i, j, &seg_cost[i][j]);
  best[0][0] = 0;
  for (size_t m = 1; m <= M; ++m)
    for (size_t j = 2; j <= n; ++j)
      for (size_t i = 0; i + 2 <= j; ++i) {
        if (best[m - 1][i] == inf) continue;
        const double c = best[m - 1][i] + seg_cost[i][j - 1];
        if (c < best[m][j]) {
          best[m][j] = c;
          from[m][j] = i;
        }
      }
  size_t m_best = 1;
  for (size_t m = 2; m <= M; ++m)
    if (best[m][n] < 0.5 * best[m_best][n] && best[m_best][n] > 1e-6 * n) m_best = m;
    else break;
  PiecewiseFit f;
  size_t j = n;
  for (size_t m = m_best; m >= 1; --m) {
    const size_t i = from[m][j];
    double c;
    f.segments.push_back(fit_line(pts, i, j - 1, &c));
    j = i;
  }
  std::reverse(f.segments.begin(), f.segments.end());
  return f;
}

void split_alternate(const std::vector<MeasuredPoint>& pts, std::vector<MeasuredPoint>* train,
                     std::vector<MeasuredPoint>* test) {
  train->clear();
  test->clear();
  for (size_t i = 0; i < pts.size(); ++i) (i % 2 == 0 ? train : test)->push_back(pts[i]);
}

ErrorStats error_stats(const std::vector<double>& pred, const std::vector<double>& meas) {
  ErrorStats e;
  std::vector<double> r;
  for (size_t i = 0; i < pred.size() && i < meas.size(); ++i)
    if (meas[i] > 0) r.push_back(std::abs(pred[i] - meas[i]) / meas[i]);
  e.n = r.size();
  if (r.empty()) return e;
  std::sort(r.begin(), r.end());
  double s = 0;
  for (double x : r) s += x;
  e.mape = s / static_cast<double>(r.size());
  const size_t n = r.size();
  e.p50 = n % 2 ? r[n / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
  // Nearest rank: the smallest error at or above 99% of the points.
  e.p99 = r[std::min(n - 1, static_cast<size_t>(std::ceil(0.99 * static_cast<double>(n))) - 1)];
  e.max = r.back();
  return e;
}

json to_json(const ErrorStats& e) {
  return json{{"n", e.n}, {"mape", e.mape}, {"p50", e.p50}, {"p99", e.p99}, {"max", e.max}};
}

}  // namespace kvtier
