// kvtier_host_probe: measures this machine's DRAM, storage (O_DIRECT through
// io_uring), CPU scoring, codecs and CPU attention, and writes the raw
// samples as a measurement JSON (docs/calibration.md, "Host measurement").
// No GPU involved; builds and runs everywhere.
//
// Exit codes: 0 measured (a probe that could not run says why in the file),
// 1 a probe failed, 2 bad options.
#include <CLI/CLI.hpp>
#include <ctime>
#include <iostream>
#include <thread>

#include "cuda_validate/host_probes.h"
#include "models/calibration_fit.h"

using namespace kvtier;
using namespace kvtier::host;

namespace {

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
  CLI::App app{"kvtier_host_probe: measure DRAM copies, O_DIRECT storage through io_uring, INT8/INT4 CPU scoring, "
               "zstd/lz4 and CPU attention on this machine; write a measurement JSON (docs/calibration.md)"};
  std::string out, dir;
  Settings s;
  s.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> probes;
  double time_limit_s = 600;
  int kv_heads = 8, head_dim = 128, block_tokens = 64;
  app.add_option("--out", out, "measurement JSON to write (atomically)")->required();
  app.add_option("--dir", dir, "directory for the storage probe's file (default: a new temporary directory)");
  app.add_flag("--quick", s.quick, "fewer and smaller sizes (the test suite's run)");
  app.add_option("--threads", s.threads, "threads of the all-thread probes")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--reps", s.repetitions, "timed runs per size")->capture_default_str()->check(CLI::Range(1, 10000));
  app.add_option("--warmup", s.warmup, "untimed runs before each size")->capture_default_str()->check(CLI::Range(0, 1000));
  app.add_option("--probes", probes, "probes to run (default: all)")
      ->delimiter(',')->check(CLI::IsMember({"dram", "storage", "scoring", "codecs", "attention"}));
  app.add_option("--time-limit-s", time_limit_s, "stop starting new sizes after this many seconds")
      ->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--kv-heads", kv_heads, "attention probe: KV heads")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--head-dim", head_dim, "attention probe: head dimension")->capture_default_str()->check(CLI::Range(8, 1024));
  app.add_option("--block-tokens", block_tokens, "attention probe: tokens per KV block")
      ->capture_default_str()->check(CLI::Range(1, 65536));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto want = [&](const std::string& p) { return probes.empty() || std::find(probes.begin(), probes.end(), p) != probes.end(); };
  const auto t0 = std::chrono::steady_clock::now();
  s.deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(time_limit_s));
  json m = json::object();
  m["format"] = "kvtier-measurement";
  m["version"] = 1;
  m["tool"] = std::string("kvtier_host_probe ") + KVTIER_VERSION;
  m["date"] = utc_now();
  const json machine = machine_info();
  m["host"] = machine["hostname"];
  m["device"] = {{"name", machine["cpu_model"]}, {"kind", "host"}};
  m["machine"] = machine;
  m["settings"] = {{"repetitions", s.repetitions}, {"warmup", s.warmup}, {"threads", s.threads}, {"quick", s.quick},
                   {"time_limit_s", time_limit_s},
                   {"timer", "steady clock around each timed run; medians, p10 and p90 over the runs after warm-up"}};
  m["probes"] = json::object();
  int rc = 0;
  auto guarded = [&](const std::string& name, const std::function<json()>& f) {
    if (!want(name)) return;
    std::cerr << "kvtier_host_probe: " << name << "...\n";
    try {
      m[name] = f();
    } catch (const std::exception& e) {
      m[name] = {{"error", e.what()}};
      std::cerr << "kvtier_host_probe: " << name << ": error: " << e.what() << "\n";
      rc = 1;
    }
  };
  json& p = m["probes"];
  guarded("dram", [&] { return probe_dram(s, &p); });
  guarded("storage", [&] { return probe_storage(dir, s, &p); });
  guarded("scoring", [&] { return probe_scoring(s, &p); });
  guarded("codecs", [&] { return probe_codecs(s, &p); });
  guarded("attention", [&] { return probe_cpu_attention(s, kv_heads, head_dim, block_tokens, &p); });
  if (m.contains("storage") && m["storage"].contains("skipped"))
    std::cerr << "kvtier_host_probe: storage skipped: " << m["storage"]["skipped"].get<std::string>() << "\n";
  if (m.contains("storage") && m["storage"].contains("error")) rc = 1;
  m["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  try {
    write_json_file(out, m);
  } catch (const std::exception& e) {
    std::cerr << "kvtier_host_probe: error: " << e.what() << "\n";
    return 1;
  }
  for (auto it = p.begin(); it != p.end(); ++it) {
    double best = 0;
    for (const auto& smp : it.value()["samples"]) best = std::max(best, smp.value("GBps", 0.0));
    std::cout << "kvtier_host_probe: " << it.key() << ": " << it.value()["samples"].size() << " sizes, best " << best
              << " GB/s\n";
  }
  std::cout << "kvtier_host_probe: wrote " << out << "\n";
  return rc;
}
