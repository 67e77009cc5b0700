// Codecs on KV-like data: zstd (level 1 and 3) and lz4 compressing and
// decompressing FP16 keys and values of S bytes as one frame, one thread and
// all threads (each on its own part of the data). KV-like: keys have a few
// outlier channels of large magnitude (per-channel scales drawn log-normal,
// as KV-quantization papers such as KIVI describe), values are close to
// Gaussian, both stored as IEEE half precision; random bytes or zeros would
// give meaningless ratios either way.
#include <lz4.h>
#include <zstd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "cuda_validate/host_probes.h"

namespace kvtier::host {

namespace {

uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffff;
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t h = man >> shift;
    if ((man >> (shift - 1)) & 1) ++h;  // round half up
    return static_cast<uint16_t>(sign | h);
  }
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  if (man & 0x1000) ++h;  // round half up (may carry into the exponent: still correct)
  return static_cast<uint16_t>(h);
}

// Alternating key and value blocks of 128-token x 128-dim FP16.
std::vector<unsigned char> kv_like(size_t bytes, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::lognormal_distribution<float> scale(-1.0f, 0.8f);
  constexpr size_t dim = 128, tokens = 128;
  std::vector<float> ch(dim);
  for (auto& c : ch) c = scale(g);
  for (size_t i = 0; i < 4; ++i) ch[g() % dim] *= 20.f;  // outlier channels of the keys
  std::vector<unsigned char> out(bytes);
  uint16_t* h = reinterpret_cast<uint16_t*>(out.data());
  const size_t n_half = bytes / 2;
  for (size_t i = 0; i < n_half; ++i) {
    const size_t block = i / (dim * tokens);
    const size_t d = i % dim;
    const float v = block % 2 == 0 ? n(g) * ch[d] : n(g) * 0.4f;
    h[i] = to_half(v);
  }
  return out;
}

struct Codec {
  std::string name;
  int level;
  size_t bound(size_t n) const { return name == "lz4" ? static_cast<size_t>(LZ4_compressBound(static_cast<int>(n))) : ZSTD_compressBound(n); }
  size_t compress(void* ctx, const unsigned char* src, size_t n, unsigned char* dst, size_t cap) const {
    if (name == "lz4") {
      const int r = LZ4_compress_default(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst),
                                         static_cast<int>(n), static_cast<int>(cap));
      if (r <= 0) throw std::runtime_error("LZ4_compress_default failed");
      return static_cast<size_t>(r);
    }
    const size_t r = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(ctx), dst, cap, src, n, level);
    if (ZSTD_isError(r)) throw std::runtime_error(std::string("ZSTD_compress: ") + ZSTD_getErrorName(r));
    return r;
  }
  void decompress(void* ctx, const unsigned char* src, size_t n, unsigned char* dst, size_t raw) const {
    if (name == "lz4") {
      const int r = LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(dst),
                                        static_cast<int>(n), static_cast<int>(raw));
      if (r != static_cast<int>(raw)) throw std::runtime_error("LZ4_decompress_safe failed");
      return;
    }
    const size_t r = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(ctx), dst, raw, src, n);
    if (ZSTD_isError(r) || r != raw) throw std::runtime_error("ZSTD_decompress failed");
  }
};

}  // namespace

json probe_codecs(const Settings& s, json* probes) {
  const size_t hi = s.quick ? (size_t(4) << 20) : (size_t(16) << 20);
  const auto sizes = geometric(size_t(64) << 10, hi, s.quick ? 4 : 2);
  const int T = s.threads;
  std::vector<std::vector<unsigned char>> data(T);
  for (int i = 0; i < T; ++i) data[i] = kv_like(hi, 1000 + i);
  const std::vector<Codec> codecs = {{"lz4", 0}, {"zstd", 1}, {"zstd", 3}};
  for (const Codec& c : codecs) {
    const std::string tag = c.name == "lz4" ? "lz4" : c.name + std::to_string(c.level);
    for (int threads : {1, T}) {
      const std::string suffix = threads == 1 ? "_1t" : "_all";
      json pc{{"kind", "codec"}, {"path", tag + "_compress"}, {"codec", c.name}, {"level", c.level}, {"threads", threads},
              {"what", tag + " compression of S bytes of KV-like FP16 as one frame per thread; bytes = S per thread"},
              {"samples", json::array()}};
      json pd = pc;
      pd["path"] = tag + "_decompress";
      pd["what"] = tag + " decompression back to S bytes per thread; bytes = S (uncompressed)";
      std::vector<ZSTD_CCtx*> cc(threads);
      std::vector<ZSTD_DCtx*> dc(threads);
      for (int i = 0; i < threads; ++i) {
        cc[i] = ZSTD_createCCtx();
        dc[i] = ZSTD_createDCtx();
      }
      for (size_t size : sizes) {
        if (std::chrono::steady_clock::now() > s.deadline) {
          pc["truncated"] = pd["truncated"] = true;
          break;
        }
        std::vector<std::vector<unsigned char>> comp(threads, std::vector<unsigned char>(c.bound(size)));
        std::vector<std::vector<unsigned char>> back(threads, std::vector<unsigned char>(size));
        std::vector<size_t> clen(threads);
        std::vector<double> tc, td;
        for (int r = 0; r < s.warmup + s.repetitions; ++r) {
          const double uc = timed_parallel(threads, [&](int i) {
            clen[i] = c.compress(cc[i], data[i].data(), size, comp[i].data(), comp[i].size());
          });
          const double ud = timed_parallel(threads, [&](int i) {
            c.decompress(dc[i], comp[i].data(), clen[i], back[i].data(), size);
          });
          if (r >= s.warmup) {
            tc.push_back(uc);
            td.push_back(ud);
          }
        }
        if (std::memcmp(back[0].data(), data[0].data(), size) != 0) throw std::runtime_error(tag + ": round trip differs");
        const double ratio = static_cast<double>(size) / static_cast<double>(clen[0]);
        json a = sample(static_cast<double>(size), tc), b = sample(static_cast<double>(size), td);
        a["ratio"] = b["ratio"] = ratio;
        a["GBps"] = static_cast<double>(size) * threads / a["median_us"].get<double>() * 1e-3;
        b["GBps"] = static_cast<double>(size) * threads / b["median_us"].get<double>() * 1e-3;
        pc["samples"].push_back(a);
        pd["samples"].push_back(b);
      }
      for (int i = 0; i < threads; ++i) {
        ZSTD_freeCCtx(cc[i]);
        ZSTD_freeDCtx(dc[i]);
      }
      (*probes)[tag + "_compress" + suffix] = pc;
      (*probes)[tag + "_decompress" + suffix] = pd;
    }
  }
  return json{{"zstd", ZSTD_versionString()}, {"lz4", LZ4_versionString()},
              {"data", "alternating 128x128 FP16 key blocks (log-normal channel scales, 4 outlier channels x20) "
                       "and value blocks (Gaussian, sigma 0.4)"}};
}

}  // namespace kvtier::host
