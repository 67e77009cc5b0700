// The measuring side of the calibration harness: plain C++ declarations of
// what probes.cu implements with the CUDA runtime, so calibrate_main.cpp (CLI,
// JSON) compiles without CUDA headers. docs/calibration.md describes each probe.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace kvtier::cal {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t total_bytes = 0, free_bytes = 0;
  int sm_clock_max_kHz = 0;   // cudaDevAttrClockRate (the peak SM clock)
  int mem_clock_max_kHz = 0;  // cudaDevAttrMemoryClockRate
  int mem_bus_bits = 0;
  int l2_bytes = 0;
  int driver_version = 0;   // cudaDriverGetVersion, e.g. 12080 = 12.8
  int runtime_version = 0;  // cudaRuntimeGetVersion
};

// Number of CUDA devices; 0 with *why set when there are none or the runtime
// cannot reach them (no driver, driver too old for this runtime, ...).
int device_count(std::string* why);

// Selects device `index` and fills *info. Throws std::runtime_error on a CUDA error.
DeviceInfo open_device(int index);

// One measured size: bytes moved or read (or FLOPs for GEMM), and every timed
// repetition in microseconds: `times_us` from CUDA events on the stream,
// `wall_us` from the host's steady clock around issue + synchronize.
struct Sample {
  double bytes = 0;
  double n = 0;      // GEMM: the matrix order (bytes stays 0)
  double flops = 0;  // GEMM: 2 n^3
  std::vector<double> times_us;
  std::vector<double> wall_us;
  // Concurrent probe: two operations started together on two streams;
  // times_us is the first's completion, times_b_us the second's, both from
  // the common start.
  std::string label;
  double bytes_b = 0;
  std::vector<double> times_b_us;
};

struct Settings {
  std::vector<size_t> sizes;  // bytes (copies, kv_read) or matrix order n (gemm)
  int repetitions = 20;
  int warmup = 3;
  std::chrono::steady_clock::time_point deadline;  // stop adding sizes after this
};

struct ProbeResult {
  std::vector<Sample> samples;
  bool truncated = false;  // sizes left out: the deadline passed or memory ran out
  std::string note;        // why sizes were left out; launch configuration
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

// cudaMemcpyAsync of each size on one stream, timed by events. `pinned`:
// cudaHostAlloc'ed host buffer, else malloc'ed (pageable) and touched first.
ProbeResult probe_copy(CopyKind kind, bool pinned, const Settings& s);

// The kv_read kernel: streams N bytes of device memory with 16-byte loads and
// reduces them to one float per block. L2 is flushed (a memset of twice its
// size) before every repetition, outside the timed interval.
ProbeResult probe_kv_read(const Settings& s);

// A simple WMMA kernel (one warp per 16x16 tile of C, fragments loaded straight
// from global memory, FP16 inputs, FP32 accumulation): n x n x n GEMMs.
ProbeResult probe_gemm_wmma(const Settings& s);

// Concurrency: two operations started at the same instant on two streams,
// each one's completion time measured from that instant. Cases: H2D with D2H
// (are the directions independent?), H2D with H2D (how two flows share one
// direction), kv_read with H2D (does a copy slow a memory-bound kernel, and
// the kernel the copy?). Copies move `copy_bytes`, the kernel reads
// `kernel_bytes`; pinned host memory.
ProbeResult probe_concurrent(size_t copy_bytes, size_t kernel_bytes, const Settings& s);

}  // namespace kvtier::cal
