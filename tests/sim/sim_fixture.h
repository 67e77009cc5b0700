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
#include "sim/config.h"
#include "sim/engine.h"

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

// A tiny model: one KV head of dim 128 in FP16 is 512 bytes per token per
// layer, so a 128-token block is 64 KiB; weights are negligible.
inline json tiny_model(int layers) {
  return json{{"name", "tiny"}, {"layers", layers}, {"heads", 1}, {"kv_heads", 1},
              {"head_dim", 128}, {"dtype_bytes", 2}, {"params_B", 1e-9}};
}

// A GPU whose compute is negligible: any time measured is data movement.
inline json fast_gpu(double capacity_GB) {
  return json{{"kind", "gpu"},         {"capacity_GB", capacity_GB}, {"reserved_GB", 0},
              {"memory_GBps", 1e12},   {"fp16_TFLOPS", 1e12},        {"launch_overhead_us", 0}};
}

inline double rel_err(double a, double b) { return std::abs(a - b) / std::abs(b); }

}  // namespace kvtier::test
