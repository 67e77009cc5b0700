// CUDA side of gpu_kernels.h. Timing as in probes.cu: CUDA events on one
// stream around the operation, after warm-up runs, L2 flushed between
// repetitions where the kernel reads more than it would keep.
#include <cub/device/device_radix_sort.cuh>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "cuda_validate/gpu_kernels.h"

namespace kvtier::cal {

namespace {

void check(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + " (gpu_kernels.cu:" + std::to_string(line) + "): " + cudaGetErrorString(e));
}
#define CK(x) check((x), #x, __LINE__)

using Clock = std::chrono::steady_clock;
bool past(const Settings& s) { return Clock::now() > s.deadline; }

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t n) { CK(cudaMalloc(&p, std::max<size_t>(n, 16))); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

struct Events {
  cudaStream_t stream = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  Events() {
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaStreamDestroy(stream);
  }
};

// L2 is flushed by writing twice its size.
struct Flush {
  size_t n = 0;
  void* p = nullptr;
  Flush() {
    int dev = 0, l2 = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    n = std::max<size_t>(size_t(2) * l2, 1 << 20);
    CK(cudaMalloc(&p, n));
  }
  ~Flush() { cudaFree(p); }
  void operator()(cudaStream_t s) const { CK(cudaMemsetAsync(p, 0, n, s)); }
};

template <class Issue>
Sample timed(Events& ev, const Flush& flush, double bytes, const Settings& s, Issue issue) {
  Sample out;
  out.bytes = bytes;
  for (int i = 0; i < s.warmup; ++i) issue(ev.stream);
  CK(cudaStreamSynchronize(ev.stream));
  for (int i = 0; i < s.repetitions; ++i) {
    flush(ev.stream);
    CK(cudaStreamSynchronize(ev.stream));
    const auto t0 = Clock::now();
    CK(cudaEventRecord(ev.a, ev.stream));
    issue(ev.stream);
    CK(cudaEventRecord(ev.b, ev.stream));
    CK(cudaEventSynchronize(ev.b));
    out.wall_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, ev.a, ev.b));
    out.times_us.push_back(ms * 1e3);
  }
  CK(cudaGetLastError());
  return out;
}

// ---- Paged decode attention -------------------------------------------------
// One CTA of 4 warps per (sequence, KV head); warp w takes tokens w, w+4, ...;
// a lane holds 4 of the 128 dimensions (D = 128 only). Scores reduce by
// shuffles; each warp keeps a running max / sum / output, merged at the end.
constexpr int kWarps = 4;
constexpr int kDim = 128;

__global__ void paged_attention_kernel(const __half* __restrict__ kpool, const __half* __restrict__ vpool,
                                       const int* __restrict__ table, const __half* __restrict__ q,
                                       float* __restrict__ out, int context, int blocks_per_seq, int block_tokens,
                                       int kv_heads, float scale) {
  const int seq = blockIdx.x / kv_heads, h = blockIdx.x % kv_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const __half* qh = q + (size_t(seq) * kv_heads + h) * kDim;
  float qv[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) qv[k] = __half2float(qh[lane * 4 + k]);
  float m = -INFINITY, l = 0, acc[4] = {0, 0, 0, 0};
  const int* tb = table + size_t(seq) * blocks_per_seq;
  for (int t = warp; t < context; t += kWarps) {
    const int blk = tb[t / block_tokens];
    const size_t off = ((size_t(blk) * block_tokens + t % block_tokens) * kv_heads + h) * kDim + lane * 4;
    const uint2 kr = *reinterpret_cast<const uint2*>(kpool + off);
    const __half2* k2 = reinterpret_cast<const __half2*>(&kr);
    float2 a = __half22float2(k2[0]), b = __half22float2(k2[1]);
    float d = qv[0] * a.x + qv[1] * a.y + qv[2] * b.x + qv[3] * b.y;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
    d *= scale;
    const float mn = fmaxf(m, d), c = __expf(m - mn), p = __expf(d - mn);
    l = l * c + p;
    m = mn;
    const uint2 vr = *reinterpret_cast<const uint2*>(vpool + off);
    const __half2* v2 = reinterpret_cast<const __half2*>(&vr);
    a = __half22float2(v2[0]);
    b = __half22float2(v2[1]);
    acc[0] = acc[0] * c + p * a.x;
    acc[1] = acc[1] * c + p * a.y;
    acc[2] = acc[2] * c + p * b.x;
    acc[3] = acc[3] * c + p * b.y;
  }
  __shared__ float sm[kWarps], sl[kWarps], sacc[kWarps][kDim];
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) sacc[warp][lane * 4 + k] = acc[k];
  __syncthreads();
  if (warp == 0) {
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm[w]);
    float L = 0, o[4] = {0, 0, 0, 0};
    for (int w = 0; w < kWarps; ++w) {
      const float c = sm[w] == -INFINITY ? 0.f : __expf(sm[w] - M);
      L += sl[w] * c;
#pragma unroll
      for (int k = 0; k < 4; ++k) o[k] += sacc[w][lane * 4 + k] * c;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) out[(size_t(seq) * kv_heads + h) * kDim + lane * 4 + k] = L > 0 ? o[k] / L : 0.f;
  }
}

__global__ void fill_half(__half* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned x = unsigned(i) * 2654435761u + seed;
    p[i] = __float2half(((x >> 9) & 0xff) / 256.0f - 0.5f);
  }
}

// ---- Scoring: Q.K^T with INT8 / INT4 keys (dp4a) ---------------------------
// One thread per key row of 128 dims: 128 (INT8) or 64 (INT4) bytes.
__global__ void score_int8_kernel(const int4* __restrict__ keys, const int* __restrict__ q, float* __restrict__ out,
                                  size_t rows) {
  const size_t r = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const int4* k = keys + r * 8;
  int s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int4 v = k[j];
    s = __dp4a(v.x, q[j * 4 + 0], s);
    s = __dp4a(v.y, q[j * 4 + 1], s);
    s = __dp4a(v.z, q[j * 4 + 2], s);
    s = __dp4a(v.w, q[j * 4 + 3], s);
  }
  out[r] = float(s);
}

// INT4: each byte holds two dims (value + 8); the query comes split into
// even and odd dims (qe, qo: 16 ints of 4 packed INT8 each), as on the CPU.
__device__ __forceinline__ int nib_dot(unsigned w, int qe, int qo, int s) {
  const unsigned lo = w & 0x0f0f0f0fu, hi = (w >> 4) & 0x0f0f0f0fu;
  s = __dp4a(static_cast<int>(lo), qe, s);
  return __dp4a(static_cast<int>(hi), qo, s);
}
__global__ void score_int4_kernel(const int4* __restrict__ keys, const int* __restrict__ qe, const int* __restrict__ qo,
                                  int qsum, float* __restrict__ out, size_t rows) {
  const size_t r = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const int4* k = keys + r * 4;
  int s = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int4 v = k[j];
    s = nib_dot(static_cast<unsigned>(v.x), qe[j * 4 + 0], qo[j * 4 + 0], s);
    s = nib_dot(static_cast<unsigned>(v.y), qe[j * 4 + 1], qo[j * 4 + 1], s);
    s = nib_dot(static_cast<unsigned>(v.z), qe[j * 4 + 2], qo[j * 4 + 2], s);
    s = nib_dot(static_cast<unsigned>(v.w), qe[j * 4 + 3], qo[j * 4 + 3], s);
  }
  out[r] = float(s - 8 * qsum);
}

__global__ void iota_kernel(int* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<int>(i);
}

// ---- A memory-bound kernel for the interference probe ----------------------
__global__ void stream_read_kernel(const uint4* __restrict__ p, size_t n16, float* __restrict__ out) {
  float acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
  }
  if (acc == 1.2345f) out[0] = acc;  // keeps the loads
}

int sm_count() {
  int dev = 0, n = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  return n;
}

}  // namespace

ProbeResult probe_paged_attention(const PagedShape& sh, int batch, const std::vector<size_t>& contexts, size_t max_bytes,
                                  const Settings& s) {
  if (sh.head_dim != kDim) throw std::runtime_error("paged attention probe: head_dim must be 128");
  ProbeResult r;
  r.note = "one CTA of 4 warps per (sequence, KV head), FP16 K/V gathered through a random block table of " +
           std::to_string(sh.block_tokens) + "-token blocks, online softmax, FP32 accumulation; batch " +
           std::to_string(batch);
  Events ev;
  Flush flush;
  for (size_t ctx : contexts) {
    if (past(s)) {
      r.truncated = true;
      break;
    }
    const size_t bps = (ctx + sh.block_tokens - 1) / sh.block_tokens;
    const size_t nblocks = bps * batch;
    const size_t elems = nblocks * sh.block_tokens * sh.kv_heads * kDim;
    if (2 * elems * sizeof(__half) > max_bytes) {
      r.truncated = true;
      r.note += "; contexts above " + std::to_string(ctx) + " left out (KV pool over the memory cap)";
      break;
    }
    Dev k(elems * 2), v(elems * 2), q(size_t(batch) * sh.kv_heads * kDim * 2), out(size_t(batch) * sh.kv_heads * kDim * 4),
        table(nblocks * sizeof(int));
    fill_half<<<1024, 256>>>(k.as<__half>(), elems, 1);
    fill_half<<<1024, 256>>>(v.as<__half>(), elems, 2);
    fill_half<<<64, 256>>>(q.as<__half>(), size_t(batch) * sh.kv_heads * kDim, 3);
    std::vector<int> perm(nblocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(42));
    CK(cudaMemcpy(table.p, perm.data(), nblocks * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
    const float scale = 1.0f / std::sqrt(float(kDim));
    const double bytes = double(batch) * ctx * sh.kv_heads * kDim * 2 * 2;
    Sample smp = timed(ev, flush, bytes, s, [&](cudaStream_t st) {
      paged_attention_kernel<<<batch * sh.kv_heads, kWarps * 32, 0, st>>>(
          k.as<__half>(), v.as<__half>(), table.as<int>(), q.as<__half>(), out.as<float>(), static_cast<int>(ctx),
          static_cast<int>(bps), sh.block_tokens, sh.kv_heads, scale);
    });
    smp.label = "context " + std::to_string(ctx);
    smp.n = 0;
    r.samples.push_back(smp);
  }
  return r;
}

ProbeResult probe_scoring(int bits, double topk_fraction, const std::vector<size_t>& key_bytes, const Settings& s) {
  ProbeResult r;
  r.note = std::string("one thread per 128-dim key row, dp4a, INT") + std::to_string(bits) + " keys" +
           (topk_fraction > 0 ? ", then the top " + std::to_string(int(topk_fraction * 100)) +
                                    "% by CUB DeviceRadixSort::SortPairsDescending over (score, index)"
                              : std::string(", scores only"));
  Events ev;
  Flush flush;
  const size_t row_bytes = size_t(128) * bits / 8;
  for (size_t kb : key_bytes) {
    if (past(s)) {
      r.truncated = true;
      break;
    }
    const size_t rows = kb / row_bytes;
    Dev keys(kb), scores(rows * 4), q(32 * 4), qo(16 * 4), idx(rows * 4), sorted(rows * 4), sidx(rows * 4);
    CK(cudaMemset(keys.p, 0x35, kb));
    std::vector<int> qh(32, 0x01020304);
    CK(cudaMemcpy(q.p, qh.data(), 32 * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(qo.p, qh.data(), 16 * 4, cudaMemcpyHostToDevice));
    iota_kernel<<<1024, 256>>>(idx.as<int>(), rows);
    size_t temp = 0;
    if (topk_fraction > 0)
      CK(cub::DeviceRadixSort::SortPairsDescending(nullptr, temp, scores.as<float>(), sorted.as<float>(), idx.as<int>(),
                                                   sidx.as<int>(), static_cast<int>(rows)));
    Dev tmp(temp);
    CK(cudaDeviceSynchronize());
    const int threads = 256;
    const unsigned grid = static_cast<unsigned>((rows + threads - 1) / threads);
    Sample smp = timed(ev, flush, double(kb), s, [&](cudaStream_t st) {
      if (bits == 8)
        score_int8_kernel<<<grid, threads, 0, st>>>(keys.as<int4>(), q.as<int>(), scores.as<float>(), rows);
      else
        score_int4_kernel<<<grid, threads, 0, st>>>(keys.as<int4>(), q.as<int>(), qo.as<int>(), 320,
                                                    scores.as<float>(), rows);  // 320: the sum of this query's elements
      if (topk_fraction > 0) {
        size_t t = temp;
        CK(cub::DeviceRadixSort::SortPairsDescending(tmp.p, t, scores.as<float>(), sorted.as<float>(), idx.as<int>(),
                                                     sidx.as<int>(), static_cast<int>(rows), 0, 32, st));
      }
    });
    r.samples.push_back(smp);
  }
  return r;
}

ProbeResult probe_copy_kernel_interference(size_t copy_bytes, const std::vector<size_t>& kernel_bytes,
                                           const Settings& s) {
  ProbeResult r;
  r.note = "pinned H2D cudaMemcpyAsync of " + std::to_string(copy_bytes) +
           " bytes and a streaming-read kernel started by one event on two streams";
  void* host = nullptr;
  CK(cudaHostAlloc(&host, copy_bytes, cudaHostAllocDefault));
  std::memset(host, 1, copy_bytes);
  Dev dst(copy_bytes), out(16);
  cudaStream_t sa, sb;
  CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  cudaEvent_t go, ea, eb;
  CK(cudaEventCreate(&go));
  CK(cudaEventCreate(&ea));
  CK(cudaEventCreate(&eb));
  const unsigned grid = static_cast<unsigned>(sm_count() * 8);
  try {
    for (size_t kb : kernel_bytes) {
      if (past(s)) {
        r.truncated = true;
        break;
      }
      Dev src(kb);
      CK(cudaMemset(src.p, 0, kb));
      auto kernel = [&](cudaStream_t st) { stream_read_kernel<<<grid, 256, 0, st>>>(src.as<uint4>(), kb / 16, out.as<float>()); };
      auto copy = [&](cudaStream_t st) { CK(cudaMemcpyAsync(dst.p, host, copy_bytes, cudaMemcpyHostToDevice, st)); };
      for (int mode = 0; mode < 3; ++mode) {  // together, kernel alone, copy alone
        Sample smp;
        smp.bytes = double(kb);
        smp.bytes_b = double(copy_bytes);
        smp.label = mode == 0 ? "together" : mode == 1 ? "kernel_solo" : "copy_solo";
        for (int i = 0; i < s.warmup + s.repetitions; ++i) {
          CK(cudaDeviceSynchronize());
          CK(cudaEventRecord(go, sa));
          CK(cudaStreamWaitEvent(sb, go, 0));
          if (mode != 2) kernel(sa);
          CK(cudaEventRecord(ea, sa));
          if (mode != 1) copy(sb);
          CK(cudaEventRecord(eb, sb));
          CK(cudaEventSynchronize(ea));
          CK(cudaEventSynchronize(eb));
          float ta = 0, tb = 0;
          CK(cudaEventElapsedTime(&ta, go, ea));
          CK(cudaEventElapsedTime(&tb, go, eb));
          if (i < s.warmup) continue;
          smp.times_us.push_back(std::max(ta * 1e3f, 1e-3f));
          smp.times_b_us.push_back(std::max(tb * 1e3f, 1e-3f));
        }
        r.samples.push_back(smp);
      }
    }
  } catch (...) {
    cudaFreeHost(host);
    throw;
  }
  cudaEventDestroy(go);
  cudaEventDestroy(ea);
  cudaEventDestroy(eb);
  cudaStreamDestroy(sa);
  cudaStreamDestroy(sb);
  cudaFreeHost(host);
  return r;
}

}  // namespace kvtier::cal
