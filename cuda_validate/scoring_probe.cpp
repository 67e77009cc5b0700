// CPU importance scoring (HillInfer's f_c): one INT8 query against N bytes
// of INT8 or INT4 keys (head dim 128), with the widest vector extension the
// CPU has, on one core and on all cores (each scoring its share of the rows).
// The figure is bytes of keys scored per second; the result of every
// implementation is checked against the scalar reference first.
#include <memory>
#include <stdexcept>

#include "cuda_validate/host_probes.h"
#include "cuda_validate/int_scoring.h"

namespace kvtier::host {

namespace {

constexpr size_t kDim = 128;

json run(const Settings& s, Isa isa, int bits, int threads, const std::vector<size_t>& sizes,
         const std::vector<int8_t>& q, const uint8_t* keys) {
  json p{{"kind", "scoring"},
         {"path", "score_int" + std::to_string(bits)},
         {"threads", threads},
         {"bits", bits},
         {"isa", isa_name(isa)},
         {"what", "q.K of one INT8 query against N bytes of INT" + std::to_string(bits) + " keys (head dim 128), " +
                      std::to_string(threads) + " thread(s), " + isa_name(isa) + "; bytes = key bytes scored"},
         {"samples", json::array()}};
  const size_t row_bytes = kDim * bits / 8;
  for (size_t bytes : sizes) {
    if (std::chrono::steady_clock::now() > s.deadline) {
      p["truncated"] = true;
      break;
    }
    const size_t rows = bytes / row_bytes;
    std::vector<int32_t> out(rows);
    const size_t inner = std::max<size_t>(1, (size_t(4) << 20) / bytes);
    std::vector<double> t;
    for (int r = 0; r < s.warmup + s.repetitions; ++r) {
      const double us = timed_parallel(threads, [&](int i) {
        const size_t a = rows * i / threads, b = rows * (i + 1) / threads;
        for (size_t k = 0; k < inner; ++k) {
          if (bits == 8)
            score_int8(isa, q.data(), reinterpret_cast<const int8_t*>(keys) + a * row_bytes, b - a, kDim, out.data() + a);
          else
            score_int4(isa, q.data(), keys + a * row_bytes, b - a, kDim, out.data() + a);
        }
      });
      if (r >= s.warmup) t.push_back(us / static_cast<double>(inner));
    }
    json smp = sample(static_cast<double>(bytes), t);
    smp["GBps"] = static_cast<double>(bytes) / smp["median_us"].get<double>() * 1e-3;
    p["samples"].push_back(smp);
  }
  return p;
}

}  // namespace

json probe_scoring(const Settings& s, json* probes) {
  const Isa isa = best_isa();
  const size_t hi = s.quick ? (size_t(16) << 20) : (size_t(256) << 20);
  const auto sizes = geometric(size_t(64) << 10, hi, s.quick ? 4 : 2);
  std::unique_ptr<uint8_t[]> keys(new uint8_t[hi]);
  uint64_t x = 12345;
  for (size_t i = 0; i < hi; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    // Symmetric INT8 quantization uses -127..127 (never -128), which the
    // sign trick of the SSSE3/AVX2 paths relies on; INT4 uses every nibble.
    const uint8_t v = static_cast<uint8_t>(x >> 56);
    keys[i] = v == 0x80 ? 0x81 : v;
  }
  std::vector<int8_t> q(kDim);
  for (size_t d = 0; d < kDim; ++d) q[d] = static_cast<int8_t>(int(d * 37 % 255) - 127);
  // The vector paths must agree with the scalar reference.
  const size_t check_rows = 512;
  std::vector<int32_t> ref(check_rows), got(check_rows);
  score_int8(Isa::Scalar, q.data(), reinterpret_cast<const int8_t*>(keys.get()), check_rows, kDim, ref.data());
  score_int8(isa, q.data(), reinterpret_cast<const int8_t*>(keys.get()), check_rows, kDim, got.data());
  if (ref != got) throw std::runtime_error("INT8 scoring: " + isa_name(isa) + " disagrees with the scalar reference");
  score_int4(Isa::Scalar, q.data(), keys.get(), check_rows, kDim, ref.data());
  score_int4(isa, q.data(), keys.get(), check_rows, kDim, got.data());
  if (ref != got) throw std::runtime_error("INT4 scoring: " + isa_name(isa) + " disagrees with the scalar reference");
  for (int bits : {8, 4}) {
    const std::string b = "score_int" + std::to_string(bits);
    (*probes)[b + "_1t"] = run(s, isa, bits, 1, sizes, q, keys.get());
    (*probes)[b + "_all"] = run(s, isa, bits, s.threads, sizes, q, keys.get());
  }
  return json{{"isa", isa_name(isa)}, {"verified_against_scalar", true}, {"head_dim", kDim}};
}

}  // namespace kvtier::host
