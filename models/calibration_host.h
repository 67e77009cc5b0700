// From a host measurement (cuda_validate/kvtier_host_probe) to what kvtier
// reads: a calibration file and a hardware description of this machine as a
// tiered KV pipeline (attention on the CPU over a DRAM cache, KV on the
// disk), and the held-out check of every fitted path. docs/calibration.md,
// "Host measurement", has the formats; docs/validation.md the results.
//
// Paths and what becomes of them:
//   - every probe (DRAM copies, storage at each queue depth, scoring, codecs,
//     CPU attention): a piecewise-linear time model (calibration_piecewise.h),
//     kept in the calibration's "paths" and checked on held-out sizes;
//   - cpu_attention: the compute device's "attention_us" curve (the
//     piecewise model at the measured sizes, plus a far point along the last
//     segment), which the engine uses for attention;
//   - storage_{read,write}_qd*: the NVMe model's own parameters (sequential
//     bandwidth, per-I/O latency, IOPS ceiling: models/nvme.h), fitted over
//     all sizes and queue depths at once, so the engine's depth dependence
//     comes from the mechanism and not from one curve per depth;
//   - score_int8/int4: the CPU device's scoring rate per core and its cap.
#pragma once

#include <string>
#include <vector>

#include "models/calibration_fit.h"
#include "models/calibration_piecewise.h"
#include "models/nvme.h"

namespace kvtier {

// Names of the probes in a measurement that are a time against bytes (every
// sample has "bytes"; not the two-at-once "concurrent" kind), sorted. Works
// for GPU measurements too.
std::vector<std::string> host_paths(const json& measurement);

// One storage run: Q requests of S bytes together took t microseconds.
struct StoragePoint {
  double request_bytes = 0;
  int queue_depth = 1;
  double median_us = 0;
};
// The samples of storage_read_qd* (write = false) or storage_write_qd*;
// `keep(S)` filters request sizes (the held-out split); empty when none.
std::vector<StoragePoint> storage_points(const json& measurement, bool write, const std::vector<double>* sizes_kept = nullptr);

// Sequential bandwidth, per-I/O latency and IOPS ceiling of one drive such
// that Q S / nvme_drive_throughput_Bps(S, Q) matches the runs' times
// (least squares of the log-time error); rms_log_error is that residual.
struct NvmeFit {
  double seq_GBps = 0, latency_us = 0, kiops = 0;
  double rms_log_error = 0;
  size_t points = 0;
};
NvmeFit fit_nvme(const std::vector<StoragePoint>& pts);
// The time the fitted model gives one run, microseconds.
double nvme_run_us(const NvmeFit& f, double request_bytes, int queue_depth);

// Held-out check of one path: fit on alternate sizes, predict the others.
struct HeldOut {
  std::string path;
  PiecewiseFit fit;  // on the training sizes
  std::vector<MeasuredPoint> train, test;
  std::vector<double> predicted_us;  // per test point
  ErrorStats error;
};
HeldOut held_out(const json& measurement, const std::string& probe, const std::string& where);

struct HostFitOptions {
  std::string measurement_file;  // named in "source"
  std::string compute_device = "host_cpu";
  std::string disk_device = "disk";
  std::string cpu_device = "cpu";
};

// The calibration file: "device" (the CPU model the measurement names),
// "devices.<compute>.attention_us", "paths" (every piecewise fit) and notes.
json fit_host_calibration(const json& measurement, const HostFitOptions& opt, std::vector<std::string>* summary = nullptr);

// A hardware description of the measured machine (tiers [compute, disk]),
// naming `calibration_path`; every figure says which probe it comes from.
json host_hardware(const json& measurement, const std::string& calibration_path, const HostFitOptions& opt);

}  // namespace kvtier
