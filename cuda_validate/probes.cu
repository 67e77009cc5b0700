// CUDA side of the calibration harness: copies, the kv_read kernel and a
// simple WMMA GEMM, each timed with CUDA events. No JSON, no CLI here.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "cuda_validate/probes.h"

namespace kvtier::cal {

namespace {

void check(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + " (probes.cu:" + std::to_string(line) + "): " + cudaGetErrorString(e));
}
#define CK(x) check((x), #x, __LINE__)

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Events and a stream for one probe.
struct Timer {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  Timer() {
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&stop));
  }
  ~Timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // Times `issue` (which enqueues work on `stream`) reps times after warmup runs;
  // `before` runs untimed before each (e.g. an L2 flush), on the same stream.
  template <class Issue, class Before>
  Sample measure(double bytes, int warmup, int reps, Issue issue, Before before) {
    Sample s;
    s.bytes = bytes;
    for (int i = 0; i < warmup; ++i) {
      before();
      issue();
    }
    CK(cudaStreamSynchronize(stream));
    for (int i = 0; i < reps; ++i) {
      before();
      CK(cudaStreamSynchronize(stream));
      auto t0 = Clock::now();
      CK(cudaEventRecord(start, stream));
      issue();
      CK(cudaEventRecord(stop, stream));
      CK(cudaEventSynchronize(stop));
      s.wall_us.push_back(us_since(t0));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, start, stop));
      s.times_us.push_back(ms * 1e3);
    }
    return s;
  }
};

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t n) { CK(cudaMalloc(&p, n)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct HostBuffer {
  void* p = nullptr;
  bool pinned;
  HostBuffer(size_t n, bool pin) : pinned(pin) {
    if (pinned) {
      CK(cudaHostAlloc(&p, n, cudaHostAllocDefault));
    } else {
      p = std::malloc(n);
      if (!p) throw std::runtime_error("malloc of " + std::to_string(n) + " bytes failed");
    }
    std::memset(p, 1, n);  // touch every page before timing
  }
  ~HostBuffer() {
    if (pinned) cudaFreeHost(p);
    else std::free(p);
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
};

bool past(const Settings& s) { return Clock::now() > s.deadline; }

size_t largest(const std::vector<size_t>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

// kv_read: grid-stride loop, four independent 16-byte loads in flight per
// thread, FP16 pairs summed in FP32, warp-shuffle then shared-memory reduction,
// one float per block written (so the loads cannot be optimised away).
constexpr int kThreads = 256;

__global__ void kv_read_kernel(const uint4* __restrict__ p, size_t n16, float* __restrict__ out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float acc = 0.f;
  auto add = [&acc](const uint4& v) {
    const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float2 f = __half22float2(h[k]);
      acc += f.x + f.y;
    }
  };
  for (; i + 3 * stride < n16; i += 4 * stride) {
    uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
    add(a);
    add(b);
    add(c);
    add(d);
  }
  for (; i < n16; i += stride) add(p[i]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  __shared__ float warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < kThreads / 32; ++w) t += warp_sums[w];
    out[blockIdx.x] = t;
  }
}

// One warp per 16x16 tile of C = A B; A row-major n x n, B column-major.
// Blocks of 4 x 4 warps cover 64 x 64 of C; n is a multiple of 64.
__global__ void wmma_gemm_kernel(const __half* __restrict__ a, const __half* __restrict__ b, float* __restrict__ c,
                                 int n) {
  using namespace nvcuda;
  const int tile_m = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int tile_n = blockIdx.y * blockDim.y + threadIdx.y;
  const size_t row = static_cast<size_t>(tile_m) * 16, col = static_cast<size_t>(tile_n) * 16;
  if (row >= static_cast<size_t>(n) || col >= static_cast<size_t>(n)) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < n; k += 16) {
    wmma::load_matrix_sync(fa, a + row * n + k, n);
    wmma::load_matrix_sync(fb, b + col * n + k, n);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(c + row * n + col, acc, n, wmma::mem_row_major);
}

}  // namespace

int device_count(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount returned 0 devices";
  return n;
}

DeviceInfo open_device(int index) {
  DeviceInfo d;
  d.index = index;
  CK(cudaSetDevice(index));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, index));
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.total_bytes = p.totalGlobalMem;
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) == cudaSuccess) d.pci_bus_id = bus;
  CK(cudaDeviceGetAttribute(&d.sm_clock_max_kHz, cudaDevAttrClockRate, index));
  CK(cudaDeviceGetAttribute(&d.mem_clock_max_kHz, cudaDevAttrMemoryClockRate, index));
  CK(cudaDeviceGetAttribute(&d.mem_bus_bits, cudaDevAttrGlobalMemoryBusWidth, index));
  CK(cudaDeviceGetAttribute(&d.l2_bytes, cudaDevAttrL2CacheSize, index));
  CK(cudaDriverGetVersion(&d.driver_version));
  CK(cudaRuntimeGetVersion(&d.runtime_version));
  size_t total = 0;
  CK(cudaMemGetInfo(&d.free_bytes, &total));
  return d;
}

ProbeResult probe_copy(CopyKind kind, bool pinned, const Settings& s) {
  ProbeResult r;
  const size_t n = largest(s.sizes);
  Timer t;
  DeviceBuffer dev(n);
  CK(cudaMemset(dev.p, 0, n));
  std::unique_ptr<HostBuffer> host;
  std::unique_ptr<DeviceBuffer> dev2;
  if (kind == CopyKind::DeviceToDevice) {
    dev2 = std::make_unique<DeviceBuffer>(n);
    CK(cudaMemset(dev2->p, 0, n));
  } else {
    host = std::make_unique<HostBuffer>(n, pinned);
  }
  CK(cudaDeviceSynchronize());
  for (size_t bytes : s.sizes) {
    if (past(s)) {
      r.truncated = true;
      r.note = "time limit reached before " + std::to_string(bytes) + " bytes";
      break;
    }
    void* dst = kind == CopyKind::HostToDevice ? dev.p : kind == CopyKind::DeviceToHost ? host->p : dev2->p;
    const void* src = kind == CopyKind::HostToDevice ? host->p : dev.p;
    const cudaMemcpyKind mk = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                              : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                               : cudaMemcpyDeviceToDevice;
    r.samples.push_back(t.measure(
        static_cast<double>(bytes), s.warmup, s.repetitions,
        [&] { CK(cudaMemcpyAsync(dst, src, bytes, mk, t.stream)); }, [] {}));
  }
  return r;
}

ProbeResult probe_kv_read(const Settings& s) {
  ProbeResult r;
  int dev = 0, sms = 0, l2 = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  const int max_blocks = sms * 8;
  const size_t n = largest(s.sizes);
  const size_t flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2), 1 << 20);
  Timer t;
  DeviceBuffer buf(n), flush(flush_bytes), out(sizeof(float) * max_blocks);
  CK(cudaMemset(buf.p, 0, n));
  CK(cudaDeviceSynchronize());
  r.note = std::to_string(kThreads) + " threads per block, up to " + std::to_string(max_blocks) +
           " blocks (8 per SM); L2 flushed by a " + std::to_string(flush_bytes) + "-byte memset before each run";
  for (size_t bytes : s.sizes) {
    if (past(s)) {
      r.truncated = true;
      r.note += "; time limit reached before " + std::to_string(bytes) + " bytes";
      break;
    }
    const size_t n16 = bytes / 16;
    const int blocks = static_cast<int>(std::min<size_t>(max_blocks, std::max<size_t>(1, (n16 + kThreads - 1) / kThreads)));
    r.samples.push_back(t.measure(
        static_cast<double>(n16 * 16), s.warmup, s.repetitions,
        [&] {
          kv_read_kernel<<<blocks, kThreads, 0, t.stream>>>(static_cast<const uint4*>(buf.p), n16,
                                                            static_cast<float*>(out.p));
          CK(cudaGetLastError());
        },
        [&] { CK(cudaMemsetAsync(flush.p, 0, flush_bytes, t.stream)); }));
  }
  return r;
}

ProbeResult probe_gemm_wmma(const Settings& s) {
  ProbeResult r;
  int dev = 0, major = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major < 7) {
    r.truncated = true;
    r.note = "WMMA needs compute capability 7.0 or newer";
    return r;
  }
  const size_t nmax = largest(s.sizes);
  Timer t;
  DeviceBuffer a(nmax * nmax * sizeof(__half)), b(nmax * nmax * sizeof(__half)), c(nmax * nmax * sizeof(float));
  CK(cudaMemset(a.p, 0, nmax * nmax * sizeof(__half)));
  CK(cudaMemset(b.p, 0, nmax * nmax * sizeof(__half)));
  CK(cudaDeviceSynchronize());
  r.note = "blocks of 4 x 4 warps, one 16x16x16 WMMA tile per warp, fragments loaded from global memory";
  for (size_t n : s.sizes) {
    if (past(s)) {
      r.truncated = true;
      r.note += "; time limit reached before n = " + std::to_string(n);
      break;
    }
    const int ni = static_cast<int>(n);
    const dim3 block(128, 4), grid(static_cast<unsigned>(n / 64), static_cast<unsigned>(n / 64));
    Sample smp = t.measure(
        0.0, s.warmup, s.repetitions,
        [&] {
          wmma_gemm_kernel<<<grid, block, 0, t.stream>>>(static_cast<const __half*>(a.p), static_cast<const __half*>(b.p),
                                                         static_cast<float*>(c.p), ni);
          CK(cudaGetLastError());
        },
        [] {});
    smp.n = static_cast<double>(n);
    smp.flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    r.samples.push_back(std::move(smp));
  }
  return r;
}

ProbeResult probe_concurrent(size_t copy_bytes, size_t kernel_bytes, const Settings& s) {
  ProbeResult r;
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int max_blocks = sms * 8;
  cudaStream_t a = nullptr, b = nullptr;
  CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  cudaEvent_t start = nullptr, stop_a = nullptr, stop_b = nullptr;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop_a));
  CK(cudaEventCreate(&stop_b));
  {
    HostBuffer h1(copy_bytes, true), h2(copy_bytes, true);
    DeviceBuffer d1(copy_bytes), d2(copy_bytes), kv(kernel_bytes), out(sizeof(float) * max_blocks);
    CK(cudaMemset(d1.p, 0, copy_bytes));
    CK(cudaMemset(d2.p, 0, copy_bytes));
    CK(cudaMemset(kv.p, 0, kernel_bytes));
    CK(cudaDeviceSynchronize());
    const size_t n16 = kernel_bytes / 16;
    const int blocks = static_cast<int>(std::min<size_t>(max_blocks, std::max<size_t>(1, (n16 + kThreads - 1) / kThreads)));
    auto h2d = [&](void* dst, const void* src, cudaStream_t st) {
      CK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyHostToDevice, st));
    };
    auto d2h = [&](void* dst, const void* src, cudaStream_t st) {
      CK(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToHost, st));
    };
    auto kread = [&](cudaStream_t st) {
      kv_read_kernel<<<blocks, kThreads, 0, st>>>(static_cast<const uint4*>(kv.p), n16, static_cast<float*>(out.p));
      CK(cudaGetLastError());
    };
    struct Case {
      const char* label;
      double bytes_a, bytes_b;
      std::function<void()> op_a, op_b;
    };
    const std::vector<Case> cases = {
        {"h2d+d2h", double(copy_bytes), double(copy_bytes), [&] { h2d(d1.p, h1.p, a); }, [&] { d2h(h2.p, d2.p, b); }},
        {"h2d+h2d", double(copy_bytes), double(copy_bytes), [&] { h2d(d1.p, h1.p, a); }, [&] { h2d(d2.p, h2.p, b); }},
        {"kv_read+h2d", double(n16 * 16), double(copy_bytes), [&] { kread(a); }, [&] { h2d(d1.p, h1.p, b); }},
    };
    r.note = "copies of " + std::to_string(copy_bytes) + " bytes (pinned), kv_read of " + std::to_string(n16 * 16) +
             " bytes; both started by one event, times from it";
    for (const Case& c : cases) {
      if (past(s)) {
        r.truncated = true;
        r.note += "; time limit reached before " + std::string(c.label);
        break;
      }
      Sample smp;
      smp.label = c.label;
      smp.bytes = c.bytes_a;
      smp.bytes_b = c.bytes_b;
      for (int i = 0; i < s.warmup + s.repetitions; ++i) {
        CK(cudaDeviceSynchronize());
        auto t0 = Clock::now();
        CK(cudaEventRecord(start, a));
        CK(cudaStreamWaitEvent(b, start, 0));
        c.op_a();
        c.op_b();
        CK(cudaEventRecord(stop_a, a));
        CK(cudaEventRecord(stop_b, b));
        CK(cudaEventSynchronize(stop_a));
        CK(cudaEventSynchronize(stop_b));
        if (i < s.warmup) continue;
        smp.wall_us.push_back(us_since(t0));
        float ms_a = 0, ms_b = 0;
        CK(cudaEventElapsedTime(&ms_a, start, stop_a));
        CK(cudaEventElapsedTime(&ms_b, start, stop_b));
        smp.times_us.push_back(ms_a * 1e3);
        smp.times_b_us.push_back(ms_b * 1e3);
      }
      r.samples.push_back(std::move(smp));
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop_a);
  cudaEventDestroy(stop_b);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  return r;
}

}  // namespace kvtier::cal
