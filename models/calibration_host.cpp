#include "models/calibration_host.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "models/curve.h"
#include "models/device.h"

namespace kvtier {

namespace {



bool has_samples(const json& p) { return p.is_object() && p.contains("samples") && p["samples"].is_array() && !p["samples"].empty(); }

const json& probes_of(const json& m) {
  static const json empty = json::object();
  return m.is_object() && m.contains("probes") && m["probes"].is_object() ? m["probes"] : empty;
}

double best_GBps(const std::vector<MeasuredPoint>& pts, double scale = 1) {
  double b = 0;
  for (const auto& p : pts) b = std::max(b, p.bytes * scale / p.median_us * 1e-3);
  return b;
}

std::string slug(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  return o;
}

}  // namespace

std::vector<std::string> host_paths(const json& m) {
  std::vector<std::string> out;
  const json& p = probes_of(m);
  for (auto it = p.begin(); it != p.end(); ++it) {
    const json& v = it.value();
    // A path is a time against bytes: not two operations at once, not GEMM orders.
    if (!has_samples(v) || v.value("kind", "") == "concurrent") continue;
    bool bytes = true;
    for (const auto& smp : v["samples"]) bytes = bytes && smp.is_object() && smp.contains("bytes");
    if (bytes) out.push_back(it.key());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<StoragePoint> storage_points(const json& m, bool write, const std::vector<double>* keep) {
  std::vector<StoragePoint> out;
  const std::string prefix = write ? "storage_write_qd" : "storage_read_qd";
  const json& p = probes_of(m);
  for (auto it = p.begin(); it != p.end(); ++it) {
    if (it.key().rfind(prefix, 0) != 0 || !has_samples(it.value())) continue;
    const int q = it.value().value("queue_depth", std::atoi(it.key().c_str() + prefix.size()));
    for (const auto& mp : measured_points(m, it.key(), "")) {
      if (keep && std::find(keep->begin(), keep->end(), mp.bytes) == keep->end()) continue;
      out.push_back({mp.bytes, std::max(1, q), mp.median_us});
    }
  }
  return out;
}

double nvme_run_us(const NvmeFit& f, double s, int q) {
  const double thr = nvme_drive_throughput_Bps(f.seq_GBps * kGB, f.kiops * 1e3, f.latency_us * kUs, s, q);
  return thr > 0 ? double(q) * s / thr * 1e6 : 0;
}

NvmeFit fit_nvme(const std::vector<StoragePoint>& pts) {
  NvmeFit f;
  f.points = pts.size();
  if (pts.empty()) return f;
  // Starting point: the best rate seen, the smallest depth-1 run's time, the
  // best small-request rate.
  double best = 0, small_rate = 0, lat = 1e9;
  for (const auto& p : pts) {
    best = std::max(best, p.queue_depth * p.request_bytes / p.median_us * 1e-3);
    if (p.request_bytes <= 16384) small_rate = std::max(small_rate, p.queue_depth / p.median_us * 1e3);  // kIOPS
    if (p.queue_depth == 1) lat = std::min(lat, p.median_us);
  }
  if (lat == 1e9) lat = 100;
  if (small_rate <= 0) small_rate = 1e3;
  double x[3] = {std::log(best), std::log(lat), std::log(small_rate)};
  auto cost = [&](const double* v) {
    NvmeFit t;
    t.seq_GBps = std::exp(v[0]);
    t.latency_us = std::exp(v[1]);
    t.kiops = std::exp(v[2]);
    double e = 0;
    for (const auto& p : pts) {
      const double r = std::log(nvme_run_us(t, p.request_bytes, p.queue_depth) / p.median_us);
      e += r * r;
    }
    return e;
  };
  // Coordinate search in log space with a shrinking step: three smooth-ish
  // parameters, a few dozen points; deterministic.
  double c = cost(x);
  for (double step = std::log(4.0); step > 1e-4; step *= 0.5) {
    bool moved = true;
    for (int it = 0; moved && it < 200; ++it) {
      moved = false;
      for (int k = 0; k < 3; ++k)
        for (double d : {step, -step}) {
          double y[3] = {x[0], x[1], x[2]};
          y[k] += d;
          const double cy = cost(y);
          if (cy < c) {
            c = cy;
            x[k] = y[k];
            moved = true;
          }
        }
    }
  }
  f.seq_GBps = std::exp(x[0]);
  f.latency_us = std::exp(x[1]);
  f.kiops = std::exp(x[2]);
  f.rms_log_error = std::sqrt(c / double(pts.size()));
  return f;
}

HeldOut held_out(const json& m, const std::string& probe, const std::string& where) {
  HeldOut h;
  h.path = probe;
  const auto pts = measured_points(m, probe, where);
  split_alternate(pts, &h.train, &h.test);
  if (h.train.size() < 2) return h;
  h.fit = fit_piecewise(h.train);
  std::vector<double> meas;
  for (const auto& t : h.test) {
    h.predicted_us.push_back(h.fit.predict_us(t.bytes));
    meas.push_back(t.median_us);
  }
  h.error = error_stats(h.predicted_us, meas);
  return h;
}

json fit_host_calibration(const json& m, const HostFitOptions& opt, std::vector<std::string>* summary) {
  const std::string fw = (opt.measurement_file.empty() ? std::string("measurement") : opt.measurement_file) + ": ";
  if (!m.is_object() || m.value("format", "") != "kvtier-measurement")
    throw ConfigError(fw + "format: expected \"kvtier-measurement\" (a file written by kvtier_host_probe)");
  if (!m.contains("device") || !m["device"].is_object() || !m["device"].contains("name") || !m["device"]["name"].is_string())
    throw ConfigError(fw + "device.name: expected the measured machine's CPU model (a string)");
  const std::string device = m["device"]["name"].get<std::string>();
  const std::string host = m.value("host", std::string("unknown host"));
  std::vector<std::string> notes;
  json cal = json::object();
  cal["name"] = "host_" + slug(host);
  cal["device"] = device;
  cal["source"] = "kvtier_host_probe measurement '" + opt.measurement_file + "' on " + device + " (host " + host + "), " +
                  m.value("date", std::string("unknown date")) +
                  "; fitted by models/calibration_host.cpp (piecewise-linear per path, segments from the data)";
  json paths = json::object();
  for (const auto& p : host_paths(m)) {
    const auto pts = measured_points(m, p, fw);
    if (pts.size() < 2) continue;
    const PiecewiseFit f = fit_piecewise(pts);
    paths[p] = {{"segments", f.to_json()}, {"sizes", pts.size()}};
  }
  cal["paths"] = paths;
  if (has_samples(probes_of(m).value("cpu_attention", json()))) {
    const auto pts = measured_points(m, "cpu_attention", fw);
    const PiecewiseFit f = fit_piecewise(pts);
    std::vector<std::pair<double, double>> v;
    for (const auto& p : pts) v.emplace_back(p.bytes, f.predict_us(p.bytes));
    const double far = pts.back().bytes * kCalibrationFarFactor;
    v.emplace_back(far, f.predict_us(far));
    const Curve c(std::move(v), Curve::Interp::Linear, "devices." + opt.compute_device + ".attention_us");
    cal["devices"][opt.compute_device] = {
        {"attention_us", curve_to_json(c)},
        {"source", "probe cpu_attention: the pipeline's attention kernel (q.K, softmax, .V, one thread) over N bytes of "
                   "FP16 KV in DRAM; the piecewise-linear fit at the measured sizes, and one far point along the last "
                   "segment"}};
    notes.push_back(opt.compute_device + ".attention_us: " + std::to_string(f.segments.size()) + " segment(s), " +
                    summary_figure(best_GBps(pts)) + " GB/s of KV at best");
  }
  for (bool w : {false, true}) {
    const auto sp = storage_points(m, w);
    if (sp.empty()) continue;
    const NvmeFit nf = fit_nvme(sp);
    notes.push_back(std::string(w ? "storage writes" : "storage reads") + ": " + summary_figure(nf.seq_GBps) + " GB/s sequential, " +
                    summary_figure(nf.latency_us) + " us per I/O, " + summary_figure(nf.kiops) + " kIOPS ceiling (rms log error " +
                    summary_figure(nf.rms_log_error, 3) + " over " + std::to_string(nf.points) + " runs)");
  }
  cal["note"] = notes;
  if (summary) *summary = notes;
  return cal;
}

json host_hardware(const json& m, const std::string& calibration_path, const HostFitOptions& opt) {
  const json mach = m.value("machine", json::object());
  const json st = m.value("storage", json::object());
  const std::string host = m.value("host", std::string("unknown"));
  const std::string cpu = m["device"].value("name", std::string("unknown CPU"));
  const std::string mfile = opt.measurement_file;
  json hw = json::object();
  hw["name"] = "host_" + slug(host);
  hw["description"] = "This machine as a tiered KV pipeline: attention on the CPU (" + cpu + ", " +
                      std::to_string(mach.value("online_cpus", 0)) + " CPUs) over a DRAM cache, KV on its disk (" +
                      st.value("device_model", std::string("unknown disk")) + ", " +
                      st.value("file_system", std::string("unknown file system")) + ")";
  hw["gpu"] = opt.compute_device;
  hw["tiers"] = {opt.compute_device, opt.disk_device};
  hw["calibration"] = calibration_path;
  const double mem_GB = mach.value("memory_bytes", 8e9) / kGB;
  double att_GBps = 10, att_flops = 1e11;
  const json& pr = probes_of(m);
  if (has_samples(pr.value("cpu_attention", json()))) {
    const auto pts = measured_points(m, "cpu_attention", "");
    att_GBps = best_GBps(pts);
    // The engine counts 4 x tokens x heads x head_dim attention FLOPs: one
    // per FP16 KV byte when heads = kv_heads. Twice the best measured rate,
    // so that the measured attention_us curve, not this bound, decides.
    att_flops = 2.0 * att_GBps * kGB;
  }
  json dev = json::object();
  dev[opt.compute_device] = {
      {"kind", "gpu"},
      {"capacity_GB", std::floor(mem_GB * 0.5 * 100) / 100},
      {"reserved_GB", 0},
      {"memory_GBps", att_GBps},
      {"fp16_TFLOPS", att_flops / 1e12},
      {"launch_overhead_us", 0},
      {"source",
       {{"kind", "the CPU cores computing attention, with the DRAM cache as their memory: the engine's compute device "
                 "(a device of kind gpu; attention time comes from the calibration's attention_us)"},
        {"capacity_GB", "half of MemTotal (" + summary_figure(mem_GB) + " GB) in " + mfile + "; validation runs set the cache size"},
        {"memory_GBps", "probe cpu_attention: best KV bytes per second of the attention kernel"},
        {"fp16_TFLOPS", "probe cpu_attention: twice its best FLOP rate (one FLOP per KV byte as the engine counts), so that the measured attention_us curve decides"},
        {"launch_overhead_us", "none: a function call"}}}};
  dev["root"] = {{"kind", "switch"}, {"source", "the host's I/O path, structural"}};
  auto nv = [&](bool w) { return fit_nvme(storage_points(m, w)); };
  const NvmeFit r = nv(false), wf = nv(true);
  if (r.points == 0 || wf.points == 0)
    throw ConfigError(mfile + ": probes.storage_read_qd*/storage_write_qd*: no storage samples (was storage skipped? " +
                      st.value("skipped", std::string("")) + ")");
  dev[opt.disk_device] = {
      {"kind", "nvme"},
      {"capacity_GB", std::floor(st.value("free_bytes", 1e11) / kGB)},
      {"read_GBps", r.seq_GBps},
      {"write_GBps", wf.seq_GBps},
      {"latency_us", r.latency_us},
      {"write_latency_us", wf.latency_us},
      {"read_kIOPS", r.kiops},
      {"write_kIOPS", wf.kiops},
      {"source",
       {{"device", st.value("device_model", std::string("unknown")) + " (" + st.value("block_device", std::string("?")) +
                       "), " + st.value("file_system", std::string("?")) + " at " + st.value("mount_point", std::string("?"))},
        {"capacity_GB", "free space at the probe's directory"},
        {"read_GBps, latency_us, read_kIOPS",
         "fitted to probes storage_read_qd* (O_DIRECT through io_uring, every size and depth at once; rms log-time error " +
             summary_figure(r.rms_log_error, 3) + ")"},
        {"write_GBps, write_latency_us, write_kIOPS",
         "fitted to probes storage_write_qd* (rms log-time error " + summary_figure(wf.rms_log_error, 3) + ")"}}}};
  if (has_samples(pr.value("score_int8_1t", json()))) {
    const auto one = measured_points(m, "score_int8_1t", ""), all = measured_points(m, "score_int8_all", "");
    dev[opt.cpu_device] = {
        {"kind", "cpu"},
        {"cores", std::max(1, mach.value("online_cpus", 1))},
        {"fp32_GFLOPS_per_core", std::max(1.0, att_flops / 2e9)},
        {"scoring_GBps_per_core", best_GBps(one)},
        {"scoring_max_GBps", best_GBps(all)},
        {"source",
         {{"scoring_GBps_per_core", "probe score_int8_1t: best INT8 key bytes scored per second on one core"},
          {"scoring_max_GBps", "probe score_int8_all: best over all cores"},
          {"fp32_GFLOPS_per_core", "probe cpu_attention's FLOP rate on one thread"}}}};
  }
  hw["devices"] = dev;
  hw["links"] = {
      {"disk_io", {{"ends", {"root", opt.disk_device}}, {"bandwidth_GBps", 1000}, {"latency_us", 0}, {"duplex", "fatpipe"},
                   {"source", "structural: the disk's own media links carry its limits (its latency included)"}}},
      {"host_port", {{"ends", {"root", opt.compute_device}}, {"bandwidth_GBps", 1000}, {"latency_us", 0}, {"duplex", "fatpipe"},
                     {"source", "structural: reads land in the DRAM cache the CPU computes from"}}}};
  if (dev.contains(opt.cpu_device))
    hw["links"]["cpu_port"] = {{"ends", {"root", opt.cpu_device}}, {"bandwidth_GBps", 1000}, {"latency_us", 0},
                               {"duplex", "fatpipe"}, {"source", "structural"}};
  return hw;
}

}  // namespace kvtier
