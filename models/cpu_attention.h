// Decode attention on the host CPU over KV that lives in host memory
// (FlexGen's cpu_cache_compute): the GPU sends the new token's query, key and
// value, the CPU reads the sequence's cached K and V once, and only the
// attention output crosses PCIe back. One token of one sequence in one layer
// costs 2 x d FLOPs for q.K^T and 2 x d for the weighted sum of V (d = heads
// x head_dim), and reads that token's K and V; the time is the larger of the
// FLOPs at the cores' rate and the bytes at the memory bandwidth they see.
#pragma once

#include <algorithm>

namespace kvtier {

struct CpuAttentionCost {
  double flops = 0;     // FLOPs of the attention
  double kv_bytes = 0;  // bytes of cached K and V read
};

// `tokens` cached tokens (summed over sequences) in one layer of model dim `d`
// with `kv_bytes_per_token` bytes of K and V per token.
inline CpuAttentionCost cpu_attention_cost(double tokens, double d, double kv_bytes_per_token) {
  return {4.0 * tokens * d, tokens * kv_bytes_per_token};
}

// Seconds on a CPU of `flops_per_s` whose cores see `mem_Bps` of memory bandwidth.
inline double cpu_attention_s(const CpuAttentionCost& c, double flops_per_s, double mem_Bps) {
  const double compute = flops_per_s > 0 ? c.flops / flops_per_s : 0.0;
  const double memory = mem_Bps > 0 ? c.kv_bytes / mem_Bps : 0.0;
  return std::max(compute, memory);
}

}  // namespace kvtier
