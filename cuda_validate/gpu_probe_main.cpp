// kvtier_gpu_probe: the decode-side GPU kernels of gpu_kernels.h (paged
// decode attention against context length and batch, Q.K^T scoring with
// INT8/INT4 keys and top-k, a copy next to a memory-bound kernel), written as
// a measurement JSON like kvtier_calibrate's (docs/calibration.md, "GPU
// kernels"), for `kvtier validate --paths-only` to check on held-out sizes.
//
// Exit codes: 0 measured, 77 no CUDA device (nothing written), 1 a CUDA error
// (what was measured is still written), 2 bad options.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <ctime>
#include <iostream>

#include "cuda_validate/gpu_kernels.h"
#include "models/calibration_fit.h"

using namespace kvtier;
using namespace kvtier::cal;

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

json to_json(const ProbeResult& r, const std::string& kind, const std::string& what) {
  json p = {{"kind", kind}, {"what", what}, {"truncated", r.truncated}, {"note", r.note}, {"samples", json::array()}};
  for (const auto& s : r.samples) {
    json j = {{"bytes", s.bytes}, {"median_us", median(s.times_us)}, {"times_us", s.times_us}, {"wall_us", s.wall_us}};
    if (!s.label.empty()) j["case"] = s.label;
    if (!s.times_b_us.empty()) {
      j["bytes_b"] = s.bytes_b;
      j["median_b_us"] = median(s.times_b_us);
      j["times_b_us"] = s.times_b_us;
    }
    p["samples"].push_back(j);
  }
  return p;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvtier_gpu_probe: paged decode attention, INT8/INT4 Q.K^T scoring with top-k, and copy/kernel "
               "interference on one CUDA device; writes a measurement JSON (docs/calibration.md)"};
  std::string out;
  int device = 0;
  Settings s;
  s.repetitions = 10;
  s.warmup = 2;
  double limit = 120;
  std::vector<std::string> probes;
  app.add_option("--out", out, "measurement JSON to write (atomically)")->required();
  app.add_option("--device", device, "CUDA device index")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--reps", s.repetitions, "timed repetitions per size")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--warmup", s.warmup, "untimed runs per size")->capture_default_str()->check(CLI::Range(0, 100));
  app.add_option("--time-limit-s", limit, "stop starting new sizes after this long")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--probes", probes, "subset: paged, scoring, interference")
      ->delimiter(',')->check(CLI::IsMember({"paged", "scoring", "interference"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  std::string why;
  const int n = device_count(&why);
  if (n <= 0) {
    std::cout << "kvtier_gpu_probe: no CUDA device: skipped (" << why << ")" << std::endl;
    return 77;
  }
  if (device >= n) {
    std::cerr << "kvtier_gpu_probe: error: --device " << device << ": only " << n << " CUDA device(s)\n";
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  s.deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(limit));
  auto want = [&](const char* p) { return probes.empty() || std::find(probes.begin(), probes.end(), p) != probes.end(); };
  json m = {{"format", "kvtier-measurement"}, {"version", 1}, {"tool", std::string("kvtier_gpu_probe ") + KVTIER_VERSION},
            {"date", utc_now()}, {"probes", json::object()}};
  int rc = 0;
  try {
    const DeviceInfo d = open_device(device);
    m["device"] = {{"index", d.index}, {"name", d.name}, {"pci_bus_id", d.pci_bus_id},
                   {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                   {"sm_count", d.sm_count}, {"memory_bytes", d.total_bytes}, {"driver_version", d.driver_version},
                   {"runtime_version", d.runtime_version}};
    const size_t cap = std::min<size_t>(size_t(16) << 30, d.free_bytes / 3);
    auto run = [&](const std::string& name, const std::string& kind, const std::string& what,
                   const std::function<ProbeResult()>& f) {
      try {
        m["probes"][name] = to_json(f(), kind, what);
        std::cerr << "kvtier_gpu_probe: " << name << ": " << m["probes"][name]["samples"].size() << " sizes\n";
      } catch (const std::exception& e) {
        m["probes"][name] = {{"kind", kind}, {"error", e.what()}, {"samples", json::array()}};
        std::cerr << "kvtier_gpu_probe: " << name << ": CUDA error: " << e.what() << "\n";
        rc = 1;
      }
    };
    if (want("paged")) {
      std::vector<size_t> ctx;
      for (size_t c = 1024; c <= 131072; c *= 2) ctx.push_back(c);
      for (int b : {1, 8, 32})
        run("paged_attention_b" + std::to_string(b), "kernel",
            "FP16 paged decode attention, batch " + std::to_string(b) + ", 8 KV heads x 128, 16-token blocks in random "
            "order; bytes = K and V read",
            [&] { return probe_paged_attention(PagedShape{}, b, ctx, cap, s); });
    }
    if (want("scoring")) {
      std::vector<size_t> kb;
      for (size_t x = size_t(1) << 20; x <= (size_t(1) << 30); x *= 2) kb.push_back(x);
      for (int bits : {8, 4})
        for (double top : {0.0, 0.2}) {
          const std::string name = "score_int" + std::to_string(bits) + (top > 0 ? "_top20" : "");
          run(name, "kernel", "Q.K^T of one INT8 query against INT" + std::to_string(bits) +
                                  " keys (head dim 128)" + (top > 0 ? " and a top-20% selection" : "") + "; bytes = key bytes",
              [&] { return probe_scoring(bits, top, kb, s); });
        }
    }
    if (want("interference")) {
      std::vector<size_t> kb;
      for (size_t x = size_t(64) << 20; x <= (size_t(4) << 30) && x <= cap; x *= 4) kb.push_back(x);
      run("copy_kernel_interference", "concurrent",
          "a 256 MiB pinned H2D copy and a streaming-read kernel of N bytes started together: times_us the "
          "kernel's completion, times_b_us the copy's; kernel_solo and copy_solo alone",
          [&] { return probe_copy_kernel_interference(size_t(256) << 20, kb, s); });
    }
  } catch (const std::exception& e) {
    std::cerr << "kvtier_gpu_probe: CUDA error: " << e.what() << "\n";
    rc = 1;
  }
  m["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  try {
    write_json_file(out, m);
  } catch (const std::exception& e) {
    std::cerr << "kvtier_gpu_probe: error: " << e.what() << "\n";
    return 1;
  }
  std::cout << "kvtier_gpu_probe: wrote " << out << "\n";
  return rc;
}
