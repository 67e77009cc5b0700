// The tiered pipeline's compute: cpu_attention.h's kernel over N bytes of KV
// blocks resident in DRAM (one layer, all heads, one thread, as the pipeline
// runs it), against N. This is the host's "attention_us" curve. Each run
// reads blocks no run has touched since the last pass over an arena of at
// least four times the last-level cache: a pipeline's layers follow each
// other over more KV than the cache holds, and a kernel timed over the same
// few blocks again and again would measure the cache instead (measured
// here: 2-4x faster than the pipeline's attention).
#include <memory>
#include <random>

#include "cuda_validate/cpu_attention.h"
#include "cuda_validate/host_probes.h"

namespace kvtier::host {

json probe_cpu_attention(const Settings& s, int kv_heads, int head_dim, int block_tokens, json* probes) {
  AttentionShape sh;
  sh.heads = sh.kv_heads = kv_heads;
  sh.head_dim = head_dim;
  sh.block_tokens = block_tokens;
  const size_t bb = sh.block_bytes();
  const size_t max_blocks = s.quick ? 64 : 512;
  const double l3 = machine_info().value("l3_bytes", 32.0 * (1 << 20));
  const size_t arena_blocks = std::max<size_t>(2 * max_blocks, static_cast<size_t>(4 * std::max(l3, 8.0 * (1 << 20)) / double(bb)));
  std::unique_ptr<uint16_t[]> arena(new uint16_t[arena_blocks * bb / 2]);
  std::mt19937 g(7);
  for (size_t i = 0; i < arena_blocks * bb / 2; ++i) arena[i] = static_cast<uint16_t>(0x3000 + (g() & 0x7ff));  // |x| < 1
  size_t cursor = 0;
  std::vector<float> q(size_t(sh.heads) * head_dim, 0.01f), out(q.size());
  json p{{"kind", "compute"},
         {"path", "cpu_attention"},
         {"threads", 1},
         {"isa", attention_isa()},
         {"shape", {{"heads", sh.heads}, {"kv_heads", kv_heads}, {"head_dim", head_dim}, {"block_tokens", block_tokens},
                    {"block_bytes", bb}}},
         {"what", "decode attention (q.K, softmax, .V) of one layer, all heads, over N bytes of FP16 KV blocks in "
                  "DRAM, one thread, blocks not touched since the last pass over an arena of 4x the last-level cache; bytes = N"},
         {"samples", json::array()}};
  for (size_t n : geometric(1, max_blocks, 2)) {
    if (std::chrono::steady_clock::now() > s.deadline) {
      p["truncated"] = true;
      break;
    }
    std::vector<const uint16_t*> blocks(n);
    std::vector<int> tokens(n, block_tokens);
    std::vector<double> t;
    for (int r = 0; r < s.warmup + s.repetitions; ++r) {
      for (size_t i = 0; i < n; ++i) blocks[i] = arena.get() + ((cursor + i) % arena_blocks) * bb / 2;
      cursor = (cursor + n) % arena_blocks;
      const double t0 = now_s();
      attend(sh, q.data(), blocks.data(), tokens.data(), n, out.data());
      if (r >= s.warmup) t.push_back((now_s() - t0) * 1e6);
    }
    json smp = sample(static_cast<double>(n * bb), t);
    smp["GBps"] = static_cast<double>(n * bb) / smp["median_us"].get<double>() * 1e-3;
    p["samples"].push_back(smp);
  }
  (*probes)["cpu_attention"] = p;
  return json{{"isa", attention_isa()}};
}

}  // namespace kvtier::host
