// Fitting calibration curves to measurements. cuda_validate/kvtier_calibrate
// measures (host<->device copies, device copies, a KV-read kernel) and writes a
// measurement JSON; this turns one into a calibration file, the format
// models/calibration.h reads. docs/calibration.md has both formats.
//
// Links: a transfer of S bytes takes latency + S / bandwidth(S) in the engine
// (one latency per link, one bandwidth curve per direction). We take the
// latency from the smallest transfers,
//   L_dir = t(S_min) - S_min / P_dir,  P_dir = max over S of S / t(S),
// the link's latency L = min over both directions of L_dir, and per direction
//   bandwidth(S) = min(S / (t(S) - L), P_dir),
// so the simulated time L + S / bandwidth(S) reproduces every measured median
// t(S) (up to the cap, which keeps a noisy small transfer from setting the
// link's nominal rate). For an ideal t = L + S/B this yields L and B.
//
// GPU: "attention_us" is the kv_read kernel's median time against the bytes it
// read (linear interpolation), plus one point far beyond the largest size,
// extrapolated along the slope of the two largest, because a curve holds its
// end value and a kernel over twice the bytes does not take the same time.
#pragma once

#include <string>
#include <vector>

#include "models/curve.h"
#include "models/param.h"

namespace kvtier {

// One measured size: the transfer or kernel bytes and the median of its
// repetitions, microseconds.
struct MeasuredPoint {
  double bytes = 0;
  double median_us = 0;
};

// The samples of probe `name` in a measurement, sorted by bytes, medians
// recomputed from the raw times. ConfigError "<prefix>probes.<name>...: ..."
// when the probe is missing or malformed; `prefix` is e.g. "meas.json: ".
std::vector<MeasuredPoint> measured_points(const json& measurement, const std::string& name, const std::string& prefix);

struct DirectionFit {
  double peak_GBps = 0;    // best measured effective bandwidth, S / t(S)
  double latency_us = 0;   // t(S_min) - S_min / peak
};
DirectionFit fit_direction(const std::vector<MeasuredPoint>& pts);

// bandwidth(S) = min(S / (t(S) - latency), peak), GB/s, log-x interpolated.
Curve bandwidth_curve(const std::vector<MeasuredPoint>& pts, double latency_us, double peak_GBps,
                      const std::string& where);

// Kernel time in microseconds against bytes, with the extrapolated far point.
Curve kernel_time_curve(const std::vector<MeasuredPoint>& pts, const std::string& where);

// The extrapolated kernel point of a fitted curve: this many times the
// largest measured size (the host and GPU fits share it).
constexpr double kCalibrationFarFactor = 1024.0;
// A figure in a fit's summary lines, to `digits` significant digits.
std::string summary_figure(double v, int digits = 4);

struct FitOptions {
  std::string measurement_file;  // named in "source"
  std::string gpu = "gpu";       // hardware device that gets attention_us; "" = none
  std::string link = "pcie_gpu"; // hardware link that gets the host<->device curves; "" = none
  bool h2d_is_forward = true;    // the link's ends are [host side, gpu]
  std::string host_memory = "pinned";  // which copy probes: "pinned" or "pageable"
  std::string name;              // calibration name; "" = derived from the device
};

// The calibration file (models/calibration.h format). `summary` receives one
// human-readable line per fitted quantity. ConfigError, naming
// opt.measurement_file and the JSON path, on a malformed measurement.
json fit_calibration(const json& measurement, const FitOptions& opt, std::vector<std::string>* summary = nullptr);

// Reads a JSON file; ConfigError "<path>: ..." when unreadable or malformed.
json read_json_file(const std::string& path);

// Writes `j` to `path` atomically (a temporary file in the same directory,
// then rename), so a reader never sees half a file. ConfigError on failure.
void write_json_file(const std::string& path, const json& j);

// Which direction of `link` in hardware description `hw` runs host -> `gpu`:
// true when the GPU is the link's second end (forward is a -> b). ConfigError
// when the link or the GPU is absent or the GPU is not one of its ends.
bool link_h2d_is_forward(const json& hw, const std::string& link, const std::string& gpu, const std::string& where);

}  // namespace kvtier
