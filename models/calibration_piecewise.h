// Piecewise-linear time models fitted to measurements, with the segments
// found from the data, and the held-out check of such a fit.
//
// A path (a DRAM copy, a storage read at one queue depth, a codec, a kernel)
// takes t(S) = a + c S microseconds for S bytes within one segment of sizes:
// a fixed cost and a rate. Caches, request splitting and page sizes change
// a and c at sizes that depend on the machine, so the breakpoints are not
// given but chosen: dynamic programming over the sorted sizes picks, for
// each number of segments, the split that minimises the squared relative
// error; one more segment is kept only if it at least halves the remaining
// error (a fit that merely follows noise does not). Each segment holds at
// least two sizes. Between two segments the prediction interpolates the two
// neighbours' lines in log size; outside the measured sizes it extends the
// nearest segment's line.
#pragma once

#include <string>
#include <vector>

#include "models/calibration_fit.h"

namespace kvtier {

struct Segment {
  double lo_bytes = 0, hi_bytes = 0;  // the measured sizes this segment covers
  double fixed_us = 0;                 // a
  double us_per_byte = 0;              // c (>= 0)
};

struct PiecewiseFit {
  std::vector<Segment> segments;
  double predict_us(double bytes) const;
  json to_json() const;
};

// At least two points; `max_segments` >= 1.
PiecewiseFit fit_piecewise(const std::vector<MeasuredPoint>& pts, int max_segments = 4);

// The sizes split in two by alternation: train = sizes 0, 2, 4, ... in
// increasing order, test = 1, 3, 5, ...; every test size lies between two
// training sizes except possibly the largest.
void split_alternate(const std::vector<MeasuredPoint>& pts, std::vector<MeasuredPoint>* train,
                     std::vector<MeasuredPoint>* test);

// Error statistics of predictions against measurements, as fractions:
// |predicted - measured| / measured.
struct ErrorStats {
  size_t n = 0;
  double mape = 0, p50 = 0, p99 = 0, max = 0;
};
ErrorStats error_stats(const std::vector<double>& predicted, const std::vector<double>& measured);
json to_json(const ErrorStats& e);

}  // namespace kvtier
