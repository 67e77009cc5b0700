#include "models/gpu_compute.h"

#include <algorithm>

namespace kvtier {

double layer_weights_s(const DeviceModel& gpu, const LlmSpec& m, double tokens) {
  double compute = gpu.flops() > 0 ? tokens * m.weight_flops_per_token_layer() / gpu.flops() : 0;
  double memory = gpu.memory_Bps() > 0 ? m.weight_bytes_per_layer() / gpu.memory_Bps() : 0;
  return std::max(compute, memory);
}

double decode_layer_s(const DeviceModel& gpu, const LlmSpec& m, int batch, double kv_bytes) {
  return layer_weights_s(gpu, m, batch) + gpu.attention_s(kv_bytes);
}

double prefill_layer_s(const DeviceModel& gpu, const LlmSpec& m, int batch, double n) {
  double attn_flops = batch * 2.0 * n * n * m.model_dim();  // QK^T and PV, causal: 4 n^2 d / 2
  double attn = gpu.flops() > 0 ? attn_flops / gpu.flops() : 0;
  return layer_weights_s(gpu, m, batch * n) + attn + gpu.launch_overhead_s();
}

}  // namespace kvtier
