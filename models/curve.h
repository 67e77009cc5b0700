// A piecewise-linear curve y(x), the form every calibrated quantity takes:
// effective bandwidth against transfer size, latency against transfer size,
// kernel time against KV bytes. Measurements are sparse (a handful of sizes
// from 4 KB to 128 MB), so between points we interpolate and beyond the ends
// we hold the end value rather than extrapolate a trend we did not measure.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/param.h"

namespace kvtier {

class Curve {
 public:
  enum class Interp {
    Linear,  // linear in x: the plain reading of "piecewise-linear in size"
    LogX,    // linear in log(x): for size sweeps spaced by powers of two, where
             // linear-in-bytes would let the widest gap (1 MB..128 MB) dominate
  };

  Curve() = default;
  // Points need not be sorted; x must be distinct. Throws ConfigError (with
  // `where`) on an empty list, duplicate x, non-finite values, or x <= 0 for LogX.
  Curve(std::vector<std::pair<double, double>> points, Interp interp = Interp::Linear,
        const std::string& where = "curve");

  bool empty() const { return pts_.empty(); }
  double operator()(double x) const;
  double max_y() const;
  double min_y() const;
  const std::vector<std::pair<double, double>>& points() const { return pts_; }
  Interp interp() const { return interp_; }

  // The same curve with every y multiplied by k (GB/s -> B/s, us -> s).
  Curve scaled(double k) const;

 private:
  std::vector<std::pair<double, double>> pts_;
  Interp interp_ = Interp::Linear;
};

// JSON forms, at JSON path `where`:
//   [[x, y], ...]                                  (linear)
//   {"points": [[x, y], ...], "interp": "linear" | "log_x", "source": ...}
// `positive_y`: every y must be > 0 (bandwidths, times).
Curve parse_curve(const json& j, const std::string& where, bool positive_y = true);
json curve_to_json(const Curve& c);

}  // namespace kvtier
