// DRAM: memcpy between two buffers of S bytes each, against S, on one thread
// and on all threads (each copying its own pair, so the figure is the
// socket's copy bandwidth). Small sizes sit in the caches: that is part of
// the curve, not an error.
#include <cstring>
#include <memory>

#include "cuda_validate/host_probes.h"

namespace kvtier::host {

namespace {

// Source and destination in one allocation, the destination 2112 bytes past
// a page multiple from the source: equal page offsets would make every load
// wait on a store to the same 4 KiB alias (a 10x slowdown seen here).
struct Buffers {
  std::unique_ptr<unsigned char[]> mem;
  unsigned char* src = nullptr;
  unsigned char* dst = nullptr;
};

json one(const Settings& s, int threads, const std::vector<size_t>& sizes, const std::string& what) {
  json p{{"kind", "memory"}, {"path", "dram"}, {"threads", threads}, {"what", what}, {"samples", json::array()}};
  for (size_t size : sizes) {
    if (std::chrono::steady_clock::now() > s.deadline) {
      p["truncated"] = true;
      break;
    }
    std::vector<Buffers> b(threads);
    for (auto& x : b) {
      x.mem.reset(new unsigned char[2 * size + 8192]);
      x.src = x.mem.get();
      x.dst = x.mem.get() + ((size + 4095) / 4096) * 4096 + 2112;
      std::memset(x.src, 0x5a, size);  // touch every page before timing
      std::memset(x.dst, 0, size);
    }
    // Small copies are repeated within one timed run so that a run lasts
    // long enough for the clock; the time reported is per copy.
    const size_t inner = std::max<size_t>(1, (size_t(4) << 20) / size);
    std::vector<double> t;
    for (int r = 0; r < s.warmup + s.repetitions; ++r) {
      const double us = timed_parallel(threads, [&](int i) {
        for (size_t k = 0; k < inner; ++k) std::memcpy(b[i].dst, b[i].src, size);
      });
      if (r >= s.warmup) t.push_back(us / static_cast<double>(inner));
    }
    json smp = sample(static_cast<double>(size), t);
    smp["GBps"] = static_cast<double>(size) * threads / smp["median_us"].get<double>() * 1e-3;
    p["samples"].push_back(smp);
  }
  return p;
}

}  // namespace

json probe_dram(const Settings& s, json* probes) {
  const size_t hi = s.quick ? (size_t(64) << 20) : (size_t(512) << 20);
  const auto sizes = geometric(4096, hi, s.quick ? 4 : 2);
  (*probes)["dram_copy_1t"] =
      one(s, 1, sizes, "memcpy of S bytes between two buffers on one thread; bytes = S copied (2S of traffic)");
  (*probes)["dram_copy_all"] =
      one(s, s.threads, sizes,
          "memcpy of S bytes on each of `threads` threads at once (own buffers); bytes = S per thread; GBps = all threads");
  return json{{"threads", s.threads}};
}

}  // namespace kvtier::host
