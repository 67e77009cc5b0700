// Host probes: what a machine without a GPU can measure about the paths a
// tiered KV pipeline uses (DRAM copies, O_DIRECT storage through io_uring,
// CPU importance scoring, codecs, CPU attention). Each probe returns the raw
// samples of one path as the measurement JSON's probe object
// (docs/calibration.md, "Host measurement"); kvtier_host_probe writes them.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "models/param.h"

namespace kvtier::host {

struct Settings {
  int repetitions = 15;  // timed runs per size, after `warmup` untimed ones
  int warmup = 2;
  int threads = 1;       // all-thread probes: this many (the online CPUs by default)
  bool quick = false;    // fewer and smaller sizes (the test suite's run)
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// Median, 10th and 90th percentile of repeated times (nearest rank on the
// sorted times; the median averages the middle two of an even count).
struct Spread {
  double median = 0, p10 = 0, p90 = 0;
};
Spread spread(std::vector<double> v);

// One sample object {"bytes", "times_us", "median_us", "p10_us", "p90_us"}.
json sample(double bytes, const std::vector<double>& times_us);

// Seconds on the steady clock.
double now_s();

// Runs fn(thread_index) on `threads` threads that start together (a barrier)
// and returns the wall time of the slowest, microseconds.
double timed_parallel(int threads, const std::function<void(int)>& fn);

// Sizes lo, lo*f, ... <= hi.
std::vector<size_t> geometric(size_t lo, size_t hi, size_t factor);

// The machine: host name, kernel, CPU model and flags, core count, memory.
json machine_info();
// The file system and block device under `dir` (type, mount point, device
// model, rotational, logical block size).
json storage_info(const std::string& dir);

// memcpy bandwidth against buffer size, one thread and `s.threads` threads
// (each copying its own buffer of that size): probes dram_copy_1t, dram_copy_all.
json probe_dram(const Settings& s, json* probes);

// O_DIRECT reads and writes through io_uring against request size and queue
// depth on a file created (and removed) in `dir`. Fills probes
// storage_{read,write}_qd<Q>; returns the storage section (file system,
// O_DIRECT support, page-cache check) or {"skipped": why}.
json probe_storage(const std::string& dir, const Settings& s, json* probes);

// INT8 / INT4 q.K dot products over key blocks, one core and all cores:
// probes score_int8_1t, score_int8_all, score_int4_1t, score_int4_all; returns
// the vector extensions used.
json probe_scoring(const Settings& s, json* probes);

// zstd and lz4 on KV-like FP16 data: probes {zstd,lz4}_{compress,decompress}_{1t,all}
// with the compression ratio per sample; returns the codecs' versions and levels.
json probe_codecs(const Settings& s, json* probes);

// The pipeline's attention kernel (cpu_attention.h) over N bytes of KV in
// DRAM, one layer, all heads: probe cpu_attention (and the threads it uses).
json probe_cpu_attention(const Settings& s, int kv_heads, int head_dim, int block_tokens, json* probes);

}  // namespace kvtier::host
