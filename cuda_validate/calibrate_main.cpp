// kvtier_calibrate: runs the probes of probes.cu on one CUDA device and writes
// the raw samples as a measurement JSON (docs/calibration.md). Fitting curves
// to it is model code: kvtier_fit_calibration, models/calibration_fit.h.
//
// Exit codes: 0 measured, 77 no CUDA device (ctest's skip code; nothing
// written), 1 a CUDA error (what was measured is still written), 2 bad options.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>

#include "cuda_validate/probes.h"
#include "models/calibration_fit.h"

using namespace kvtier;
using namespace kvtier::cal;

namespace {

constexpr int kSkip = 77;

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string hostname() {
  char buf[256] = {0};
  return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("unknown");
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<size_t> sizes_by_4(size_t lo, size_t hi) {
  std::vector<size_t> v;
  for (size_t s = lo; s <= hi && s > 0; s *= 4) v.push_back(s);
  return v;
}

struct ProbeDef {
  std::string name, kind, what;
  json extra;
};

const std::vector<ProbeDef>& probe_defs() {
  static const std::vector<ProbeDef> defs = {
      {"h2d_pinned", "copy", "cudaMemcpyAsync host -> device from cudaHostAlloc'ed (pinned) memory",
       {{"direction", "host_to_device"}, {"host_memory", "pinned"}}},
      {"d2h_pinned", "copy", "cudaMemcpyAsync device -> host into cudaHostAlloc'ed (pinned) memory",
       {{"direction", "device_to_host"}, {"host_memory", "pinned"}}},
      {"kv_read", "kernel",
       "kernel streaming N bytes of device memory with 16-byte loads, FP16 pairs summed in FP32, one float per block "
       "written; cold L2; a memory-bound lower bound for decode attention over N bytes of KV (no softmax, no Q.K)",
       json::object()},
      {"d2d", "copy", "cudaMemcpyAsync device -> device; bytes copied (device memory traffic is twice that)",
       {{"direction", "device_to_device"}}},
      {"h2d_pageable", "copy", "cudaMemcpyAsync host -> device from malloc'ed (pageable) memory (staged by the driver)",
       {{"direction", "host_to_device"}, {"host_memory", "pageable"}}},
      {"d2h_pageable", "copy", "cudaMemcpyAsync device -> host into malloc'ed (pageable) memory (staged by the driver)",
       {{"direction", "device_to_host"}, {"host_memory", "pageable"}}},
      {"concurrent", "concurrent",
       "two operations started together on two streams (h2d+d2h, h2d+h2d, kv_read+h2d), each one's completion time "
       "from the common start: checks the simulator's sharing assumptions",
       json::object()},
      {"gemm_fp16_wmma", "gemm",
       "n x n x n GEMM by a simple WMMA kernel (one warp per 16x16 tile, fragments loaded from global memory, FP16 "
       "in, FP32 accumulate): a lower bound on FP16 tensor-core throughput, far from cuBLAS",
       json::object()},
  };
  return defs;
}

json sample_json(const Sample& s) {
  json j = json::object();
  if (s.n > 0) {
    j["n"] = s.n;
    j["flops"] = s.flops;
  } else {
    j["bytes"] = s.bytes;
  }
  j["median_us"] = median(s.times_us);
  j["times_us"] = s.times_us;
  if (!s.label.empty()) {
    j["case"] = s.label;
    j["bytes_b"] = s.bytes_b;
    j["median_b_us"] = median(s.times_b_us);
    j["times_b_us"] = s.times_b_us;
  }
  j["wall_us"] = s.wall_us;
  return j;
}

std::string summary(const std::string& name, const ProbeResult& r) {
  std::ostringstream o;
  o.precision(4);
  o << "kvtier_calibrate: " << name << ": " << r.samples.size() << " sizes";
  double best = 0;
  for (const auto& s : r.samples) {
    const double t = median(s.times_us);
    if (t <= 0) continue;
    best = std::max(best, s.n > 0 ? s.flops / t * 1e-6 : s.bytes / t * 1e-3);
  }
  if (!r.samples.empty()) o << ", best " << best << (r.samples.front().n > 0 ? " TFLOP/s" : " GB/s");
  if (r.truncated) o << " (truncated: " << r.note << ")";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtier_calibrate: measure host<->device copies, device copies, a KV-read kernel and a simple GEMM on "
               "one CUDA device; write the raw samples as a measurement JSON (see docs/calibration.md)"};
  std::string out;
  int device = 0, reps = 20, warmup = 3;
  size_t min_bytes = 4096, max_copy = size_t(1) << 30, max_kernel = size_t(4) << 30, gemm_max_n = 8192;
  double time_limit_s = 240;
  std::vector<std::string> probes;
  std::vector<std::string> names;
  for (const auto& d : probe_defs()) names.push_back(d.name);
  app.add_option("--out", out, "measurement JSON to write (atomically)")->required();
  app.add_option("--device", device, "CUDA device index")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--reps", reps, "timed repetitions per size")->capture_default_str()->check(CLI::Range(1, 10000));
  app.add_option("--warmup", warmup, "untimed runs before each size")->capture_default_str()->check(CLI::Range(0, 1000));
  app.add_option("--min-bytes", min_bytes, "smallest size; sizes grow by 4x")->capture_default_str()->check(CLI::Range(size_t(16), size_t(1) << 40));
  app.add_option("--max-copy-bytes", max_copy, "largest copy")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--max-kernel-bytes", max_kernel, "largest kv_read buffer (capped at a quarter of free memory)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--gemm-max-n", gemm_max_n, "largest GEMM order (1024, 2048, ... up to this)")
      ->capture_default_str()->check(CLI::Range(size_t(64), size_t(65536)));
  app.add_option("--probes", probes, "probes to run (default: all, in this order)")
      ->delimiter(',')->check(CLI::IsMember(names));
  app.add_option("--time-limit-s", time_limit_s, "stop starting new sizes after this many seconds")
      ->capture_default_str()->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  std::string why;
  const int n = device_count(&why);
  if (n <= 0) {
    std::cout << "kvtier_calibrate: no CUDA device: skipped (" << why << ")" << std::endl;
    return kSkip;
  }
  if (device >= n) {
    std::cerr << "kvtier_calibrate: error: --device " << device << ": only " << n << " CUDA device(s)\n";
    return 2;
  }

  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(time_limit_s));
  json m = json::object();
  m["format"] = "kvtier-measurement";
  m["version"] = 1;
  m["tool"] = std::string("kvtier_calibrate ") + KVTIER_VERSION;
  m["date"] = utc_now();
  m["host"] = hostname();
  int rc = 0;
  DeviceInfo info;
  try {
    info = open_device(device);
  } catch (const std::exception& e) {
    std::cerr << "kvtier_calibrate: CUDA error: " << e.what() << "\n";
    return 1;
  }
  m["device"] = {{"index", info.index},
                 {"name", info.name},
                 {"pci_bus_id", info.pci_bus_id},
                 {"compute_capability", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor)},
                 {"sm_count", info.sm_count},
                 {"memory_bytes", info.total_bytes},
                 {"free_bytes_at_start", info.free_bytes},
                 {"sm_clock_max_kHz", info.sm_clock_max_kHz},
                 {"memory_clock_max_kHz", info.mem_clock_max_kHz},
                 {"memory_bus_bits", info.mem_bus_bits},
                 {"l2_bytes", info.l2_bytes},
                 {"driver_version", info.driver_version},
                 {"runtime_version", info.runtime_version}};
  std::cerr << "kvtier_calibrate: " << info.name << " (cc " << info.cc_major << "." << info.cc_minor << ", "
            << info.sm_count << " SMs, driver " << info.driver_version << ", runtime " << info.runtime_version << ")\n";

  const size_t kernel_cap = std::min(max_kernel, info.free_bytes / 4);
  std::vector<size_t> gemm_sizes;
  for (size_t g = 1024; g <= gemm_max_n; g *= 2) gemm_sizes.push_back(g);
  m["settings"] = {{"repetitions", reps},         {"warmup", warmup},
                   {"min_bytes", min_bytes},      {"max_copy_bytes", max_copy},
                   {"max_kernel_bytes", kernel_cap}, {"gemm_max_n", gemm_max_n},
                   {"time_limit_s", time_limit_s}, {"timer", "CUDA events around the operation on one stream; "
                                                             "wall_us: host steady clock around issue + sync"}};
  m["probes"] = json::object();

  for (const auto& def : probe_defs()) {
    if (!probes.empty() && std::find(probes.begin(), probes.end(), def.name) == probes.end()) continue;
    Settings s;
    s.repetitions = reps;
    s.warmup = warmup;
    s.deadline = deadline;
    s.sizes = def.kind == "gemm" ? gemm_sizes : sizes_by_4(min_bytes, def.name == "kv_read" ? kernel_cap : max_copy);
    json pj = def.extra;
    pj["kind"] = def.kind;
    pj["what"] = def.what;
    ProbeResult r;
    try {
      if (def.kind == "copy") {
        const std::string dir = def.extra["direction"];
        const CopyKind k = dir == "host_to_device"   ? CopyKind::HostToDevice
                           : dir == "device_to_host" ? CopyKind::DeviceToHost
                                                     : CopyKind::DeviceToDevice;
        r = probe_copy(k, def.extra.value("host_memory", "") == "pinned", s);
      } else if (def.kind == "kernel") {
        r = probe_kv_read(s);
      } else if (def.kind == "concurrent") {
        r = probe_concurrent(std::min<size_t>(max_copy, size_t(256) << 20), std::min<size_t>(kernel_cap, size_t(1) << 30), s);
      } else {
        r = probe_gemm_wmma(s);
      }
    } catch (const std::exception& e) {
      pj["error"] = e.what();
      rc = 1;
      std::cerr << "kvtier_calibrate: " << def.name << ": CUDA error: " << e.what() << "\n";
    }
    pj["truncated"] = r.truncated;
    if (!r.note.empty()) pj["note"] = r.note;
    pj["samples"] = json::array();
    for (const auto& smp : r.samples) pj["samples"].push_back(sample_json(smp));
    m["probes"][def.name] = pj;
    if (!pj.contains("error")) std::cerr << summary(def.name, r) << "\n";
  }
  m["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  try {
    write_json_file(out, m);
  } catch (const std::exception& e) {
    std::cerr << "kvtier_calibrate: error: " << e.what() << "\n";
    return 1;
  }
  std::cout << "kvtier_calibrate: wrote " << out << "\n";
  return rc;
}
