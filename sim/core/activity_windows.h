// What each device and link did, window by window: the work each device ran
// and the bytes each link carried, spread evenly over the interval each job
// or transfer took. The windows cover the run from time 0 and are all of one
// width; when the run outgrows them, neighbours merge and the width doubles,
// so at most `max_windows` are ever held however long the run. A run's peak
// power is the highest mean power over one window (sim/engine/energy_metrics.h):
// a power meter's reading at that sampling period.
#pragma once

#include <cstddef>
#include <vector>

namespace kvtier {

class ActivityWindows {
 public:
  ActivityWindows() = default;
  ActivityWindows(size_t devices, size_t links, size_t max_windows = 1024, double first_width_s = 1e-4);

  void add_work(size_t device, double amount, double t0, double t1) { spread(work_, device, amount, t0, t1); }
  void add_bytes(size_t link, double bytes, double t0, double t1) { spread(bytes_, link, bytes, t0, t1); }

  double width_s() const { return width_; }
  // Windows that saw activity (later ones are empty).
  size_t windows() const { return work_.size(); }
  const std::vector<double>& work(size_t w) const { return work_[w]; }
  const std::vector<double>& bytes(size_t w) const { return bytes_[w]; }

 private:
  void spread(std::vector<std::vector<double>>& series, size_t index, double amount, double t0, double t1);
  void cover(double t);  // widens the windows until time t falls in one, adds windows up to it

  size_t devices_ = 0, links_ = 0, max_ = 1;
  double width_ = 1;
  std::vector<std::vector<double>> work_, bytes_;  // [window][device], [window][link]
};

}  // namespace kvtier
