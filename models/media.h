// The read/write path of a memory or storage medium when calibrated curves
// replace its constant bandwidths: the curve's peak becomes the media link's
// bandwidth and the curve divided by that peak the per-size efficiency the
// engine applies as a bandwidth factor. On a shared bus (DRAM) reads and
// writes are one link, so both curves are taken relative to the larger peak.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "models/calibration.h"
#include "models/device.h"

namespace kvtier {

class MediaCurves {
 public:
  static std::vector<std::string> names() { return {"read_GBps", "write_GBps"}; }
  MediaCurves() = default;
  // Parses p["curves"]; throws ConfigError with a path relative to the device.
  MediaCurves(const json& p, bool shared) : shared_(shared) {
    CurveSet cs = parse_curve_set(p, names(), "");
    if (cs.count("read_GBps")) read_ = cs["read_GBps"].scaled(kGB);
    if (cs.count("write_GBps")) write_ = cs["write_GBps"].scaled(kGB);
  }
  MediaCurves(Curve read_Bps, Curve write_Bps, bool shared)
      : read_(std::move(read_Bps)), write_(std::move(write_Bps)), shared_(shared) {}

  bool has_read() const { return !read_.empty(); }
  bool has_write() const { return !write_.empty(); }
  const Curve& read_curve() const { return read_; }
  const Curve& write_curve() const { return write_; }

  // The media link's bandwidth: the calibrated peak if there is a curve.
  double read_Bps(double nominal) const {
    if (shared_) return shared_peak(nominal);
    return read_.empty() ? nominal : read_.max_y();
  }
  double write_Bps(double nominal) const {
    if (shared_) return shared_peak(nominal);
    return write_.empty() ? nominal : write_.max_y();
  }
  // NaN where there is no curve for that direction: the caller falls back to
  // its own analytic model.
  double read_efficiency(double bytes, double nominal) const { return eff(read_, bytes, read_Bps(nominal)); }
  double write_efficiency(double bytes, double nominal) const { return eff(write_, bytes, write_Bps(nominal)); }

 private:
  double shared_peak(double nominal) const {
    if (read_.empty() && write_.empty()) return nominal;
    double m = 0;
    if (!read_.empty()) m = std::max(m, read_.max_y());
    if (!write_.empty()) m = std::max(m, write_.max_y());
    return m;
  }
  static double eff(const Curve& c, double bytes, double peak) {
    if (c.empty()) return std::numeric_limits<double>::quiet_NaN();
    return std::clamp(c(bytes) / peak, 1e-9, 1.0);
  }
  Curve read_, write_;
  bool shared_ = true;
};

// 1.0 where a MediaCurves efficiency is NaN (no curve): constant bandwidth.
inline double or_one(double e) { return std::isnan(e) ? 1.0 : e; }

// A memory tier whose medium is a bus (DRAM, HBM, GDDR, a CXL expander):
// capacity, read and write bandwidth, one latency, optional calibrated curves.
// The kinds differ only in how they derive these from datasheet terms, which
// each does in its constructor before handing them here.
class BusMemory : public DeviceModel {
 public:
  BusMemory(const json& p, double capacity_bytes, double read_Bps, double write_Bps, double latency_s, bool shared)
      : cap_(capacity_bytes), rd_(read_Bps), wr_(write_Bps), lat_(latency_s), shared_(shared), curves_(p, shared) {}
  DeviceRole role() const override { return DeviceRole::Memory; }
  double capacity_bytes() const override { return cap_; }
  double read_Bps() const override { return curves_.read_Bps(rd_); }
  double write_Bps() const override { return curves_.write_Bps(wr_); }
  double media_latency_s() const override { return lat_; }
  bool media_shared() const override { return shared_; }
  double read_efficiency(double b, int) const override { return or_one(curves_.read_efficiency(b, rd_)); }
  double write_efficiency(double b, int) const override { return or_one(curves_.write_efficiency(b, wr_)); }

 private:
  double cap_, rd_, wr_, lat_;
  bool shared_;
  MediaCurves curves_;
};

}  // namespace kvtier
