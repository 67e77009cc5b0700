#include "models/calibration_fit.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace kvtier {

std::string summary_figure(double v, int digits) {
  std::ostringstream s;
  s.precision(digits);
  s << v;
  return s.str();
}

namespace {

constexpr double kMinLatencyUs = 1e-3;   // a latency curve must be > 0


double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// `prefix` is "<file>: " or "<file>: <path>.".
const json& require_object(const json& j, const std::string& key, const std::string& prefix) {
  if (!j.contains(key)) throw ConfigError(prefix + key + ": required object is missing");
  if (!j[key].is_object()) throw ConfigError(prefix + key + ": expected an object, got " + j[key].dump());
  return j[key];
}

std::string string_or(const json& j, const std::string& key, const std::string& def) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : def;
}

// "<file>: " prefix for messages; the JSON path follows.
std::string file_where(const std::string& file) { return (file.empty() ? std::string("measurement") : file) + ": "; }

void check_header(const json& m, const std::string& fw) {
  if (!m.is_object()) throw ConfigError(fw + "expected a measurement object (written by kvtier_calibrate)");
  if (string_or(m, "format", "") != "kvtier-measurement")
    throw ConfigError(fw + "format: expected \"kvtier-measurement\" (a file written by kvtier_calibrate), got " +
                      (m.contains("format") ? m["format"].dump() : std::string("nothing")));
  if (!m.contains("version") || m["version"] != 1)
    throw ConfigError(fw + "version: expected 1, got " + (m.contains("version") ? m["version"].dump() : "nothing"));
  const json& dev = require_object(m, "device", fw);
  if (!dev.contains("name") || !dev["name"].is_string())
    throw ConfigError(fw + "device.name: expected the device's name (a string)");
  require_object(m, "probes", fw);
}

}  // namespace

std::vector<MeasuredPoint> measured_points(const json& m, const std::string& name, const std::string& where) {
  const std::string pw = where + "probes." + name;
  if (!m.contains("probes") || !m["probes"].is_object() || !m["probes"].contains(name))
    throw ConfigError(pw + ": required probe is missing (was it skipped by --probes or the time limit?)");
  const json& p = m["probes"][name];
  if (!p.is_object() || !p.contains("samples") || !p["samples"].is_array() || p["samples"].empty())
    throw ConfigError(pw + ".samples: expected a non-empty array of {\"bytes\", \"times_us\"}");
  std::vector<MeasuredPoint> out;
  const json& ss = p["samples"];
  for (size_t i = 0; i < ss.size(); ++i) {
    const std::string sw = pw + ".samples[" + std::to_string(i) + "]";
    const json& s = ss[i];
    if (!s.is_object()) throw ConfigError(sw + ": expected an object {\"bytes\", \"times_us\"}, got " + s.dump());
    if (!s.contains("bytes") || !s["bytes"].is_number() || !(s["bytes"].get<double>() > 0))
      throw ConfigError(sw + ".bytes: expected a number > 0");
    if (!s.contains("times_us") || !s["times_us"].is_array() || s["times_us"].empty())
      throw ConfigError(sw + ".times_us: expected a non-empty array of times in microseconds");
    std::vector<double> t;
    for (size_t k = 0; k < s["times_us"].size(); ++k) {
      const json& v = s["times_us"][k];
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
        throw ConfigError(sw + ".times_us[" + std::to_string(k) + "]: expected a time > 0, got " + v.dump());
      t.push_back(v.get<double>());
    }
    out.push_back({s["bytes"].get<double>(), median(std::move(t))});
  }
  std::sort(out.begin(), out.end(), [](const MeasuredPoint& a, const MeasuredPoint& b) { return a.bytes < b.bytes; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].bytes == out[i - 1].bytes)
      throw ConfigError(pw + ".samples: two samples of " + summary_figure(out[i].bytes, 15) + " bytes");
  return out;
}

DirectionFit fit_direction(const std::vector<MeasuredPoint>& pts) {
  DirectionFit f;
  for (const auto& p : pts) f.peak_GBps = std::max(f.peak_GBps, p.bytes / p.median_us * 1e-3);
  const MeasuredPoint& s = pts.front();
  f.latency_us = s.median_us - s.bytes / (f.peak_GBps * 1e3);
  return f;
}

Curve bandwidth_curve(const std::vector<MeasuredPoint>& pts, double latency_us, double peak_GBps,
                      const std::string& where) {
  std::vector<std::pair<double, double>> v;
  for (const auto& p : pts) {
    const double d = p.median_us - latency_us;
    const double bw = d > 0 ? std::min(p.bytes / d * 1e-3, peak_GBps) : peak_GBps;
    v.emplace_back(p.bytes, bw);
  }
  return Curve(std::move(v), Curve::Interp::LogX, where);
}

Curve kernel_time_curve(const std::vector<MeasuredPoint>& pts, const std::string& where) {
  std::vector<std::pair<double, double>> v;
  for (const auto& p : pts) v.emplace_back(p.bytes, p.median_us);
  const MeasuredPoint& last = pts.back();
  double slope = last.median_us / last.bytes;  // us per byte
  if (pts.size() >= 2) {
    const MeasuredPoint& prev = pts[pts.size() - 2];
    const double s = (last.median_us - prev.median_us) / (last.bytes - prev.bytes);
    if (s > 0) slope = s;
  }
  const double far = last.bytes * kCalibrationFarFactor;
  v.emplace_back(far, last.median_us + slope * (far - last.bytes));
  return Curve(std::move(v), Curve::Interp::Linear, where);
}

json fit_calibration(const json& m, const FitOptions& opt, std::vector<std::string>* summary) {
  const std::string fw = file_where(opt.measurement_file);
  check_header(m, fw);
  if (opt.gpu.empty() && opt.link.empty()) throw ConfigError(fw + "nothing to fit: name a GPU device or a link");
  if (opt.host_memory != "pinned" && opt.host_memory != "pageable")
    throw ConfigError("host memory: expected \"pinned\" or \"pageable\", got \"" + opt.host_memory + "\"");
  std::vector<std::string> notes;
  const json& dev = m["device"];
  const std::string device = dev["name"].get<std::string>();
  const std::string date = string_or(m, "date", "unknown date");
  const std::string host = string_or(m, "host", "unknown host");
  std::string versions;
  if (dev.contains("driver_version")) versions += ", driver " + dev["driver_version"].dump();
  if (dev.contains("runtime_version")) versions += ", runtime " + dev["runtime_version"].dump();

  json cal = json::object();
  std::string name = opt.name;
  if (name.empty()) {
    name = "measured_";
    for (char c : device) name += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '_';
  }
  cal["name"] = name;
  cal["device"] = device;  // merge_calibration warns when applied to hardware that does not name it
  cal["source"] = "kvtier_calibrate measurement '" + opt.measurement_file + "' on " + device + " (host " + host +
                  versions + "), " + date + "; fitted by kvtier_fit_calibration (models/calibration_fit.cpp)";

  if (!opt.link.empty()) {
    const std::string h2d = "h2d_" + opt.host_memory, d2h = "d2h_" + opt.host_memory;
    const auto ph = measured_points(m, h2d, fw), pd = measured_points(m, d2h, fw);
    const DirectionFit fh = fit_direction(ph), fd = fit_direction(pd);
    double lat = std::min(fh.latency_us, fd.latency_us);
    if (lat < kMinLatencyUs) {
      notes.push_back("latency estimate " + summary_figure(lat) + " us raised to " + summary_figure(kMinLatencyUs) + " us (must be > 0)");
      lat = kMinLatencyUs;
    }
    const std::string lw = "links." + opt.link;
    const Curve ch = bandwidth_curve(ph, lat, fh.peak_GBps, lw + "." + h2d);
    const Curve cd = bandwidth_curve(pd, lat, fd.peak_GBps, lw + "." + d2h);
    json l = json::object();
    l[opt.h2d_is_forward ? "forward_GBps" : "backward_GBps"] = curve_to_json(ch);
    l[opt.h2d_is_forward ? "backward_GBps" : "forward_GBps"] = curve_to_json(cd);
    l["latency_us"] = json::array({json::array({1, lat})});
    l["source"] = "probes " + h2d + " (host -> device, " + (opt.h2d_is_forward ? "forward" : "backward") + ") and " +
                  d2h + ": cudaMemcpyAsync medians timed by CUDA events; latency = min over directions of t(S_min) - "
                  "S_min / peak (" + h2d + " " + summary_figure(fh.latency_us) + " us, " + d2h + " " + summary_figure(fd.latency_us) +
                  " us); bandwidth(S) = min(S / (t(S) - latency), peak)";
    cal["links"][opt.link] = l;
    notes.push_back(opt.link + ": host -> device peak " + summary_figure(fh.peak_GBps) + " GB/s, device -> host peak " +
                    summary_figure(fd.peak_GBps) + " GB/s (" + opt.host_memory + " host memory), latency " + summary_figure(lat) + " us");
  }

  if (!opt.gpu.empty()) {
    const auto pk = measured_points(m, "kv_read", fw);
    const Curve ck = kernel_time_curve(pk, "devices." + opt.gpu + ".attention_us");
    json d = json::object();
    d["attention_us"] = curve_to_json(ck);
    d["source"] = "probe kv_read: median time of a kernel that streams N bytes of device memory with 16-byte loads "
                  "and reduces them (a memory-bound lower bound for decode attention over N bytes of KV: no "
                  "softmax, no Q.K arithmetic), launch included; the last point, at " + summary_figure(ck.points().back().first) +
                  " bytes, is extrapolated along the slope of the two largest measured sizes";
    cal["devices"][opt.gpu] = d;
    double peak = 0;
    for (const auto& p : pk) peak = std::max(peak, p.bytes / p.median_us * 1e-3);
    notes.push_back(opt.gpu + ".attention_us: " + std::to_string(pk.size()) + " sizes, " + summary_figure(pk.front().bytes) +
                    " B in " + summary_figure(pk.front().median_us) + " us .. " + summary_figure(pk.back().bytes) + " B in " +
                    summary_figure(pk.back().median_us) + " us; peak read " + summary_figure(peak) + " GB/s");
  }

  // Measured but not mapped to a curve the simulator takes: reported in the note.
  const json& probes = m["probes"];
  if (probes.contains("d2d")) {
    double peak = 0;
    for (const auto& p : measured_points(m, "d2d", fw)) peak = std::max(peak, p.bytes / p.median_us * 1e-3);
    notes.push_back("d2d: device-to-device copy peak " + summary_figure(peak) + " GB/s copied (" + summary_figure(2 * peak) +
                    " GB/s of device memory traffic); compare with the gpu's memory_GBps x memory_efficiency");
  }
  for (auto it = probes.begin(); it != probes.end(); ++it) {
    if (it.key().rfind("gemm", 0) != 0 || !it.value().is_object() || !it.value().contains("samples")) continue;
    double best = 0;
    for (const auto& s : it.value()["samples"]) {
      if (!s.is_object() || !s.contains("flops") || !s["flops"].is_number() || !s.contains("times_us")) continue;
      std::vector<double> t;
      for (const auto& v : s["times_us"])
        if (v.is_number() && v.get<double>() > 0) t.push_back(v.get<double>());
      if (!t.empty()) best = std::max(best, s["flops"].get<double>() / median(t) * 1e-6);  // TFLOP/s
    }
    if (best > 0)
      notes.push_back(it.key() + ": " + summary_figure(best) + " TFLOP/s (" + string_or(it.value(), "what", "GEMM probe") + ")");
  }
  cal["note"] = notes;
  if (summary) *summary = notes;
  return cal;
}

json read_json_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw ConfigError(path + ": cannot open file");
  try {
    return json::parse(f);
  } catch (const json::parse_error& e) {
    throw ConfigError(path + ": not valid JSON: " + e.what());
  }
}

void write_json_file(const std::string& path, const json& j) {
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  {
    std::ofstream f(tmp);
    if (!f) throw ConfigError(path + ": cannot write (temporary file " + tmp + ")");
    f << j.dump(2) << "\n";
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw ConfigError(path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw ConfigError(path + ": cannot rename " + tmp + " into place");
  }
}

bool link_h2d_is_forward(const json& hw, const std::string& link, const std::string& gpu, const std::string& where) {
  const std::string lw = where + ".links." + link;
  if (!hw.is_object() || !hw.contains("links") || !hw["links"].is_object() || !hw["links"].contains(link))
    throw ConfigError(lw + ": the hardware description has no link named '" + link + "'");
  const json& l = hw["links"][link];
  if (!l.is_object() || !l.contains("ends") || !l["ends"].is_array() || l["ends"].size() != 2)
    throw ConfigError(lw + ".ends: expected two device names");
  if (l["ends"][1] == gpu) return true;
  if (l["ends"][0] == gpu) return false;
  throw ConfigError(lw + ".ends: " + l["ends"].dump() + " does not include the GPU '" + gpu +
                    "'; name the GPU's host link");
}

}  // namespace kvtier
