// Helpers for simulation tests. SimGrid allows one engine per process, so
// every simulation runs in a forked child that sends its metrics back as
// JSON; the test binary itself never starts SimGrid and can run any number
// of simulations, in any order.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "models/param.h"
#include "sim/core/config.h"
#include "sim/engine/engine.h"
#include "sim/platform/platform.h"
#include "sim/platform/streams.h"
#include "sim/serving/serving.h"

namespace kvtier::test {

inline json in_child(const std::function<json()>& body) {
  int fd[2];
  REQUIRE(pipe(fd) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    json out;
    try {
      out = body();
    } catch (const ConfigError& e) {
      out = json{{"config_error", e.what()}};
    } catch (const std::exception& e) {
      out = json{{"exception", e.what()}};
    }
    std::string s = out.dump();
    size_t off = 0;
    while (off < s.size()) {
      ssize_t w = write(fd[1], s.data() + off, s.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fd[1]);
    _exit(0);
  }
  close(fd[1]);
  std::string text;
  char buf[65536];
  ssize_t r;
  while ((r = read(fd[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(r));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(!text.empty());
  return json::parse(text);
}

// Runs a resolved-or-not config and returns its metrics (or {"config_error": ...}).
inline json simulate(json cfg) {
  return in_child([cfg]() mutable {
    if (!cfg.contains("workload")) cfg["workload"] = json::object();
    if (!cfg.contains("policies")) cfg["policies"] = json::object();
    if (!cfg.contains("sim")) cfg["sim"] = json::object();
    resolve_params(cfg["workload"], workload_params(), "workload");
    resolve_params(cfg["sim"], sim_params(), "sim");
    Simulation sim(cfg);
    return sim.run("");
  });
}

// The same through the serving engine, its metrics with the per-request CSV
// as "csv".
inline json serve(json cfg) {
  return in_child([cfg]() mutable {
    if (!cfg.contains("workload")) cfg["workload"] = json::object();
    if (!cfg.contains("sim")) cfg["sim"] = json::object();
    resolve_params(cfg["workload"], workload_params(), "workload");
    resolve_params(cfg["sim"], sim_params(), "sim");
    ServingSimulation sim(cfg);
    json m = sim.run("");
    m["csv"] = sim.requests_csv();
    return m;
  });
}

// A tiny model: one KV head of dim 128 in FP16 is 512 bytes per token per
// layer, so a 128-token block is 64 KiB (kBlock); weights are negligible.
constexpr double kBlock = 128.0 * 512.0;
inline json tiny_model(int layers) {
  return json{{"name", "tiny"}, {"layers", layers}, {"heads", 1}, {"kv_heads", 1},
              {"head_dim", 128}, {"dtype_bytes", 2}, {"params_B", 1e-9}};
}

// A GPU whose compute is negligible: any time measured is data movement.
inline json fast_gpu(double capacity_GB) {
  return json{{"kind", "gpu"},         {"capacity_GB", capacity_GB}, {"reserved_GB", 0},
              {"memory_GBps", 1e12},   {"fp16_TFLOPS", 1e12},        {"launch_overhead_us", 0}};
}

// Platform-level transfers, each on its own stream, all started at time 0
// unless they wait for earlier ones (`after`: indices into the list).
struct Transfer {
  std::string from, to;
  double bytes;
  std::vector<size_t> after;
  double request_bytes = 0;  // the requests it is issued as (TransferJob::request_bytes); 0: the platform's
};

// Runs the transfers on `hw` (in a child) and returns each one's finish time;
// `platform_request_bytes` > 0 sets the platform's request size (Platform::set_request_bytes).
inline std::vector<double> finish_times(const json& hw, const std::vector<Transfer>& transfers,
                                        double platform_request_bytes = 0) {
  json m = in_child([&] {
    json hwc = hw;
    Hardware h = parse_hardware(hwc, "hardware");
    Topology topo(h);
    start_simgrid();
    Platform p(h, topo);
    if (platform_request_bytes > 0) p.set_request_bytes(platform_request_bytes);
    JobBoard board;
    Timeline tl;
    std::vector<std::unique_ptr<Stream>> streams;
    std::vector<JobId> ids;
    for (size_t i = 0; i < transfers.size(); ++i) ids.push_back(board.create());
    for (size_t i = 0; i < transfers.size(); ++i) {
      const Transfer& t = transfers[i];
      std::vector<JobId> deps;
      for (size_t j : t.after) deps.push_back(ids[j]);
      streams.push_back(std::make_unique<Stream>("t" + std::to_string(i), p, board, tl));
      TransferJob job{ids[i], static_cast<size_t>(h.device_index(t.from)), static_cast<size_t>(h.device_index(t.to)),
                      t.bytes, deps};
      job.request_bytes = t.request_bytes;
      streams.back()->submit(std::move(job));
      streams.back()->start();
    }
    // One waiter per transfer, so each time is its own whatever the order.
    std::vector<double> done(ids.size(), 0.0);
    size_t left = ids.size();
    for (size_t i = 0; i < ids.size(); ++i)
      sg4::Actor::create("waiter", p.controller(), [&, i] {
        board.wait(ids[i]);
        done[i] = sg4::Engine::get_clock();
        if (--left == 0)
          for (auto& st : streams) st->stop();
      });
    sg4::Engine::get_instance()->run();
    return json(done);
  });
  REQUIRE(m.is_array());
  return m.get<std::vector<double>>();
}

inline double rel_err(double a, double b) { return std::abs(a - b) / std::abs(b); }

}  // namespace kvtier::test
