// An NVMe SSD (or a RAID-0 of identical ones) as a KV tier: capacity, read and
// write paths that are separate (flash reads and programs proceed largely
// independently), throughput against request size and queue depth (nvme.h),
// endurance, and optionally a pSLC region holding the KV (HiFC: a slice of
// the drive run as single-level cells: less capacity, faster programs, several
// times the write endurance).
#include "models/nvme.h"

#include <algorithm>
#include <cmath>

#include "models/media.h"

namespace kvtier {

double nvme_drive_throughput_Bps(double seq_Bps, double iops, double latency_s, double s, double q) {
  if (!(s > 0) || !(seq_Bps > 0)) return 0;
  q = std::max(q, 1e-9);
  double r = seq_Bps;
  if (iops > 0) r = std::min(r, iops * s);
  r = std::min(r, q * s / (latency_s + s / seq_Bps));
  return r;
}

double nvme_throughput_Bps(const NvmeSpec& sp, bool write, double s, double q) {
  q = std::max(q, 1.0);
  const int n = std::max(sp.drives, 1);
  double chunks = sp.stripe_bytes > 0 ? std::ceil(s / sp.stripe_bytes) : 1;
  double m = std::min<double>(n, std::max(chunks, 1.0));
  double per_drive = write ? nvme_drive_throughput_Bps(sp.write_Bps, sp.write_iops, sp.write_latency_s, s / m, q * m / n)
                           : nvme_drive_throughput_Bps(sp.read_Bps, sp.read_iops, sp.read_latency_s, s / m, q * m / n);
  return n * per_drive;
}

class Nvme : public DeviceModel {
 public:
  static ParamList params() {
    return {
        positive("capacity_GB", nullptr, "capacity of one drive available to KV, decimal GB"),
        positive("read_GBps", nullptr, "sequential read bandwidth of one drive, GB/s"),
        positive("write_GBps", nullptr, "sequential write bandwidth of one drive, GB/s"),
        num("latency_us", 80.0, "per-I/O read latency at queue depth 1, microseconds", 0),
        num("write_latency_us", 0.0, "per-I/O write latency at depth 1, microseconds (0 = latency_us)", 0),
        num("read_kIOPS", 0.0, "random read ceiling of one drive, thousands of IOPS (0 = none)", 0),
        num("write_kIOPS", 0.0, "random write ceiling of one drive, thousands of IOPS (0 = none)", 0),
        integer("drives", 1, "RAID-0 members (identical drives striped; capacity, bandwidth and IOPS add)", 1, 64),
        positive("stripe_KiB", 512, "RAID-0 chunk size, KiB (mdadm default 512)"),
        num("rated_TBW", 0.0, "rated endurance of one drive, TB written (0 = unknown)", 0),
        num("write_amplification", 1.0, "NAND bytes per host byte, relative to the TBW rating's workload", 1.0),
        num("pslc_GB", 0.0, "per drive: a pSLC region that holds the KV (HiFC); 0 = KV in normal TLC", 0),
        num("pslc_write_GBps", 0.0, "write bandwidth into the pSLC region, GB/s (0 = write_GBps)", 0),
        num("pslc_endurance_factor", 8.0, "endurance of pSLC relative to TLC per byte written (HiFC: up to 8x)", 1.0),
        curves_param(MediaCurves::names()),
    };
  }
  explicit Nvme(const json& p) : curves_(p, false) {
    spec_.drives = static_cast<int>(get_int(p, "drives"));
    spec_.read_Bps = get_num(p, "read_GBps") * kGB;
    spec_.write_Bps = get_num(p, "write_GBps") * kGB;
    spec_.read_latency_s = get_num(p, "latency_us") * kUs;
    double wl = get_num(p, "write_latency_us");
    spec_.write_latency_s = wl > 0 ? wl * kUs : spec_.read_latency_s;
    spec_.read_iops = get_num(p, "read_kIOPS") * 1e3;
    spec_.write_iops = get_num(p, "write_kIOPS") * 1e3;
    spec_.stripe_bytes = get_num(p, "stripe_KiB") * 1024;
    const double n = spec_.drives;
    const double pslc = get_num(p, "pslc_GB") * kGB;
    const double cap = get_num(p, "capacity_GB") * kGB;
    if (pslc > cap)
      throw ConfigError("pslc_GB: the pSLC region (" + std::to_string(pslc / kGB) + " GB) exceeds the drive's capacity (" +
                        std::to_string(cap / kGB) + " GB)");
    cap_ = n * (pslc > 0 ? pslc : cap);
    if (pslc > 0 && get_num(p, "pslc_write_GBps") > 0) spec_.write_Bps = get_num(p, "pslc_write_GBps") * kGB;
    tbw_ = n * get_num(p, "rated_TBW") * 1e12 * (pslc > 0 ? get_num(p, "pslc_endurance_factor") : 1.0);
    waf_ = get_num(p, "write_amplification");
  }
  const NvmeSpec& spec() const { return spec_; }
  DeviceRole role() const override { return DeviceRole::Storage; }
  double capacity_bytes() const override { return cap_; }
  double read_Bps() const override { return curves_.read_Bps(spec_.drives * spec_.read_Bps); }
  double write_Bps() const override { return curves_.write_Bps(spec_.drives * spec_.write_Bps); }
  double media_latency_s() const override { return spec_.read_latency_s; }
  bool media_shared() const override { return false; }
  // A calibrated curve (measured at the depth the engine uses) replaces the
  // analytic model; it carries no depth dependence of its own.
  double read_efficiency(double s, int q) const override {
    double e = curves_.read_efficiency(s, read_Bps());
    if (!std::isnan(e)) return e;
    return std::clamp(nvme_throughput_Bps(spec_, false, s, q) / read_Bps(), 1e-9, 1.0);
  }
  double write_efficiency(double s, int q) const override {
    double e = curves_.write_efficiency(s, write_Bps());
    if (!std::isnan(e)) return e;
    return std::clamp(nvme_throughput_Bps(spec_, true, s, q) / write_Bps(), 1e-9, 1.0);
  }
  double rated_endurance_bytes() const override { return tbw_; }
  double write_amplification() const override { return waf_; }

 private:
  NvmeSpec spec_;
  MediaCurves curves_;
  double cap_ = 0, tbw_ = 0, waf_ = 1;
};
KVTIER_REGISTER(DeviceModel, Nvme, "nvme",
                "NVMe SSD or RAID-0 of N: capacity, read/write bandwidth, per-I/O latency, IOPS, endurance, pSLC region");

}  // namespace kvtier
