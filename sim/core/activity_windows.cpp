#include "sim/core/activity_windows.h"

#include <algorithm>
#include <cmath>

namespace kvtier {

ActivityWindows::ActivityWindows(size_t devices, size_t links, size_t max_windows, double first_width_s)
    : devices_(devices), links_(links), max_(std::max<size_t>(2, max_windows)), width_(first_width_s) {}

void ActivityWindows::cover(double t) {
  while (t >= width_ * double(max_)) {  // merge neighbours: half as many windows, twice as wide
    for (auto* series : {&work_, &bytes_}) {
      auto& s = *series;
      for (size_t w = 0; w < s.size(); ++w) {
        if (w % 2 == 0) {
          s[w / 2] = s[w];
        } else {
          for (size_t i = 0; i < s[w].size(); ++i) s[w / 2][i] += s[w][i];
        }
      }
      s.resize((s.size() + 1) / 2);
    }
    width_ *= 2;
  }
  const size_t need = std::min(max_, static_cast<size_t>(t / width_) + 1);
  while (work_.size() < need) {
    work_.emplace_back(devices_, 0.0);
    bytes_.emplace_back(links_, 0.0);
  }
}

void ActivityWindows::spread(std::vector<std::vector<double>>& series, size_t index, double amount, double t0,
                             double t1) {
  if (!(amount > 0) || !std::isfinite(t0) || !std::isfinite(t1) || t1 < t0 || t0 < 0) return;
  cover(t1);
  const size_t last = series.size() - 1;
  const size_t w0 = std::min(last, static_cast<size_t>(t0 / width_));
  const size_t w1 = std::min(last, static_cast<size_t>(t1 / width_));
  if (w0 == w1 || t1 <= t0) {
    series[w0][index] += amount;
    return;
  }
  for (size_t w = w0; w <= w1; ++w) {
    const double a = std::max(t0, double(w) * width_), b = std::min(t1, double(w + 1) * width_);
    if (b > a) series[w][index] += amount * (b - a) / (t1 - t0);
  }
}

}  // namespace kvtier
