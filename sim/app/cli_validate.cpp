#include "sim/app/cli_validate.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "models/calibration.h"
#include "models/calibration_host.h"
#include "models/hardware.h"
#include "models/topology.h"
#include "sim/app/process.h"
#include "sim/app/validate_report.h"
#include "sim/core/config.h"
#include "sim/core/progress.h"
#include "sim/core/result.h"
#include "sim/platform/platform.h"

namespace fs = std::filesystem;

namespace kvtier {

namespace {

struct Options {
  std::string measurement;  // given: skip the probes
  std::string out = "out/validate";
  std::string dir;          // storage and pipeline files
  std::string tools;        // folder of kvtier_host_probe and kvtier_host_pipeline
  std::string doc;          // write this machine's section into this Markdown file
  bool quick = false;
  bool paths_only = false;  // held-out sizes only (any measurement, GPU ones included)
  int reps = 3;
  double path_tolerance = -1, e2e_tolerance = -1;
};

// One end-to-end scenario: the pipeline and the engine on the same shapes.
struct Scenario {
  std::string name, what;
  int layers, kv_heads, head_dim, block_tokens, context, steps, prefetch;
  size_t cache_blocks;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The median over the sizes both measurements hold of `path`'s median time,
// `now` over `then` (1 when they share none).
double read_time_ratio(const json& now, const json& then, const std::string& path) {
  std::vector<double> r;
  if (!now.contains("probes") || !then.contains("probes") || !now["probes"].contains(path) || !then["probes"].contains(path))
    return 1.0;
  for (const auto& a : now["probes"][path].value("samples", json::array()))
    for (const auto& b : then["probes"][path].value("samples", json::array()))
      if (a.value("bytes", -1.0) == b.value("bytes", -2.0) && b.value("median_us", 0.0) > 0)
        r.push_back(a.value("median_us", 0.0) / b["median_us"].get<double>());
  return r.empty() ? 1.0 : median(r);
}

// Storage runs as the engine times them: Q requests of S bytes are one
// transfer of Q S bytes from the disk to the compute device (reads) or back
// (writes), issued as requests of S, on the hardware `hw`.
std::vector<double> engine_storage_us(const json& hw, const std::vector<StoragePoint>& pts, bool write) {
  json r = in_child([&]() -> json {
    json h = hw;
    Hardware hwp = parse_hardware(h, "validate");
    const size_t disk = static_cast<size_t>(hwp.device_index("disk")), cpu = static_cast<size_t>(hwp.device_index(hwp.gpu));
    std::vector<TimedTransfer> transfers;
    for (const auto& q : pts) transfers.push_back(TimedTransfer{q.request_bytes, q.request_bytes * q.queue_depth});
    const std::vector<double> out = time_transfers_us(hwp, write ? cpu : disk, write ? disk : cpu, transfers);
    return json(out);
  });
  return r.get<std::vector<double>>();
}

std::vector<double> median_per_step(const json& runs) {
  std::vector<double> out;
  if (!runs.is_array() || runs.empty()) return out;
  const size_t n = runs[0]["step_s"].size();
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> v;
    for (const auto& r : runs)
      if (i < r["step_s"].size()) v.push_back(r["step_s"][i].get<double>());
    out.push_back(median(v));
  }
  return out;
}

std::vector<double> read_steps_csv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw ConfigError(path + ": cannot open the engine's steps.csv");
  std::string line;
  std::getline(f, line);
  std::vector<double> out;
  while (std::getline(f, line)) {
    std::stringstream s(line);
    std::string cell;
    std::vector<std::string> c;
    while (std::getline(s, cell, ',')) c.push_back(cell);
    if (c.size() >= 4) out.push_back(std::stod(c[3]));
  }
  return out;
}

std::vector<Scenario> scenarios(bool quick) {
  // KV of one token and layer: 2 x 8 x 128 x 2 B = 4 KiB (one O_DIRECT-aligned
  // write); a 64-token block is 256 KiB. The trace (synthetic, seed 1)
  // touches the sink, the last two blocks and 15% of the context per layer.
  const int L = quick ? 4 : 8, ctx = quick ? 4096 : 16384, steps = quick ? 16 : 32;
  const size_t per_layer = static_cast<size_t>((ctx + steps - 1 + 64) / 64);
  const size_t used = static_cast<size_t>(L) * (3 + static_cast<size_t>(0.15 * ctx / 64));
  const size_t small = used * 6 / 10;  // below the working set: LRU over the layers misses
  const size_t all = per_layer * L + 8;
  return {
      {"disk_prefetch", "cache of " + std::to_string(small) + " blocks (60% of the blocks a step uses), layer-ahead prefetch depth 1",
       L, 8, 128, 64, ctx, steps, 1, small},
      {"disk_on_demand", "the same cache, no prefetch: every read waits", L, 8, 128, 64, ctx, steps, 0, small},
      {"dram_resident", "every block fits in the DRAM cache: attention alone after the first step", L, 8, 128, 64, ctx,
       steps, 1, all},
  };
}

json engine_config(const Scenario& s, const std::string& hw_file, const std::string& out_dir) {
  const double block_bytes = 2.0 * s.kv_heads * s.head_dim * 2 * s.block_tokens;
  // Half a block of slack: the engine holds floor(capacity / block) blocks.
  const double cap_GB = (static_cast<double>(s.cache_blocks) + 0.5) * block_bytes / 1e9;
  json prefetch = {{"name", "layer_ahead"}, {"depth", s.prefetch}};
  return json{
      {"name", "validate_" + s.name},
      {"description", "kvtier validate: " + s.what},
      {"hardware", {{"preset", hw_file}, {"devices", {{"host_cpu", {{"capacity_GB", cap_GB}}}}}}},
      {"model", {{"name", "validate"}, {"layers", s.layers}, {"heads", s.kv_heads}, {"kv_heads", s.kv_heads},
                 {"head_dim", s.head_dim}, {"dtype_bytes", 2}, {"params_B", 1e-9}}},
      {"workload", {{"batch", 1}, {"context_tokens", s.context}, {"decode_steps", s.steps},
                    {"block_tokens", s.block_tokens}, {"prefill", "none"},
                    {"trace", {{"kind", "synthetic"}, {"heavy_fraction", 0.15}}}}},
      {"policies", {{"eviction", {{"name", "lru"}}}, {"promotion", {{"name", "on_access"}}},
                    {"placement", {{"name", "top"}}}, {"prefetch", prefetch}, {"evaluation", {{"name", "trace"}}}}},
      {"sim", {{"seed", 1}, {"step_csv", true}, {"out_dir", out_dir}}}};
}

// The programs validate runs and where their output goes.
struct Tools {
  const Options& o;
  std::string self, dir, log;

  explicit Tools(const Options& opt) : o(opt), self(self_exe()) {
    dir = o.tools.empty() ? (fs::path(self).parent_path() / "cuda_validate").string() : o.tools;
    log = (fs::path(o.out) / "validate.log").string();
  }
  std::string tool(const std::string& name) const {
    const std::string p = (fs::path(dir) / name).string();
    if (access(p.c_str(), X_OK) != 0)
      throw ConfigError("--tools " + dir + ": no executable " + name + " (build the cuda_validate host tools)");
    return p;
  }
  int run(const std::vector<std::string>& argv) const { return run_tool(argv, log, "kvtier validate"); }
  // Runs argv; a failure is thrown naming `what` and the log's last line.
  void run_or_throw(const std::vector<std::string>& argv, const std::string& what) const {
    if (int rc = run(argv); rc != 0)
      throw std::runtime_error(what + " failed (exit " + std::to_string(rc) + "): " + tail_of(log));
  }
  // The storage probe alone, quick, into `out`; whether it ran.
  bool storage_probe(const std::string& out) const {
    std::vector<std::string> pa = {tool("kvtier_host_probe"), "--quick", "--probes", "storage", "--out", out};
    if (!o.dir.empty()) pa.insert(pa.end(), {"--dir", o.dir});
    return run(pa) == 0;
  }
};

// The output folder is made once there is something to write: a given
// measurement is checked first, and a bad one leaves nothing behind.
void make_out(const Options& o) {
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) throw ConfigError("--out " + o.out + ": cannot create the directory: " + ec.message());
}

// 1. The measurement: the given one, or kvtier_host_probe's.
std::string measure(const Options& o, const Tools& t) {
  if (!o.measurement.empty()) return o.measurement;
  make_out(o);
  const std::string mfile = (fs::path(o.out) / "measurement.json").string();
  std::vector<std::string> a = {t.tool("kvtier_host_probe"), "--out", mfile};
  if (o.quick) a.push_back("--quick");
  if (!o.dir.empty()) a.insert(a.end(), {"--dir", o.dir});
  t.run_or_throw(a, "kvtier_host_probe");
  return mfile;
}

json read_measurement(const Options& o, const std::string& mfile) {
  const json m = read_json_file(mfile);
  if (m.value("format", "") != "kvtier-measurement")
    throw ConfigError(mfile + ": format: expected \"kvtier-measurement\" (written by kvtier_host_probe)");
  if (!m.contains("probes") || !m["probes"].is_object())
    throw ConfigError(mfile + ": probes: expected an object of probes");
  if (!o.paths_only && !m.contains("machine"))
    throw ConfigError(mfile + ": machine: expected a host measurement (kvtier_host_probe), not a GPU one (use "
                      "--paths-only for held-out sizes alone)");
  const json storage = m.value("storage", json::object());
  if (!o.paths_only && storage.contains("skipped"))
    throw ConfigError(mfile + ": storage.skipped: " + storage["skipped"].get<std::string>() +
                      " (validation needs the storage paths; pass --dir)");
  // A measurement with no probe to hold sizes out of would report "0 of 0
  // paths" and pass: refused before anything is written.
  size_t usable = 0;
  for (const auto& p : host_paths(m)) {
    const HeldOut h = held_out(m, p, mfile + ": ");
    usable += !h.test.empty() && h.train.size() >= 2;
  }
  if (usable == 0)
    throw ConfigError(mfile + ": probes: no path with samples at three or more sizes (numbers) to fit and hold "
                      "out; expected a measurement written by kvtier_host_probe or cuda_validate");
  return m;
}

// 3. Held-out sizes, per path, into rep["paths"].
void held_out_paths(json& rep, const json& m, const std::string& mfile) {
  rep["paths"] = json::array();
  for (const auto& p : host_paths(m)) {
    const HeldOut h = held_out(m, p, mfile + ": ");
    if (h.test.empty() || h.train.size() < 2) continue;
    json e = {{"path", p}, {"train_sizes", h.train.size()}, {"test_sizes", h.test.size()}, {"fit", h.fit.to_json()},
              {"error", to_json(h.error)}, {"test", json::array()}};
    for (size_t i = 0; i < h.test.size(); ++i)
      e["test"].push_back({{"bytes", h.test[i].bytes}, {"measured_us", h.test[i].median_us}, {"predicted_us", h.predicted_us[i]}});
    rep["paths"].push_back(e);
  }
}

// The engine's predictions `pred` of the held-out storage points `test`,
// added to each storage path of that direction in rep["paths"].
void add_engine_errors(json& rep, const std::vector<StoragePoint>& test, const std::vector<double>& pred,
                       const NvmeFit& f, bool write) {
  const std::string prefix = write ? "storage_write_qd" : "storage_read_qd";
  for (auto& e : rep["paths"]) {
    const std::string path = e["path"];
    if (path.rfind(prefix, 0) != 0) continue;
    const int q = std::atoi(path.c_str() + prefix.size());
    std::vector<double> pp, mm;
    json pts = json::array();
    for (size_t i = 0; i < test.size(); ++i)
      if (test[i].queue_depth == q) {
        pp.push_back(pred[i]);
        mm.push_back(test[i].median_us);
        pts.push_back({{"bytes", test[i].request_bytes}, {"measured_us", test[i].median_us}, {"engine_us", pred[i]}});
      }
    if (pp.empty()) continue;
    e["engine_error"] = to_json(error_stats(pp, mm));
    e["engine_test"] = pts;
    e["engine_nvme_fit"] = {{"seq_GBps", f.seq_GBps}, {"latency_us", f.latency_us}, {"kIOPS", f.kiops}};
  }
}

// Storage through the engine: the NVMe model fitted on the training sizes
// of one direction, the held-out sizes timed by the engine.
void engine_storage_paths(json& rep, const json& m, const json& hw, bool write) {
  std::vector<double> train_sizes, test_sizes;
  std::vector<double> sizes;
  for (const auto& sp : storage_points(m, write))
    if (std::find(sizes.begin(), sizes.end(), sp.request_bytes) == sizes.end()) sizes.push_back(sp.request_bytes);
  std::sort(sizes.begin(), sizes.end());
  for (size_t i = 0; i < sizes.size(); ++i) (i % 2 == 0 ? train_sizes : test_sizes).push_back(sizes[i]);
  const NvmeFit f = fit_nvme(storage_points(m, write, &train_sizes));
  const auto test = storage_points(m, write, &test_sizes);
  if (test.empty() || f.points == 0) return;
  json h = hw;
  h["calibration"] = "";
  json& d = h["devices"]["disk"];
  d[write ? "write_GBps" : "read_GBps"] = f.seq_GBps;
  d[write ? "write_latency_us" : "latency_us"] = f.latency_us;
  d[write ? "write_kIOPS" : "read_kIOPS"] = f.kiops;
  add_engine_errors(rep, test, engine_storage_us(h, test, write), f, write);
}

// The blocks of KV a scenario has in all.
size_t kv_blocks(const Scenario& s) {
  return size_t(s.layers) * size_t((s.context + s.steps + s.block_tokens - 1) / s.block_tokens);
}

// A scenario that reads the disk is calibrated on the disk as it is just
// before it runs: the storage probe again, refitted with the rest of the
// measurement (a shared disk's rate moves by up to 2x within minutes).
// Returns the scenario's hardware file; `disk_then` is the measurement it
// was calibrated on.
std::string recalibrate_disk(const Tools& t, const std::string& sd, const std::string& hw_file, const HostFitOptions& ho,
                             json& disk_then) {
  const std::string before_file = (fs::path(sd) / "disk_before.json").string();
  if (!t.storage_probe(before_file)) return hw_file;
  const json before = read_json_file(before_file);
  for (auto it = before["probes"].begin(); it != before["probes"].end(); ++it) disk_then["probes"][it.key()] = it.value();
  const std::string mf = (fs::path(sd) / "measurement.json").string();
  const std::string cf = fs::absolute(fs::path(sd) / "calibration.json").string();
  const std::string scenario_hw = fs::absolute(fs::path(sd) / "hardware.json").string();
  write_json_file(mf, disk_then);
  HostFitOptions so = ho;
  so.measurement_file = mf;
  write_json_file(cf, fit_host_calibration(disk_then, so));
  write_json_file(scenario_hw, host_hardware(disk_then, cf, so));
  return scenario_hw;
}

// kvtier_host_pipeline's arguments for a scenario.
std::vector<std::string> pipeline_args(const Tools& t, const Scenario& s, const std::string& trace,
                                       const std::string& pres) {
  std::vector<std::string> a = {t.tool("kvtier_host_pipeline"), "--trace", trace, "--out", pres,
                                "--layers", std::to_string(s.layers), "--kv-heads", std::to_string(s.kv_heads),
                                "--head-dim", std::to_string(s.head_dim), "--block-tokens", std::to_string(s.block_tokens),
                                "--context", std::to_string(s.context), "--steps", std::to_string(s.steps),
                                "--cache-blocks", std::to_string(s.cache_blocks), "--prefetch-depth",
                                std::to_string(s.prefetch), "--reps", std::to_string(t.o.reps)};
  if (!t.o.dir.empty()) a.insert(a.end(), {"--dir", t.o.dir});
  return a;
}

// A run during which other processes kept more than a quarter of the
// machine's CPUs busy (the pipeline's own I/O work excluded) measured the
// other tenants as much as the pipeline: such runs are left out, and the
// scenario is run again (twice at most) when none is left. The runs kept;
// `contended` counts those left out.
json uncontended_runs(const Tools& t, const std::vector<std::string>& a, const std::string& pres, int& contended) {
  json runs = json::array();
  contended = 0;
  for (int attempts = 1;; ++attempts) {
    t.run_or_throw(a, "kvtier_host_pipeline");
    const json got = read_json_file(pres);
    for (const auto& r : got["runs"]) {
      if (r.value("others_cpu_share", 0.0) > 0.25) ++contended;
      else runs.push_back(r);
    }
    if (!runs.empty() || attempts == 3) break;
  }
  return runs;
}

// What the pipeline measured and the engine predicted of one scenario.
struct ScenarioOutcome {
  json runs;                 // the pipeline's runs kept
  int contended = 0;         // runs left out as contended
  bool all_contended = false;
  double disk_ratio = 1.0;   // the disk's read time after the scenario over its calibration's
  std::string pres;          // pipeline.json
  std::vector<double> meas, sim;
  json metrics;              // the engine's result.json metrics
};

// The report entry of one scenario.
json scenario_entry(const Scenario& s, const ScenarioOutcome& r, const json& m, const std::string& cfg_file) {
  double mt = 0, st = 0;
  for (double x : r.meas) mt += x;
  for (double x : r.sim) st += x;
  double acc = 0, hits = 0, others = 0;
  for (const auto& run : r.runs) {
    acc += run["accesses"].get<double>();
    hits += run["hits"].get<double>();
    others = std::max(others, run.value("others_cpu_share", 0.0));
  }
  const json& met = r.metrics;
  double khit = 0;
  if (met.contains("tiers") && met["tiers"].contains("host_cpu")) khit = met["tiers"]["host_cpu"].value("hit_rate", 0.0);
  const ErrorStats es = error_stats(r.sim, r.meas);
  // KV the cache holds whole and that fits the CPU's last-level cache is
  // read from that cache, not from DRAM: the calibration measures attention
  // over DRAM (its probe walks an arena of 4x the LLC), so such a scenario
  // runs outside what the model was calibrated for (a 480 MiB L3 holds the
  // quick run's 67 MB at about twice the DRAM rate).
  const double llc = m.value("machine", json::object()).value("l3_bytes", 0.0);
  const double cache_bytes = double(kv_blocks(s)) * 2.0 * s.kv_heads * s.head_dim * 2.0 * s.block_tokens;
  const bool cache_resident = s.cache_blocks >= kv_blocks(s) && llc > 0 && cache_bytes <= llc;
  // Attention alone, as the pipeline measured it (the median run's) and as
  // the engine ran it (the compute device's busy seconds). A scenario that
  // reads the disk holds the storage model to its tolerance only where
  // attention ran as calibrated: blocks a read has just landed can sit in the
  // CPU's last-level cache (I/O written into the cache, as Intel's DDIO does),
  // where attention runs at up to twice the rate the calibration measured over
  // DRAM, and a total off by that says nothing about the disk.
  std::vector<double> attn;
  for (const auto& run : r.runs) attn.push_back(run.value("compute_s", 0.0));
  const double attn_meas = attn.empty() ? 0.0 : median(attn);
  const double attn_sim = met.value("gpu_busy_fraction", 0.0) * met.value("decode_time_s", 0.0);
  const double attn_ratio = attn_sim > 0 ? attn_meas / attn_sim : 1.0;
  const bool reads_disk = s.cache_blocks < kv_blocks(s);
  return json{{"scenario", s.name},
              {"what", s.what},
              {"shape", std::to_string(s.layers) + " layers, " + std::to_string(s.kv_heads) + " KV heads x " +
                            std::to_string(s.head_dim) + ", " + std::to_string(s.block_tokens) + "-token blocks (" +
                            std::to_string(2 * s.kv_heads * s.head_dim * 2 * s.block_tokens / 1024) + " KiB), " +
                            std::to_string(s.context) + "-token context, " + std::to_string(s.steps) + " steps"},
              {"steps", r.meas.size()},
              {"cache_blocks", s.cache_blocks},
              {"prefetch_depth", s.prefetch},
              {"measured_step_s", r.meas},
              {"kvtier_step_s", r.sim},
              {"measured_total_s", mt},
              {"kvtier_total_s", st},
              {"total_error", mt > 0 ? std::abs(st - mt) / mt : 0.0},
              {"step_error", to_json(es)},
              {"measured_hit_rate", acc > 0 ? hits / acc : 0.0},
              {"kvtier_hit_rate", khit},
              {"pipeline", r.pres},
              {"runs_used", r.runs.size()},
              {"runs_contended", r.contended},
              {"contended", r.all_contended},
              {"others_cpu_share", others},
              {"disk_read_time_ratio", r.disk_ratio},
              {"disk_drifted", r.disk_ratio > 1.25 || r.disk_ratio < 0.8},
              {"cache_bytes", cache_bytes},
              {"llc_bytes", llc},
              {"cache_resident", cache_resident},
              {"measured_attention_s", attn_meas},
              {"kvtier_attention_s", attn_sim},
              {"attention_time_ratio", attn_ratio},
              {"attention_moved", reads_disk && (attn_ratio > 1.5 || attn_ratio < 1.0 / 1.5)},
              {"config", cfg_file}};
}

// 4. One end-to-end scenario: the real pipeline and the engine on the same
// trace, shapes and capacities; its report entry.
json run_scenario(const Tools& t, const Scenario& s, const json& m, const std::string& hw_file, const HostFitOptions& ho) {
  std::error_code ec;
  const std::string sd = fs::absolute(fs::path(t.o.out) / s.name).string();
  fs::create_directories(sd, ec);
  const std::string cfg_file = (fs::path(sd) / "config.json").string();
  const bool reads_disk = s.cache_blocks < kv_blocks(s);
  json disk_then = m;
  const std::string scenario_hw = reads_disk ? recalibrate_disk(t, sd, hw_file, ho, disk_then) : hw_file;
  write_json_file(cfg_file, engine_config(s, scenario_hw, (fs::path(sd) / "kvtier").string()));
  const std::string trace = (fs::path(sd) / "trace.jsonl").string();
  t.run_or_throw({t.self, "trace", "gen", "--config", cfg_file, "--out", trace}, "kvtier trace gen");
  ScenarioOutcome r;
  r.pres = (fs::path(sd) / "pipeline.json").string();
  r.runs = uncontended_runs(t, pipeline_args(t, s, trace, r.pres), r.pres, r.contended);
  // The disk as the scenario's calibration saw it and as it is now: its
  // read probe again, right after the scenario's runs. A scenario during
  // which it moved by more than a quarter measured that change, not the model.
  const std::string now_file = (fs::path(sd) / "disk_after.json").string();
  if (reads_disk && t.storage_probe(now_file))
    r.disk_ratio = read_time_ratio(read_json_file(now_file), disk_then, "storage_read_qd1");
  t.run_or_throw({t.self, "run", cfg_file, "--quiet"}, "kvtier run");
  r.all_contended = r.runs.empty();
  if (r.all_contended) r.runs = read_json_file(r.pres)["runs"];  // every run contended: kept, and said so
  r.meas = median_per_step(r.runs);
  r.sim = read_steps_csv((fs::path(sd) / "kvtier" / "steps.csv").string());
  r.metrics = read_json_file((fs::path(sd) / "kvtier" / "result.json").string())["metrics"];
  json e = scenario_entry(s, r, m, cfg_file);
  std::cerr << "kvtier validate: " << s.name << ": measured " << fmt(e["measured_total_s"].get<double>() * 1e3, 4)
            << " ms, kvtier " << fmt(e["kvtier_total_s"].get<double>() * 1e3, 4) << " ms, per-step median error "
            << pct(e["step_error"]["p50"].get<double>()) << ", hit rate " << fmt(e["measured_hit_rate"].get<double>())
            << " / " << fmt(e["kvtier_hit_rate"].get<double>()) << "\n";
  return e;
}

// Why a scenario over the end-to-end tolerance is not held to it ("" when it is).
std::string excused(const json& e) {
  if (e["contended"].get<bool>())
    // Other tenants' work is not the pipeline's: reported, not failed.
    return "every run was contended (other processes kept " + pct(e["others_cpu_share"].get<double>()) +
           " of the CPUs busy)";
  if (e["disk_drifted"].get<bool>())
    return "the disk's read time was " + fmt(e["disk_read_time_ratio"].get<double>()) +
           "x its calibration's after the scenario ran";
  if (e["attention_moved"].get<bool>())
    return "its attention took " + fmt(e["attention_time_ratio"].get<double>()) +
           "x the calibrated time (the blocks the disk's reads land may be read from the CPU's cache): the total "
           "measured the CPU, not the storage model";
  if (e["cache_resident"].get<bool>())
    return "its KV (" + fmt(e["cache_bytes"].get<double>() / 1e6) + " MB) fits the CPU's " +
           fmt(e["llc_bytes"].get<double>() / 1e6) + " MB last-level cache, and the calibration measured " +
           "attention over DRAM";
  return "";
}

// 5. Tolerances: 0 within them (or none given), 1 outside.
int check_tolerances(const Options& o, const json& rep) {
  int rc = 0;
  const double paths_p50 = rep["summary"]["paths_p50"].get<double>();
  if (o.path_tolerance >= 0 && paths_p50 > o.path_tolerance) {
    std::cerr << "kvtier validate: median held-out path error " << pct(paths_p50) << " exceeds --path-tolerance "
              << pct(o.path_tolerance) << "\n";
    rc = 1;
  }
  if (o.e2e_tolerance < 0) return rc;
  for (const auto& e : rep["end_to_end"]) {
    const double p50 = e["step_error"]["p50"].get<double>();
    if (p50 <= o.e2e_tolerance) continue;
    std::cerr << "kvtier validate: " << e["scenario"].get<std::string>() << ": median per-step error " << pct(p50);
    if (const std::string why = excused(e); !why.empty()) {
      std::cerr << " above --e2e-tolerance " << pct(o.e2e_tolerance) << ", not held to it: " << why << "\n";
    } else {
      std::cerr << " exceeds --e2e-tolerance " << pct(o.e2e_tolerance) << "\n";
      rc = 1;
    }
  }
  return rc;
}

// The report's fields that say what was measured and with what.
json report_head(const Options& o, const std::string& command, const json& m, const std::string& mfile,
                 const std::string& cal_file, const std::string& hw_file) {
  json rep = json::object();
  rep["command"] = command;
  rep["date"] = m.value("date", std::string("?"));
  rep["machine"] = m.value("machine", json{{"cpu_model", m.value("device", json::object()).value("name", std::string("?"))}});
  rep["storage"] = m.value("storage", json::object());
  rep["measurement"] = mfile;
  rep["calibration"] = o.paths_only ? std::string("-") : cal_file;
  rep["hardware"] = o.paths_only ? std::string("-") : hw_file;
  rep["device"] = m.value("device", json::object());
  rep["reps"] = o.reps;
  return rep;
}

// The summary over paths and scenarios.
json summary(const json& rep) {
  std::vector<double> all_p50, e2e_p50;
  json over = json::array();
  for (const auto& e : rep["paths"]) {
    all_p50.push_back(e["error"]["p50"].get<double>());
    if (e["error"]["p50"].get<double>() > 0.05) over.push_back(e["path"]);
  }
  for (const auto& e : rep["end_to_end"]) e2e_p50.push_back(e["step_error"]["p50"].get<double>());
  return {{"paths_p50", median(all_p50)},
          {"paths_over_target", over},
          {"e2e_p50", e2e_p50.empty() ? 0.0 : *std::max_element(e2e_p50.begin(), e2e_p50.end())},
          {"targets", {{"path_p50", 0.05}, {"e2e_p50", 0.10}}}};
}

int validate(const Options& o, const std::string& command) {
  std::error_code ec;
  const Tools t(o);
  fs::remove(t.log, ec);
  // Stages: the measurement (unless given), the held-out paths, the storage
  // check (reads, writes) and each pipeline scenario.
  const std::vector<Scenario> runs = o.paths_only ? std::vector<Scenario>{} : scenarios(o.quick);
  Progress::enable(isatty(STDERR_FILENO));  // a validation takes minutes; show where it is on a terminal
  Progress progress("validate", double((o.measurement.empty() ? 1 : 0) + 1 + (o.paths_only ? 0 : 2) + runs.size()),
                    "stages");
  double done = 0;
  progress.update(done);
  const std::string mfile = measure(o, t);
  if (o.measurement.empty()) progress.update(++done);
  const json m = read_measurement(o, mfile);
  make_out(o);

  // 2. Host calibration and hardware from the whole measurement.
  HostFitOptions ho;
  ho.measurement_file = mfile;
  const std::string cal_file = fs::absolute(fs::path(o.out) / "calibration.json").string();
  const std::string hw_file = fs::absolute(fs::path(o.out) / "hardware.json").string();
  json hw;
  if (!o.paths_only) {
    const json cal = fit_host_calibration(m, ho);
    hw = host_hardware(m, cal_file, ho);
    write_json_file(cal_file, cal);
    write_json_file(hw_file, hw);
  }

  json rep = report_head(o, command, m, mfile, cal_file, hw_file);
  held_out_paths(rep, m, mfile);
  progress.update(++done);
  if (!o.paths_only)
    for (bool write : {false, true}) {
      engine_storage_paths(rep, m, hw, write);
      progress.update(++done);
    }
  rep["end_to_end"] = json::array();
  for (const Scenario& s : runs) {
    rep["end_to_end"].push_back(run_scenario(t, s, m, hw_file, ho));
    progress.update(++done);
  }
  rep["summary"] = summary(rep);
  progress.finish();

  const std::string md = validation_markdown(rep);
  write_json_file((fs::path(o.out) / "report.json").string(), rep);
  write_text((fs::path(o.out) / "report.md").string(), md);
  if (!o.doc.empty()) write_doc_section(o.doc, md);
  std::cout << md;
  std::cout << "kvtier validate: wrote " << (fs::path(o.out) / "report.json").string()
            << (o.doc.empty() ? "" : " and " + o.doc) << "\n";
  return check_tolerances(o, rep);
}

}  // namespace

std::function<int()> add_validate_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* v = app.add_subcommand("validate",
                               "measure this machine (no GPU needed), check each fitted path on held-out sizes and a "
                               "real tiered decode pipeline against the engine (docs/validation.md)");
  v->add_option("--measurement", o->measurement, "host measurement to use instead of running kvtier_host_probe");
  v->add_option("--out", o->out, "folder for the measurement, calibration, runs and report.json")->capture_default_str();
  v->add_option("--dir", o->dir, "directory for the storage probe's and the pipeline's files (default: a temporary one)");
  v->add_option("--tools", o->tools, "folder of kvtier_host_probe and kvtier_host_pipeline (default: cuda_validate/ "
                                     "next to this binary)");
  v->add_option("--doc", o->doc, "write this machine's section into this Markdown file (e.g. docs/validation.md)");
  v->add_flag("--quick", o->quick, "small probes and a small pipeline (the test suite's run)");
  v->add_flag("--paths-only", o->paths_only,
              "held-out sizes only, of any measurement (a GPU one from kvtier_calibrate or kvtier_gpu_probe too): no "
              "storage check, no pipeline");
  v->add_option("--reps", o->reps, "pipeline runs per scenario (per-step medians)")->capture_default_str()->check(CLI::Range(1, 50));
  v->add_option("--path-tolerance", o->path_tolerance,
                "exit 1 when the median held-out error over all paths exceeds this fraction")
      ->check(CLI::Range(0.0, 100.0));
  v->add_option("--e2e-tolerance", o->e2e_tolerance,
                "exit 1 when a scenario's median per-step error exceeds this fraction (scenarios whose every run "
                "was contended by other processes are reported, not failed)")
      ->check(CLI::Range(0.0, 100.0));
  return [v, o]() -> int {
    if (!*v) return -1;
    std::string cmd = "kvtier validate";
    if (o->quick) cmd += " --quick";
    if (o->paths_only) cmd += " --paths-only";
    if (!o->measurement.empty()) cmd += " --measurement " + o->measurement;
    if (!o->doc.empty()) cmd += " --doc " + o->doc;
    if (o->reps != 3) cmd += " --reps " + std::to_string(o->reps);
    return validate(*o, cmd);
  };
}

}  // namespace kvtier
